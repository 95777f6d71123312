//! What a person who approves one command line approves with it: the commands it runs
//! through wrappers (`env git push` runs `git push`) and the scripts it hands a shell, as exact
//! argument vectors. The exec supervisor asks about each exec it sees; without these, it
//! would ask again about the program the approved wrapper runs.

use crate::shell::Word;

use super::views::Explorer;

/// The most command lines one approval carries.
const MAX_RUNS: usize = 64;
/// How many shells deep the scripts are followed (`sh -c "sh -c '...'"`).
const MAX_DEPTH: usize = 4;

/// `argv` and every command it runs whose words are all literal: the views through each
/// wrapper, and the simple commands of each script it runs (`sh -c TEXT`), in turn.
pub fn runs_of(argv: &[String]) -> Vec<Vec<String>> {
    let mut runs = vec![argv.to_vec()];
    let mut next = vec![(argv.iter().cloned().map(Word::Literal).collect(), 0)];
    while let Some((words, depth)) = next.pop() {
        let explorer = Explorer::of(words, None);
        for view in &explorer.views {
            if let Some(literal) = literal(view)
                && !runs.contains(&literal)
                && runs.len() < MAX_RUNS
            {
                runs.push(literal);
            }
        }
        if depth >= MAX_DEPTH {
            continue;
        }
        for script in &explorer.scripts {
            for command in crate::shell::parse(script).commands {
                if runs.len() + next.len() < MAX_RUNS {
                    next.push((command.words, depth + 1));
                }
            }
        }
    }
    runs
}

fn literal(words: &[Word]) -> Option<Vec<String>> {
    let words: Option<Vec<String>> = words
        .iter()
        .map(|w| w.as_literal().map(str::to_owned))
        .collect();
    words.filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn a_wrapper_approved_carries_the_command_it_runs() {
        let runs = runs_of(&argv(&["env", "-i", "git", "push", "origin"]));
        assert!(runs.contains(&argv(&["git", "push", "origin"])), "{runs:?}");
    }

    #[test]
    fn a_shell_approved_carries_the_simple_commands_of_its_script() {
        let runs = runs_of(&argv(&["sh", "-c", "git push origin main && echo $HOME"]));
        assert!(
            runs.contains(&argv(&["git", "push", "origin", "main"])),
            "{runs:?}"
        );
        // A command with a part only known when it runs is not carried.
        assert!(!runs.iter().any(|r| r[0] == "echo"), "{runs:?}");
    }

    #[test]
    fn nothing_else_is_carried() {
        assert_eq!(
            runs_of(&argv(&["git", "status"])),
            vec![argv(&["git", "status"])]
        );
    }
}
