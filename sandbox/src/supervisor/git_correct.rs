//! What git may run in place of a subcommand it does not know: with `help.autocorrect` set
//! (in any config file git reads, which may change after the exec is decided), git corrects
//! `git psh` to `git push` and runs the builtin in the same process, with no exec for the
//! supervisor to see. So for a subcommand that is neither a builtin nor a program git is sure
//! to know (a `git-SUB` it counts as a command, which cannot change), the command line with each
//! builtin git's correction could pick in its place is given to the rule engine as one git
//! may run instead (`ExecFacts::instead`, each decided on its own): the strictest decision
//! wins.
//!
//! git weighs every command it knows (its builtins, the `git-*` programs it finds, the
//! aliases it reads): a common command that starts with what was typed stops the correction,
//! and otherwise it picks the closest by weighted edit distance (a swap 0, a substitution 2, an
//! insertion 1, a deletion 3), at most 5, when one alone is closest. Where git's builtins are
//! sure to be among its candidates, a builtin is taken here when it is within that distance
//! and closer than every builtin of every git (what the sandbox adds only competes); where
//! they may not be (an older git's exec path the sandbox chose, not one where git is
//! installed for good), every builtin within reach is taken.
//! Checked against git 2.47 and 2.39 over 700 mistyped commands: every builtin git picked
//! was taken.

use std::collections::BTreeMap;
use std::path::Path;

use super::git::global_options;
use super::git_builtins::{self, BUILTINS, COMMON};
use super::settled::Settler;

/// The largest distance git still corrects (its similarity, the distance plus one, is below 7).
const MOST: usize = 5;

/// The command lines git could run in its own process for `git ... SUB ...` (`argv`; `SUB`
/// after its global options): `SUB` replaced by each builtin a correction could pick; none
/// when `SUB` is a builtin or git is sure to know a program `git-SUB` ([`runs_external`]).
/// An alias of the same name given on git's command line stops them (git runs an alias
/// before it corrects anything); one in a config file does not: whether git reads the file
/// that defines it cannot be known at the exec (a file git never reads, one changed or
/// blocking meanwhile), and the strictest decision wins. `settler` knows which files cannot change (`None`: no
/// mount view, so none is relied on).
pub fn corrections(
    argv: &[String],
    env: Option<&BTreeMap<String, String>>,
    mut settler: Option<&mut Settler>,
) -> Vec<Vec<String>> {
    let at = global_options(argv).1;
    let Some(sub) = argv
        .get(at)
        .map(String::as_str)
        .filter(|s| !s.is_empty() && *s != "--")
    else {
        return Vec::new();
    };
    let builtin = git_builtins::in_every_git(sub);
    let option = exec_path(argv);
    if builtin
        || super::git::alias_given(argv, env, sub)
        || runs_external(sub, option, env, settler.as_deref_mut())
    {
        return Vec::new();
    }
    let typed = bytes_at_least(sub);
    // git's own builtins compete with every candidate where it surely lists them: a newer git
    // always, an older one from its exec path, so that must be the one built in or an
    // installed one (git sets `GIT_EXEC_PATH` to its own for every hook and `!` alias; found
    // by a seventh red-team pass, where a hook's `git st` was denied); and `sub` must be read
    // as git reads it.
    let exec_dir = option.or_else(|| {
        env.and_then(|e| e.get("GIT_EXEC_PATH"))
            .map(String::as_str)
            .filter(|d| !d.is_empty())
    });
    let competed = env.is_some()
        && !sub.contains(char::REPLACEMENT_CHARACTER)
        && exec_dir
            .is_none_or(|dir| settler.is_some_and(|s| installed_exec_path(Path::new(dir), s)));
    let possible: Vec<&str> = if competed {
        picked_among_builtins(&typed)
    } else {
        BUILTINS
            .iter()
            .copied()
            .filter(|b| b.as_bytes().starts_with(&typed) || distance(&typed, b.as_bytes()) <= MOST)
            .collect()
    };
    possible
        .into_iter()
        .map(|b| {
            let mut corrected = argv.to_vec();
            corrected[at] = (*b).to_owned();
            corrected
        })
        .collect()
}

/// The builtins git may correct `typed` to, where its builtins are among the candidates it
/// weighs: none when a common command starts with `typed`; otherwise each builtin within
/// git's distance that is strictly closer than every builtin every git has (git corrects only
/// to a single closest candidate, and what the sandbox adds, aliases and `git-*` programs,
/// only competes with them). Every git since 2.17: its common commands and builtins.
fn picked_among_builtins(typed: &[u8]) -> Vec<&'static str> {
    if COMMON.iter().any(|c| c.as_bytes().starts_with(typed)) {
        return Vec::new();
    }
    let scores: Vec<usize> = BUILTINS
        .iter()
        .map(|b| distance(typed, b.as_bytes()))
        .collect();
    BUILTINS
        .iter()
        .zip(&scores)
        .filter(|&(b, &score)| {
            score <= MOST
                && BUILTINS.iter().zip(&scores).all(|(other, &theirs)| {
                    other == b || !git_builtins::competes(other) || theirs > score
                })
        })
        .map(|(b, _)| *b)
        .collect()
}

/// `sub` as bytes for git's distance, which counts bytes: the argv was read as text, where
/// each run of bytes that are not UTF-8 became one U+FFFD. Such a run stands for one to three
/// bytes, none of them ASCII, so none equals a byte of a builtin's name: one byte that matches
/// nothing gives the least distance git could see (each further byte adds an edit), and so
/// every builtin git could pick.
fn bytes_at_least(sub: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(sub.len());
    for c in sub.chars() {
        if c == char::REPLACEMENT_CHARACTER {
            out.push(0xff);
        } else {
            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        }
    }
    out
}

/// The last `--exec-path=DIR` among git's global options (the one git uses).
fn exec_path(argv: &[String]) -> Option<&str> {
    global_options(argv)
        .0
        .into_iter()
        .rev()
        .find(|(name, _)| *name == "--exec-path")
        .and_then(|(_, value)| value)
}

/// Whether git is sure to know a program `git-SUB`, so that it never corrects `SUB`: before
/// correcting, git lists the `git-*` files of its exec path and of every `PATH` directory
/// that it counts as commands (`is_executable`: a regular file, symlinks followed, with the
/// owner's execute bit, whoever runs it), and dies if `git-SUB` is among them (the exec of
/// it failed, or it would have run: "appears to be a git command, but we were not able to
/// execute it"). So one such file that nothing in the sandbox can remove or change
/// ([`Settler::stable_file`]), in a directory anyone may list (git lists it with `opendir`),
/// in its exec path (`--exec-path` or `GIT_EXEC_PATH`; the one built into the git that runs
/// is not known here, so not looked in) or in `PATH` (from `env`) is enough, wherever it is in
/// the search. Not relied on: a file git does not count (no owner's execute bit, though others
/// may run it), one that could change, and names git would look for differently than read
/// here (a `/` in `SUB`, which names a file in another directory; bytes that are not UTF-8,
/// read here as U+FFFD).
fn runs_external(
    sub: &str,
    option: Option<&str>,
    env: Option<&BTreeMap<String, String>>,
    settler: Option<&mut Settler>,
) -> bool {
    let (Some(env), Some(settler)) = (env, settler) else {
        return false;
    };
    let lossy = |s: &str| s.contains(char::REPLACEMENT_CHARACTER);
    if sub.contains('/') || lossy(sub) {
        return false;
    }
    let exec_path = option.or(env.get("GIT_EXEC_PATH").map(String::as_str));
    let path = env.get("PATH").map_or("", String::as_str);
    let name = format!("git-{sub}");
    exec_path
        .into_iter()
        .chain(path.split(':'))
        .filter(|dir| !lossy(dir))
        .map(Path::new)
        .any(|dir| stable_command(dir, &name, settler))
}

/// Whether `dir` is an exec path where git is installed, as the one built into git is: it
/// holds git's `git-status` (a hard link of git, like every dashed builtin) on a mount the
/// sandbox cannot write, in a directory anyone may list.
fn installed_exec_path(dir: &Path, settler: &mut Settler) -> bool {
    command_in(dir, "git-status", settler, Settler::installed_file)
}

/// Whether git, listing the absolute directory `dir` (`opendir`, so anyone may list it),
/// surely finds `name` there as a command (a regular file with the owner's execute bit) that
/// nothing in the sandbox can remove or change.
fn stable_command(dir: &Path, name: &str, settler: &mut Settler) -> bool {
    command_in(dir, name, settler, Settler::stable_file)
}

/// Whether `dir` (absolute, read as git reads it, listable by anyone) holds `name` with the
/// owner's execute bit, as `file` finds it for good.
fn command_in(
    dir: &Path,
    name: &str,
    settler: &mut Settler,
    file: fn(&mut Settler, &Path) -> Option<std::fs::Metadata>,
) -> bool {
    use std::os::unix::fs::PermissionsExt;
    dir.is_absolute()
        && !dir.to_string_lossy().contains(char::REPLACEMENT_CHARACTER)
        && file(settler, &dir.join(name)).is_some_and(|m| m.permissions().mode() & 0o100 != 0)
        && std::fs::canonicalize(dir).is_ok_and(|d| settler.listable_by_anyone(&d))
}

/// The weighted edit distance from `a` (typed) to `b` (a candidate) (optimal string alignment): a swap
/// of two neighbours 0, a substitution 2, an insertion 1, a deletion 3.
fn distance(a: &[u8], b: &[u8]) -> usize {
    const SWAP: usize = 0;
    const SUBSTITUTE: usize = 2;
    const INSERT: usize = 1;
    const DELETE: usize = 3;
    // Rows i-2, i-1 and i of the table of distances between prefixes.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).map(|j| j * INSERT).collect();
    for i in 1..=a.len() {
        let mut row = vec![i * DELETE; b.len() + 1];
        for j in 1..=b.len() {
            let replace = last[j - 1] + if a[i - 1] == b[j - 1] { 0 } else { SUBSTITUTE };
            let mut best = replace.min(last[j] + DELETE).min(row[j - 1] + INSERT);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + SWAP);
            }
            row[j] = best;
        }
        before = std::mem::replace(&mut last, row);
    }
    last[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    /// The builtins the corrections of `line` put in place of its subcommand.
    fn corrected(line: &str) -> Vec<String> {
        let words = argv(line);
        let at = global_options(&words).1;
        corrections(&words, None, None)
            .into_iter()
            .map(|mut v| std::mem::take(&mut v[at]))
            .collect()
    }

    #[test]
    fn a_mistyped_subcommand_may_run_the_builtins_git_would_correct_it_to() {
        for typed in ["psh", "pusj", "puhs", "pus", "posh"] {
            assert!(
                corrected(&format!("git -C repo -c help.autocorrect=1 {typed} origin"))
                    .contains(&"push".to_owned()),
                "{typed}"
            );
        }
        assert!(corrected("git comit -m x").contains(&"commit".to_owned()));
    }

    #[test]
    fn builtins_and_words_too_far_from_any_builtin_are_left_alone() {
        assert!(corrected("git push origin").is_empty());
        assert!(corrected("git status").is_empty());
        assert!(corrected("git --no-pager").is_empty());
        assert!(corrected("git frobnicate-the-widgets").is_empty());
        // One after an option that takes a value.
        assert!(corrected("git --shallow-file status push").is_empty());
    }

    #[test]
    fn a_subcommand_with_bytes_that_are_not_text_is_corrected_as_git_counts_bytes() {
        // `git $'pus\xff'` as the supervisor reads it: git corrects it to `push`.
        let read = |raw: &[u8]| {
            let sub = String::from_utf8_lossy(raw).into_owned();
            let found = corrections(&["git".to_owned(), sub, "origin".to_owned()], None, None);
            found.into_iter().map(|v| v[1].clone()).collect::<Vec<_>>()
        };
        let one_byte = read(b"pus\xff");
        assert!(one_byte.contains(&"push".to_owned()), "{one_byte:?}");
        // One byte that matches no builtin's, as `~` matches none.
        assert_eq!(one_byte, corrected("git pus~ origin"));
        // A cut UTF-8 sequence (two bytes, one U+FFFD), and two separate bytes.
        assert!(read(b"pus\xe2\x82").contains(&"push".to_owned()));
        assert!(read(b"pu\xff\xfe").contains(&"push".to_owned()));
    }

    #[test]
    fn a_correction_is_the_whole_command_line_with_the_subcommand_replaced() {
        let found = corrections(
            &argv("git -C r -c help.autocorrect=1 psh origin main"),
            None,
            None,
        );
        assert!(
            found.contains(&argv("git -C r -c help.autocorrect=1 push origin main")),
            "{found:?}"
        );
    }

    /// The builtins the corrections of `line` put in place of its subcommand, where git's
    /// builtins compete (the environment read, no exec path of the sandbox's).
    fn competed(line: &str) -> Vec<String> {
        let words = argv(line);
        let at = global_options(&words).1;
        let env: BTreeMap<String, String> = [("PATH".to_owned(), "/usr/bin".to_owned())].into();
        corrections(&words, Some(&env), None)
            .into_iter()
            .map(|mut v| std::mem::take(&mut v[at]))
            .collect()
    }

    #[test]
    fn a_word_git_would_not_correct_for_its_builtins_is_not_corrected() {
        // Found by a sixth red-team pass on 2026-12-07: the common aliases `git st` and `git
        // pl` were denied as `git push`. A common command starting with the word (`status`,
        // `push`) stops git's correction; `pull` and `help` tie for `pl`.
        for typed in ["st", "pl", "pus", "sta", "co", "ci", "br"] {
            assert_eq!(
                competed(&format!("git {typed}")),
                Vec::<String>::new(),
                "{typed}"
            );
        }
    }

    #[test]
    fn an_alias_given_on_the_command_line_stops_the_corrections() {
        // git runs an alias before it corrects (a UX pass on 2026-12-07 found `git -c
        // alias.ps=status ps` denied as `git push`); its name compared as git does.
        let push = "push".to_owned();
        assert!(corrected("git -c alias.ps=status ps").is_empty());
        assert!(corrected("git -c alias.PS=status ps").is_empty());
        assert!(corrected("git -c alias.ps=status PS").is_empty());
        assert!(corrected("git -c alias.ps ps").is_empty());
        let env = BTreeMap::from([(
            "GIT_CONFIG_PARAMETERS".to_owned(),
            "'alias.ps'='status'".to_owned(),
        )]);
        assert!(corrections(&argv("git ps"), Some(&env), None).is_empty());
        // Another alias, or one of the same name in another section, does not; nor one whose
        // name git compares otherwise: a subsection (its case kept) or a byte that is not
        // UTF-8, read here as U+FFFD (a tenth red-team pass).
        assert!(corrected("git -c alias.pp=status ps").contains(&push));
        let lossy = ["git", "-c", "alias.P\u{FFFD}.h=status", "p\u{FFFD}.h"].map(str::to_owned);
        assert!(!corrections(&lossy, None, None).is_empty());
        assert!(corrected("git -c alias.P.h=status p.h").contains(&push));
        let env = BTreeMap::from([(
            "GIT_CONFIG_PARAMETERS".to_owned(),
            "'alias.P\u{FFFD}.h'='status'".to_owned(),
        )]);
        assert!(!corrections(&argv("git p\u{FFFD}.h"), Some(&env), None).is_empty());
        assert!(corrected("git -c aliases.ps=status ps").contains(&push));
        assert!(corrected("git -c alias.x.ps=status ps").contains(&push));
        assert!(corrected("git ps").contains(&push));
    }

    #[test]
    fn a_word_git_corrects_to_one_builtin_is_corrected_to_it() {
        // As git 2.47 and 2.39 do.
        assert_eq!(competed("git psh"), ["push"]);
        assert_eq!(competed("git comit"), ["commit"]);
        assert_eq!(competed("git pusj"), ["push"]);
        assert_eq!(competed("git lg"), ["log"]);
    }

    #[test]
    fn builtins_some_git_lacks_do_not_outscore_a_correction() {
        // An older git lists its commands from its exec path, with no `git-version` there:
        // `versen` is `reset` to git 2.17 to 2.28 (found by review on 2026-12-07).
        assert!(competed("git versen").contains(&"reset".to_owned()));
        // And a builtin younger than 2.17 is an unknown command to an older git.
        assert!(!competed("git restore").is_empty());
        assert!(!competed("git for-each-repo").is_empty());
    }

    #[test]
    fn an_exec_path_of_the_sandboxs_leaves_every_builtin_within_reach() {
        // An older git lists its builtins from its exec path, which may then hold none.
        assert!(corrected("git --exec-path=/ws/empty pl").contains(&"push".to_owned()));
        let words = argv("git pl");
        let env: BTreeMap<String, String> = [("GIT_EXEC_PATH".to_owned(), "/ws".to_owned())].into();
        let found = corrections(&words, Some(&env), None);
        assert!(found.contains(&argv("git push")), "{found:?}");
    }

    #[test]
    fn an_installed_exec_path_keeps_gits_builtins_competing() {
        // git sets `GIT_EXEC_PATH` to its own for every hook and `!` alias (a seventh red-team
        // pass: a hook's `git st` was denied as `git push`).
        let ws = leaked_dir();
        let installed = leaked_dir();
        let file = installed.join("git-status");
        std::fs::write(&file, "").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A hard link of git, as every dashed builtin is.
        std::fs::hard_link(&file, installed.join("git-log")).unwrap();
        let with_exec_path = |dir: &Path| {
            let env: BTreeMap<String, String> =
                [("GIT_EXEC_PATH".to_owned(), dir.display().to_string())].into();
            let mut settler = Settler::with_writable(ws);
            corrections(&argv("git pl"), Some(&env), Some(&mut settler))
        };
        assert_eq!(with_exec_path(installed), Vec::<Vec<String>>::new());
        // One the sandbox can change, or without git's builtins: every builtin within reach.
        std::fs::write(ws.join("git-status"), "").unwrap();
        std::fs::set_permissions(
            ws.join("git-status"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert!(with_exec_path(ws).contains(&argv("git push")));
        assert!(with_exec_path(leaked_dir()).contains(&argv("git push")));
    }

    #[test]
    fn a_builtin_only_newer_gits_have_is_corrected_as_an_older_git_would() {
        assert!(corrected("git refs").contains(&"reset".to_owned()));
        assert!(corrected("git status").is_empty());
    }

    #[test]
    fn the_distance_weighs_edits_as_git_does() {
        assert_eq!(distance(b"push", b"push"), 0);
        assert_eq!(distance(b"puhs", b"push"), 0);
        assert_eq!(distance(b"psh", b"push"), 1);
        assert_eq!(distance(b"pusj", b"push"), 2);
        assert_eq!(distance(b"pushh", b"push"), 3);
        assert_eq!(distance(b"", b"add"), 3);
    }

    #[test]
    fn the_last_exec_path_option_is_the_one_git_uses() {
        let line = argv("git --exec-path=/a --no-pager --exec-path=/b psh");
        assert_eq!(exec_path(&line), Some("/b"));
        assert_eq!(exec_path(&argv("git psh --exec-path=/a")), None);
    }

    /// `git psh` with `PATH` holding `dirs`, decided with a mount view where only `writable`
    /// is writable.
    fn psh_with_path(dirs: &[&Path], writable: &Path) -> Vec<Vec<String>> {
        let path = dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        let env: BTreeMap<String, String> = [("PATH".to_owned(), path)].into();
        let mut settler = Settler::with_writable(writable);
        corrections(&argv("git psh"), Some(&env), Some(&mut settler))
    }

    /// A directory anyone may list (a temporary one is its owner's alone).
    fn leaked_dir() -> &'static Path {
        let dir = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::mem::forget(dir);
        Box::leak(path.into_boxed_path())
    }

    fn program(dir: &Path, mode: u32) -> std::path::PathBuf {
        let file = dir.join("git-psh");
        // A file of mode 011 cannot be opened for writing by its owner: made anew.
        let _ = std::fs::remove_file(&file);
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        file
    }

    #[test]
    fn an_external_git_command_that_cannot_change_stops_the_corrections() {
        let ws = leaked_dir();
        let ro = leaked_dir();
        program(ro, 0o755);
        // Anywhere in the search: git lists every directory before it corrects.
        assert!(psh_with_path(&[ws, ro], ws).is_empty());
        // Owner's execute bit only: others cannot run it, git still counts it (and dies).
        program(ro, 0o100);
        assert!(psh_with_path(&[ro], ws).is_empty());
    }

    #[test]
    fn an_external_git_command_git_does_not_count_or_that_may_go_is_not_relied_on() {
        let ws = leaked_dir();
        let ro = leaked_dir();
        let push = argv("git push");
        // Executable by group and others but not its owner: git's `is_executable` skips it
        // and corrects `psh` to `push` (found by a red-team pass on 2026-12-07).
        program(ro, 0o011);
        assert!(psh_with_path(&[ro], ws).contains(&push));
        // In a writable directory: it may be removed, or its mode changed, before git looks.
        program(ws, 0o755);
        assert!(psh_with_path(&[ws], ws).contains(&push));
        // A second link: its mode could change through the other one.
        program(ro, 0o755);
        std::fs::hard_link(ro.join("git-psh"), ws.join("other-name")).unwrap();
        assert!(psh_with_path(&[ro], ws).contains(&push));
        // A directory others may search but not list: git's listing of it fails.
        let unlisted = leaked_dir();
        program(unlisted, 0o755);
        std::fs::set_permissions(unlisted, std::fs::Permissions::from_mode(0o711)).unwrap();
        assert!(psh_with_path(&[unlisted], ws).contains(&push));
        // One its owner may not list, though others may (found by a red-team pass on
        // 2026-12-07): git, run by the owner, does not see what is in it.
        std::fs::set_permissions(unlisted, std::fs::Permissions::from_mode(0o355)).unwrap();
        assert!(psh_with_path(&[unlisted], ws).contains(&push));
        // Names git looks for otherwise than read here: a `/` (a file in a directory) and a
        // byte that is not UTF-8 (read as U+FFFD, which a planted name could hold).
        for sub in ["p/sh", "ps\u{FFFD}"] {
            let dir = leaked_dir();
            let file = dir.join(format!("git-{sub}"));
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, "").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
            let env: BTreeMap<String, String> =
                [("PATH".to_owned(), dir.display().to_string())].into();
            let mut settler = Settler::with_writable(ws);
            let line = vec!["git".to_owned(), sub.to_owned()];
            assert!(
                corrections(&line, Some(&env), Some(&mut settler)).contains(&push),
                "{sub}"
            );
        }
        // A relative `PATH` entry names another directory for each working directory.
        assert!(psh_with_path(&[Path::new("bin")], ws).contains(&push));
        // No mount view, no environment: nothing is relied on.
        let env: BTreeMap<String, String> = [("PATH".to_owned(), ro.display().to_string())].into();
        assert!(corrections(&argv("git psh"), Some(&env), None).contains(&push));
        let mut settler = Settler::with_writable(ws);
        assert!(corrections(&argv("git psh"), None, Some(&mut settler)).contains(&push));
    }
}
