//! Splitting a `bash -c` command line into the simple commands it runs, so that command rules
//! see `git push` inside `cd x && git push` or `ls | xargs rm`.
//!
//! Understood: words with single quotes, double quotes and backslash escapes; the separators
//! `;`, `&&`, `||`, `|`, `|&`, `&` and newlines; grouping with `( ... )` and `{ ...; }`;
//! redirections (`>`, `>>`, `<`, `2>&1`, `&>`, `<<<`, with or without a space before the
//! target), which are dropped; leading variable assignments (`FOO=1 cmd`), which are dropped;
//! comments; the keywords `if then else elif fi while until do done for in case esac !`, which
//! are skipped so the commands inside are checked.
//!
//! Not understood, and reported as [`Split::opaque`] so the caller treats the whole command as
//! `ask`: command substitution (`$(...)`, backticks), process substitution (`<(...)`), here
//! documents (`<<`), `eval`, `source`/`.`, `exec` of a variable, arithmetic `$((...))`,
//! functions (`name() {`), `case` patterns, and any unbalanced quote or bracket. Variables in
//! the command position (`$CMD args`) are opaque too: their value is unknown before running.

/// The simple commands found, and why the line could not be fully understood.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Split {
    /// Every simple command, as argv (quotes removed).
    pub commands: Vec<Vec<String>>,
    /// Why the parser could not see everything (empty when it could).
    pub opaque: Vec<String>,
}

const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "while", "until", "do", "done", "for", "in", "case",
    "esac", "!", "{", "}", "time",
];

#[derive(Debug, PartialEq)]
enum Tok {
    Word(String),
    Sep,
    Open,
    Close,
}

/// Splits `line` into simple commands.
pub fn split(line: &str) -> Split {
    let mut out = Split::default();
    let tokens = match tokenize(line, &mut out.opaque) {
        Some(t) => t,
        None => return out,
    };
    let mut depth: i32 = 0;
    let mut current: Vec<String> = Vec::new();
    let mut expect_target = false;
    let mut after_for = false;
    let flush = |current: &mut Vec<String>, out: &mut Split| {
        if !current.is_empty() {
            out.commands.push(std::mem::take(current));
        }
    };
    for tok in tokens {
        match tok {
            Tok::Sep => {
                flush(&mut current, &mut out);
                after_for = false;
            }
            Tok::Open => {
                if !current.is_empty() {
                    // `name() {`: a function definition.
                    out.opaque.push("function definition".into());
                }
                flush(&mut current, &mut out);
                depth += 1;
            }
            Tok::Close => {
                flush(&mut current, &mut out);
                depth -= 1;
                if depth < 0 {
                    out.opaque.push("unbalanced `)`".into());
                    depth = 0;
                }
            }
            Tok::Word(w) => {
                if expect_target {
                    expect_target = false;
                    continue;
                }
                if let Some(rest) = redirection(&w) {
                    if rest.is_empty() {
                        expect_target = true;
                    }
                    continue;
                }
                if current.is_empty() {
                    if after_for {
                        // `for x in a b c; do`: the loop words are not a command.
                        continue;
                    }
                    if KEYWORDS.contains(&w.as_str()) {
                        if w == "for" || w == "case" {
                            after_for = true;
                            if w == "case" {
                                out.opaque.push("case statement".into());
                            }
                        }
                        continue;
                    }
                    if is_assignment(&w) {
                        continue;
                    }
                    if w.starts_with('$') {
                        out.opaque
                            .push(format!("command name from a variable: `{w}`"));
                    }
                    if matches!(w.as_str(), "eval" | "source" | "." | "exec" | "coproc") {
                        out.opaque
                            .push(format!("`{w}` runs code the splitter cannot see"));
                    }
                }
                current.push(w);
            }
        }
    }
    flush(&mut current, &mut out);
    if depth != 0 {
        out.opaque.push("unbalanced `(`".into());
    }
    out
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '+')
        }
        None => false,
    }
}

/// If `word` is a redirection operator (possibly with its target glued on), returns the glued
/// target (empty when the target is the next word).
fn redirection(word: &str) -> Option<&str> {
    let digits = word.trim_start_matches(|c: char| c.is_ascii_digit());
    for op in ["&>>", "&>", ">>", ">&", "<&", "<>", ">|", "<<<", ">", "<"] {
        if let Some(rest) = digits.strip_prefix(op) {
            return Some(rest);
        }
    }
    None
}

/// Whether `word` so far is a descriptor number or a redirection operator in progress, so a
/// following `>`/`<` belongs to it.
fn starts_redirection(word: &str) -> bool {
    word.chars().all(|c| c.is_ascii_digit()) || word.ends_with(['>', '<', '&'])
}

fn tokenize(line: &str, opaque: &mut Vec<String>) -> Option<Vec<Tok>> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let push_word = |word: &mut String, in_word: &mut bool, tokens: &mut Vec<Tok>| {
        if *in_word {
            tokens.push(Tok::Word(std::mem::take(word)));
            *in_word = false;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    word.push(chars[i]);
                    i += 1;
                }
                if i >= chars.len() {
                    opaque.push("unclosed single quote".into());
                    return None;
                }
            }
            '"' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    } else if chars[i] == '`' || (chars[i] == '$' && chars.get(i + 1) == Some(&'('))
                    {
                        opaque.push("command substitution".into());
                    }
                    word.push(chars[i]);
                    i += 1;
                }
                if i >= chars.len() {
                    opaque.push("unclosed double quote".into());
                    return None;
                }
            }
            '\\' => {
                in_word = true;
                if let Some(&next) = chars.get(i + 1) {
                    if next != '\n' {
                        word.push(next);
                    }
                    i += 1;
                }
            }
            '`' => {
                opaque.push("command substitution".into());
                in_word = true;
                word.push(c);
            }
            '$' if chars.get(i + 1) == Some(&'(') => {
                // Take the whole `$( ... )` / `$(( ... ))` into the word, balancing parentheses.
                let mut depth = 0usize;
                let mut j = i + 1;
                while j < chars.len() {
                    match chars[j] {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                if j >= chars.len() {
                    opaque.push("unbalanced `$(`".into());
                    return None;
                }
                let inner: String = chars[i..=j].iter().collect();
                let arithmetic = chars.get(i + 2) == Some(&'(');
                if !arithmetic || inner[3..].contains("$(") || inner.contains('`') {
                    opaque.push("command substitution".into());
                }
                in_word = true;
                word.push_str(&inner);
                i = j;
            }
            '#' if !in_word => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            ' ' | '\t' => push_word(&mut word, &mut in_word, &mut tokens),
            '\n' | ';' => {
                push_word(&mut word, &mut in_word, &mut tokens);
                tokens.push(Tok::Sep);
            }
            '&' | '|' => {
                // `>&2`, `&>file` belong to a redirection word.
                let redirect = c == '&'
                    && (word.ends_with('>')
                        || word.ends_with('<')
                        || (!in_word && chars.get(i + 1) == Some(&'>')));
                if redirect {
                    word.push(c);
                    in_word = true;
                } else {
                    push_word(&mut word, &mut in_word, &mut tokens);
                    tokens.push(Tok::Sep);
                    if chars.get(i + 1) == Some(&c) || (c == '|' && chars.get(i + 1) == Some(&'&'))
                    {
                        i += 1;
                    }
                }
            }
            '(' => {
                if word.ends_with('<') || word.ends_with('>') {
                    opaque.push("process substitution".into());
                }
                push_word(&mut word, &mut in_word, &mut tokens);
                tokens.push(Tok::Open);
            }
            ')' => {
                push_word(&mut word, &mut in_word, &mut tokens);
                tokens.push(Tok::Close);
            }
            '>' => {
                // `x>>y`: the redirection starts a new word unless it follows a descriptor
                // number (`2>`) or is part of one (`>>`, `&>`).
                if in_word && !starts_redirection(&word) {
                    push_word(&mut word, &mut in_word, &mut tokens);
                }
                in_word = true;
                word.push(c);
            }
            '<' => {
                if in_word && !starts_redirection(&word) {
                    push_word(&mut word, &mut in_word, &mut tokens);
                }
                let run = chars[i..].iter().take_while(|&&x| x == '<').count();
                if run == 2 {
                    opaque.push("here document".into());
                }
                in_word = true;
                for _ in 0..run {
                    word.push('<');
                }
                i += run - 1;
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
        i += 1;
    }
    push_word(&mut word, &mut in_word, &mut tokens);
    Some(tokens)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn cmds(line: &str) -> Vec<Vec<String>> {
        let s = split(line);
        assert!(s.opaque.is_empty(), "{line}: {:?}", s.opaque);
        s.commands
    }

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn separators_split_simple_commands() {
        assert_eq!(
            cmds("cd x && git push"),
            [v(&["cd", "x"]), v(&["git", "push"])]
        );
        assert_eq!(
            cmds("a; b || c | d & e"),
            [v(&["a"]), v(&["b"]), v(&["c"]), v(&["d"]), v(&["e"])]
        );
        assert_eq!(cmds("a\nb |& c"), [v(&["a"]), v(&["b"]), v(&["c"])]);
    }

    #[test]
    fn quotes_and_escapes_are_removed() {
        assert_eq!(
            cmds(r#"git commit -m 'a && b' "c;d" e\ f"#),
            [v(&["git", "commit", "-m", "a && b", "c;d", "e f"])]
        );
    }

    #[test]
    fn redirections_and_assignments_are_dropped() {
        assert_eq!(cmds("FOO=1 git push >out 2>&1 < in"), [v(&["git", "push"])]);
        assert_eq!(
            cmds("make &> log; echo x>>y"),
            [v(&["make"]), v(&["echo", "x"])]
        );
    }

    #[test]
    fn groups_and_keywords_expose_inner_commands() {
        assert_eq!(
            cmds("(cd x && git push)"),
            [v(&["cd", "x"]), v(&["git", "push"])]
        );
        assert_eq!(cmds("{ git push; }"), [v(&["git", "push"])]);
        assert_eq!(
            cmds("if true; then git push; fi"),
            [v(&["true"]), v(&["git", "push"])]
        );
        assert_eq!(cmds("for f in a b; do rm $f; done"), [v(&["rm", "$f"])]);
        assert_eq!(
            cmds("while true; do sleep 1; done # comment"),
            [v(&["true"]), v(&["sleep", "1"])]
        );
    }

    #[test]
    fn what_is_not_understood_is_opaque() {
        for line in [
            "echo $(git push)",
            "echo `git push`",
            "cat <(git push)",
            "eval \"git push\"",
            "source x.sh",
            "$CMD push",
            "cat <<EOF\nx\nEOF",
            "echo 'unterminated",
            "(a",
            "f() { git push; }",
        ] {
            assert!(!split(line).opaque.is_empty(), "{line} should be opaque");
        }
    }

    #[test]
    fn arithmetic_without_substitution_is_understood() {
        assert_eq!(
            cmds("echo $((6*7)); ls"),
            [v(&["echo", "$((6*7))"]), v(&["ls"])]
        );
        assert!(!split("echo $(( $(git push) ))").opaque.is_empty());
        assert!(!split("echo $(git push").opaque.is_empty());
    }

    #[test]
    fn here_strings_are_fine() {
        assert_eq!(cmds("cat <<< word"), [v(&["cat"])]);
    }
}
