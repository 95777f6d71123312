//! Command rules as the exec supervisor applies them: to the argv and the program of one
//! `execve` the kernel is about to run (or has just loaded), rather than to command-line text.
//!
//! The differences from [`crate::Plan::decide_exec`]:
//! - the program may be known by what it is, not only by its name: a renamed copy or a hard
//!   link of git is `git` ([`ExecFacts::same_as`]);
//! - git aliases come from the config files git reads too ([`ExecFacts::git_aliases`]);
//! - what the rules cannot see in the arguments (a variable in a `sh -c` script, the lines
//!   `xargs` reads) is no reason to ask: whatever it makes run is an exec of its own, decided
//!   when it happens. Only [`ExecFacts::opaque`], something the supervisor itself cannot
//!   see, asks.

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::plan::{DecidedBy, Verdict};
use crate::shell::{self, Word};
use crate::vocab::Decision;

use super::check::{Findings, HiddenParts, Match, check_explored, command_verdict};
use super::programs::lookup;
use super::views::Explorer;
use super::{CommandRule, basename};

/// The command rules a sandbox enforces at every exec (carried in the
/// [`crate::SandboxSpec`]; `None` there when the policy has no command rule).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRules {
    /// The rules, in the order the policy lists them.
    rules: Vec<CommandRule>,
    /// Which rules can match an argv, by its first word (built at the first decision).
    #[serde(skip)]
    by_first: FirstWords,
}

/// The rules that can match an argv whose first word's basename is a given name: those whose
/// prefix starts with that name, and those with an empty prefix (they match every argv), in
/// the policy's order. The supervisor decides at every exec, just after the exec'ing program
/// evicted its data from the caches: matching every rule there touched each rule's strings.
#[derive(Default)]
struct FirstWords(OnceLock<FirstWordIndex>);

struct FirstWordIndex {
    by_name: HashMap<String, Vec<usize>>,
    any: Vec<usize>,
}

impl FirstWords {
    fn get(&self, rules: &[CommandRule]) -> &FirstWordIndex {
        self.0.get_or_init(|| {
            let any: Vec<usize> = (0..rules.len())
                .filter(|&i| rules[i].prefix.is_empty())
                .collect();
            let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
            for (i, rule) in rules.iter().enumerate() {
                for name in rule.prefix.first().into_iter().flatten() {
                    let list = by_name.entry(name.clone()).or_insert_with(|| any.clone());
                    if !list.contains(&i) {
                        list.push(i);
                    }
                }
            }
            for list in by_name.values_mut() {
                list.sort_unstable();
            }
            FirstWordIndex { by_name, any }
        })
    }
}

impl FirstWordIndex {
    fn candidates(&self, name: &str) -> &[usize] {
        self.by_name.get(name).unwrap_or(&self.any)
    }
}

// Derived from the rules alone: a copy builds its own, and it takes no part in equality.
impl Clone for FirstWords {
    fn clone(&self) -> Self {
        FirstWords::default()
    }
}

impl PartialEq for FirstWords {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for FirstWords {}

impl std::fmt::Debug for FirstWords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FirstWords")
    }
}

/// What the supervisor knows about one exec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecFacts {
    /// The arguments the new program gets (`argv[0]` first).
    pub argv: Vec<String>,
    /// Names from [`ExecRules::program_names`] that the executed file is, when its own name is
    /// another: `["git"]` for a renamed copy or a hard link of git.
    pub same_as: Vec<String>,
    /// git aliases (`name`, `body`) defined in the config git reads for this command: the
    /// repository's, the global and system files, their includes, and the environment's
    /// `GIT_CONFIG_*`. Every definition is a candidate; the strictest decision wins.
    pub git_aliases: Vec<(String, String)>,
    /// cargo aliases (`name`, words) defined in the config cargo reads for this command: the
    /// `.cargo/config.toml` of its directory and each above, `$CARGO_HOME`'s, their includes,
    /// `--config` files and the environment's `CARGO_ALIAS_*` (named as
    /// [`crate::cargo_config::env_name`] spells them). Every definition is a candidate.
    pub cargo_aliases: Vec<crate::cargo_config::Alias>,
    /// Command lines the program may run in its own process instead of `argv`, with no exec
    /// to decide them (git's autocorrect runs `git push` for `git psh`; an interpreter runs
    /// its program file, which may be a known program under another name: `npm publish` for
    /// `node .../npm-cli.js publish`): each is decided as a view of its own, with its own
    /// budget of views, and the strictest decision wins.
    pub instead: Vec<Vec<String>>,
    /// What the supervisor cannot see of what this exec runs, as a noun phrase ("the program
    /// the dynamic loader `ld.so` loads"): asks when an `ask` or `deny` rule could match.
    pub opaque: Option<String>,
}

impl ExecRules {
    /// The rules of a policy, or `None` when it has no command rule (then no supervisor runs).
    pub fn of(rules: &[CommandRule]) -> Option<ExecRules> {
        (!rules.is_empty()).then(|| ExecRules {
            rules: rules.to_vec(),
            by_first: FirstWords::default(),
        })
    }

    /// The rules, in the order the policy lists them.
    pub fn rules(&self) -> &[CommandRule] {
        &self.rules
    }

    /// The rules, to change (the index of their first words is built again afterwards).
    pub fn rules_mut(&mut self) -> &mut [CommandRule] {
        self.by_first = FirstWords::default();
        &mut self.rules
    }

    /// Every program name a rule starts with (`git`, `curl`, `sudo`, ...): the programs the
    /// supervisor recognises by identity.
    pub fn program_names(&self) -> BTreeSet<String> {
        self.rules
            .iter()
            .filter_map(|r| r.prefix.first())
            .flatten()
            .cloned()
            .collect()
    }

    /// Whether a rule starts with `git`, so git's aliases are worth reading at its exec.
    pub fn names_git(&self) -> bool {
        self.names("git")
    }

    /// Whether a rule starts with `cargo`, so cargo's aliases are worth reading at its exec.
    pub fn names_cargo(&self) -> bool {
        self.names("cargo")
    }

    fn names(&self, program: &str) -> bool {
        self.rules.iter().any(|r| {
            r.prefix
                .first()
                .is_some_and(|f| f.iter().any(|n| n == program))
        })
    }

    /// Decides one exec. The strictest rule matching any view of the argv (as written, as the
    /// program it is by identity, through wrappers, shells' scripts, programs' global options
    /// and git aliases) decides; with no match the exec is allowed.
    pub fn decide(&self, exec: &ExecFacts) -> Verdict {
        let Some(first) = exec.argv.first() else {
            return Verdict {
                decision: Decision::Deny,
                by: DecidedBy::Default,
                reason: "an exec with an empty argument list denied".into(),
            };
        };
        if let Some(verdict) = self.decide_plain(exec, first) {
            return verdict;
        }
        self.decide_explored(exec, first)
    }

    /// The common exec (a compiler, `make`, `cat`): a program the exploration does not look
    /// into (no wrapper, shell, interpreter, subcommands or `git-` form), known by no other
    /// name, with nothing opaque. Its only view is the argv itself, so the rules are matched
    /// against it directly; `None` for any other exec. Agrees with [`Self::decide_explored`]
    /// (tested on random argvs).
    fn decide_plain(&self, exec: &ExecFacts, first: &str) -> Option<Verdict> {
        let name = basename(first);
        if !exec.same_as.is_empty()
            || !exec.instead.is_empty()
            || exec.opaque.is_some()
            || lookup(name).is_some()
            || name.strip_prefix("git-").is_some_and(|s| !s.is_empty())
        {
            return None;
        }
        let mut matched: Option<&CommandRule> = None;
        for &i in self.by_first.get(&self.rules).candidates(name) {
            let rule = &self.rules[i];
            if rule.matches(&exec.argv) && matched.is_none_or(|best| rule.decision > best.decision)
            {
                matched = Some(rule);
            }
        }
        let shown = exec.argv.join(" ");
        let Some(rule) = matched else {
            // No `format!`: this is nearly every exec's verdict.
            let mut reason = String::with_capacity(shown.len().min(64) + 40);
            reason.push_str("exec of `");
            reason.push_str(&shell::short(&shown));
            reason.push_str("` allowed: no rule matched");
            return Some(Verdict {
                decision: Decision::Allow,
                by: DecidedBy::Default,
                reason,
            });
        };
        let findings = Findings {
            matched: Some(Match {
                rule,
                subject: shown,
                seen_as: None,
            }),
            ..Findings::default()
        };
        Some(command_verdict(&findings, String::new(), HiddenParts::Ask))
    }

    /// Every view of the exec explored (wrappers, scripts, aliases, other names), each matched.
    fn decide_explored(&self, exec: &ExecFacts, first: &str) -> Verdict {
        let shown = exec.argv.join(" ");
        let words: Vec<Word> = exec.argv.iter().cloned().map(Word::Literal).collect();
        let mut starts = vec![words.clone()];
        for name in &exec.same_as {
            if basename(first) != name {
                let mut renamed = vec![Word::literal(name)];
                renamed.extend(words[1..].iter().cloned());
                starts.push(renamed);
            }
        }
        // A command line the program may run instead is that program's too, under each of
        // its names: a renamed git corrects `psh` to `push` as git does (found by a red-team
        // pass on 2026-12-07: `exec -a foo git -c help.autocorrect=1 psh` pushed).
        for argv in &exec.instead {
            let words: Vec<Word> = argv.iter().cloned().map(Word::Literal).collect();
            let called = argv.first().map_or("", |a| basename(a));
            for name in exec.same_as.iter().filter(|n| *n != called) {
                let mut renamed = vec![Word::literal(name)];
                renamed.extend(words.iter().skip(1).cloned());
                starts.push(renamed);
            }
            starts.push(words);
        }
        let mut findings = Findings::default();
        let mut truncated = None;
        for start in starts {
            let explorer = Explorer::with_aliases(
                start,
                None,
                exec.git_aliases.clone(),
                exec.cargo_aliases.clone(),
            );
            check_explored(&self.rules, &explorer, &words, &shown, 0, &mut findings);
            truncated = truncated.or(explorer.truncated);
        }
        // Whatever a hidden part makes run is an exec of its own, decided when it happens; not
        // what the exploration stopped short of (found by review on 2026-12-07: 17 aliases of
        // aliases, or npm options branching past the limit, hid `publish`).
        findings.hidden = None;
        for what in exec.opaque.iter().chain(truncated.iter()) {
            let view = [Word::hidden(what.clone(), true)];
            findings.see(&self.rules, &view, &view, &shown);
        }
        command_verdict(
            &findings,
            format!(
                "exec of `{}` allowed: no rule matched",
                shell::short(&shown)
            ),
            HiddenParts::Ask,
        )
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::origin::Origin;

    fn rule(id: &str, prefix: &[&[&str]], decision: Decision) -> CommandRule {
        CommandRule {
            id: id.into(),
            prefix: prefix
                .iter()
                .map(|alts| alts.iter().map(|s| s.to_string()).collect())
                .collect(),
            decision,
            justification: None,
            origin: Origin::Builtin,
        }
    }

    fn rules() -> ExecRules {
        ExecRules::of(&[
            rule(
                "deny-git-push",
                &[&["git"], &["push", "send-pack"]],
                Decision::Deny,
            ),
            rule("deny-curl", &[&["curl", "wget"]], Decision::Deny),
            rule("ask-npm-publish", &[&["npm"], &["publish"]], Decision::Ask),
        ])
        .unwrap()
    }

    /// Rules sharing first words, an explicit allow among them, and one matching every argv:
    /// the strictest matching rule decides, the first of equals.
    fn overlapping_rules() -> ExecRules {
        ExecRules::of(&[
            rule("allow-make", &[&["make"]], Decision::Allow),
            rule("ask-cc", &[&["cc", "ld"]], Decision::Ask),
            rule("deny-cc-c", &[&["cc"], &["-c"]], Decision::Deny),
            rule("ask-curl", &[&["curl"]], Decision::Ask),
            rule("deny-curl", &[&["curl", "wget"]], Decision::Deny),
            rule("also-deny-curl", &[&["curl"]], Decision::Deny),
            rule("allow-everything", &[], Decision::Allow),
            rule("deny-git-push", &[&["git"], &["push"]], Decision::Deny),
        ])
        .unwrap()
    }

    fn facts(argv: &str) -> ExecFacts {
        ExecFacts {
            argv: super::super::split_words(argv).unwrap(),
            ..ExecFacts::default()
        }
    }

    fn rule_of(v: &Verdict) -> Option<&str> {
        match &v.by {
            DecidedBy::Rule { id, .. } => Some(id),
            _ => None,
        }
    }

    #[test]
    fn a_renamed_copy_of_git_is_git() {
        let r = rules();
        let mut exec = facts("/tmp/x push origin main");
        assert_eq!(r.decide(&exec).decision, Decision::Allow);
        exec.same_as = vec!["git".into()];
        let v = r.decide(&exec);
        assert_eq!(
            (v.decision, rule_of(&v)),
            (Decision::Deny, Some("deny-git-push"))
        );
    }

    #[test]
    fn what_a_renamed_git_may_run_instead_is_decided_as_git() {
        let r = rules();
        let mut exec = facts("foo -c help.autocorrect=1 psh origin");
        exec.instead =
            vec![super::super::split_words("foo -c help.autocorrect=1 push origin").unwrap()];
        assert_eq!(r.decide(&exec).decision, Decision::Allow);
        exec.same_as = vec!["git".into()];
        let v = r.decide(&exec);
        assert_eq!(
            (v.decision, rule_of(&v)),
            (Decision::Deny, Some("deny-git-push"))
        );
    }

    #[test]
    fn what_the_exploration_stops_short_of_is_not_left_to_a_later_exec() {
        // Found by review on 2026-12-07: both run `publish` in the same process.
        let r = ExecRules::of(&[
            rule("ask-npm-publish", &[&["npm"], &["publish"]], Decision::Ask),
            rule("deny-publish", &[&["cargo"], &["publish"]], Decision::Deny),
        ])
        .unwrap();
        let editors = "--editor d ".repeat(8);
        let v = r.decide(&facts(&format!("npm {editors}publish")));
        assert_ne!(v.decision, Decision::Allow, "{v:?}");
        let mut exec = facts("cargo p");
        exec.cargo_aliases = (0..17)
            .map(|i| (format!("a{i}"), vec![format!("a{}", i + 1)]))
            .chain([("p".to_owned(), vec!["a0".to_owned()])])
            .chain([("a17".to_owned(), vec!["publish".to_owned()])])
            .collect();
        let v = r.decide(&exec);
        assert_ne!(v.decision, Decision::Allow, "{v:?}");
        // A short chain is followed to its end.
        exec.cargo_aliases = vec![
            ("p".into(), vec!["q".into()]),
            ("q".into(), vec!["publish".into()]),
        ];
        assert_eq!(r.decide(&exec).decision, Decision::Deny);
    }

    #[test]
    fn the_dashed_form_of_git_is_git() {
        let r = rules();
        for argv in [
            "/usr/lib/git-core/git-send-pack /remote.git main",
            "git-push origin",
        ] {
            assert_eq!(r.decide(&facts(argv)).decision, Decision::Deny, "{argv}");
        }
        assert_eq!(
            r.decide(&facts("git-receive-pack /r.git")).decision,
            Decision::Allow
        );
    }

    #[test]
    fn aliases_from_config_are_expanded_and_the_strictest_wins() {
        let r = rules();
        let mut exec = facts("git -C repo p origin");
        assert_eq!(r.decide(&exec).decision, Decision::Allow);
        exec.git_aliases = vec![("p".into(), "status".into())];
        assert_eq!(r.decide(&exec).decision, Decision::Allow);
        exec.git_aliases.push(("P".into(), "push --force".into()));
        assert_eq!(r.decide(&exec).decision, Decision::Deny);
        exec.git_aliases = vec![("p".into(), "!git push \"$@\"".into())];
        assert_eq!(r.decide(&exec).decision, Decision::Deny);
    }

    #[test]
    fn hidden_parts_of_a_script_do_not_ask_at_exec() {
        let r = rules();
        let v = r.decide(&facts("sh -c 'x=git; $x push'"));
        assert_eq!(v.decision, Decision::Allow, "{v:?}");
        // A literal command inside still counts: the shell would run it.
        let v = r.decide(&facts("sh -c 'echo; git push'"));
        assert_eq!(v.decision, Decision::Deny);
    }

    #[test]
    fn what_the_supervisor_cannot_see_asks_when_a_rule_could_match() {
        let r = rules();
        let mut exec = facts("/lib64/ld-linux-x86-64.so.2 /tmp/x push");
        exec.opaque = Some("the program the dynamic loader loads".into());
        let v = r.decide(&exec);
        assert_eq!(v.decision, Decision::Ask);
        assert!(matches!(v.by, DecidedBy::Hidden { .. }), "{v:?}");
        // Through the loader, a program named on its command line is still seen.
        let v = r.decide(&facts(
            "/lib64/ld-linux-x86-64.so.2 --argv0 x /usr/bin/git push",
        ));
        assert_eq!(v.decision, Decision::Deny);
        assert_eq!(
            r.decide(&facts("/lib64/ld-linux-x86-64.so.2 --list /usr/bin/git"))
                .decision,
            Decision::Allow
        );
        // A word that runs nothing as the value of another option is that value (an eighth
        // red-team pass pushed with these).
        for line in [
            "/lib64/ld-linux-x86-64.so.2 --library-path --list /usr/bin/git push",
            "/lib64/ld-linux-x86-64.so.2 --argv0 --verify /usr/bin/git push",
            "/lib64/ld-linux-x86-64.so.2 --audit --help /usr/bin/git push",
            "timeout -s --help 5 git push",
        ] {
            assert_eq!(r.decide(&facts(line)).decision, Decision::Deny, "{line}");
        }
    }

    #[test]
    fn a_script_file_is_matched_as_the_script_too() {
        let r = rules();
        let v = r.decide(&facts("/bin/sh ./curl https://example.com"));
        assert_eq!(rule_of(&v), Some("deny-curl"));
        let v = r.decide(&facts("/usr/bin/python3 -u ./wget x"));
        assert_eq!(rule_of(&v), Some("deny-curl"));
        assert_eq!(
            r.decide(&facts("/bin/sh ./build.sh all")).decision,
            Decision::Allow
        );
    }

    #[test]
    fn a_command_line_run_instead_in_the_same_process_is_decided_past_any_number_of_others() {
        let r = rules();
        let mut exec = facts("git -c help.autocorrect=1 psh origin");
        assert_eq!(r.decide(&exec).decision, Decision::Allow);
        // More harmless candidates than one exploration has views for, the push last.
        for i in 0..100 {
            exec.instead
                .push(facts(&format!("git -c help.autocorrect=1 status{i} origin")).argv);
        }
        exec.instead
            .push(facts("git -c help.autocorrect=1 push origin").argv);
        let verdict = r.decide(&exec);
        assert_eq!(verdict.decision, Decision::Deny, "{}", verdict.reason);
    }

    #[test]
    fn program_names_are_the_first_tokens_of_the_rules() {
        let names: Vec<String> = rules().program_names().into_iter().collect();
        assert_eq!(names, ["curl", "git", "npm", "wget"]);
        assert!(rules().names_git());
        assert_eq!(ExecRules::of(&[]), None);
    }

    proptest::proptest! {
        /// The direct match of a plain exec decides as the whole exploration does.
        #[test]
        fn the_plain_exec_shortcut_decides_as_the_exploration(
            words in proptest::collection::vec(
                proptest::sample::select(vec![
                    "git", "/usr/bin/git", "push", "send-pack", "curl", "/bin/curl", "wget",
                    "npm", "publish", "cc", "/usr/bin/cc", "-c", "x.c", "make", "-j2", "sh",
                    "-c", "env", "sudo", "xargs", "git-push", "git-", "python3", "python3.12",
                    "origin", "main", "--", "ld", "a b", "",
                ]),
                1..6,
            ),
            same_as in proptest::option::of(proptest::sample::select(vec!["git", "curl"])),
            overlapping in proptest::bool::ANY,
        ) {
            let r = if overlapping { overlapping_rules() } else { rules() };
            let exec = ExecFacts {
                argv: words.iter().map(|w| (*w).to_owned()).collect(),
                same_as: same_as.into_iter().map(str::to_owned).collect(),
                ..ExecFacts::default()
            };
            let first = exec.argv[0].clone();
            if let Some(plain) = r.decide_plain(&exec, &first) {
                proptest::prop_assert_eq!(plain, r.decide_explored(&exec, &first));
            }
        }
    }

    #[test]
    fn plain_execs_take_the_shortcut_and_others_do_not() {
        let r = rules();
        for argv in [
            "cc -c x.c -o x.o",
            "/usr/bin/curl x",
            "make -j2",
            "ld -o a a.o",
        ] {
            let exec = facts(argv);
            assert!(r.decide_plain(&exec, &exec.argv[0]).is_some(), "{argv}");
        }
        for argv in [
            "git push",
            "sh -c 'git push'",
            "env curl x",
            "git-push origin",
            "npm publish",
        ] {
            let exec = facts(argv);
            assert!(r.decide_plain(&exec, &exec.argv[0]).is_none(), "{argv}");
        }
        let v = r.decide(&facts("/bin/curl https://example.com"));
        assert_eq!(rule_of(&v), Some("deny-curl"));
    }

    #[test]
    fn an_empty_argv_is_denied() {
        assert_eq!(
            rules().decide(&ExecFacts::default()).decision,
            Decision::Deny
        );
    }
}
