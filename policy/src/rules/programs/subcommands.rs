//! How programs with subcommands find the one a word names when the word is not one itself:
//! npm and RubyGems take any prefix of a command (`npm pub` is `npm publish`, `gem pu` is
//! `gem push`), npm and cargo have built-in aliases (`npm i`, `cargo b`). The rule engine
//! decides every subcommand a word may name, so a rule on `publish` holds for `pub` too.

/// The subcommands of one program and how a word names one of them.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::rules) struct SubcommandNames {
    /// The subcommands, each as typed in full.
    pub commands: &'static [&'static str],
    /// Built-in aliases (`alias`, `command`): a command, or another alias.
    pub aliases: &'static [(&'static str, &'static str)],
    /// Any prefix of a command or an alias names it. Every command the prefix starts is taken,
    /// not only a unique one: a program newer than this list may know fewer, so more words
    /// count, never fewer.
    pub prefixes: bool,
    /// `camelCase` is read as `camel-case` (npm).
    pub camel_case: bool,
    /// The word is read in lower case (RubyGems: `gem PUSH` is `gem push`).
    pub lower_case: bool,
}

impl SubcommandNames {
    /// The subcommands other than `word` itself that `word` may name.
    pub(in crate::rules) fn named(&self, typed: &str) -> Vec<&'static str> {
        let lowered;
        let word = if self.lower_case {
            lowered = typed.to_ascii_lowercase();
            lowered.as_str()
        } else {
            typed
        };
        let hyphenated;
        let word = if self.camel_case && word.chars().any(|c| c.is_ascii_uppercase()) {
            hyphenated = word.chars().fold(String::new(), |mut s, c| {
                if c.is_ascii_uppercase() {
                    s.push('-');
                    s.push(c.to_ascii_lowercase());
                } else {
                    s.push(c);
                }
                s
            });
            hyphenated.as_str()
        } else {
            word
        };
        let mut out = Vec::new();
        if let Some(&exact) = self.commands.iter().find(|c| **c == word) {
            out.push(exact);
        } else if let Some(&(alias, _)) = self.aliases.iter().find(|(a, _)| *a == word) {
            out.push(self.through_aliases(alias));
        } else if self.prefixes && !word.is_empty() {
            for &command in self.commands.iter().filter(|c| c.starts_with(word)) {
                out.push(command);
            }
            for &(alias, _) in self.aliases.iter().filter(|(a, _)| a.starts_with(word)) {
                out.push(self.through_aliases(alias));
            }
        }
        out.sort_unstable();
        out.dedup();
        out.retain(|c| *c != typed);
        out
    }

    /// The command `alias` stands for, through aliases of aliases.
    fn through_aliases(&self, alias: &'static str) -> &'static str {
        let mut at = alias;
        for _ in 0..=self.aliases.len() {
            match self.aliases.iter().find(|(a, _)| *a == at) {
                Some(&(_, to)) => at = to,
                None => break,
            }
        }
        at
    }
}

/// npm 11's commands and aliases (`lib/utils/cmd-list.js`): an exact command, then an alias,
/// then any prefix of either.
pub(in crate::rules) const NPM: SubcommandNames = SubcommandNames {
    commands: &[
        "access",
        "adduser",
        "approve-scripts",
        "audit",
        "bugs",
        "cache",
        "ci",
        "completion",
        "config",
        "dedupe",
        "deny-scripts",
        "deprecate",
        "diff",
        "dist-tag",
        "docs",
        "doctor",
        "edit",
        "exec",
        "explain",
        "explore",
        "find-dupes",
        "fund",
        "get",
        "help",
        "help-search",
        "init",
        "install",
        "install-ci-test",
        "install-scripts",
        "install-test",
        "link",
        "ll",
        "login",
        "logout",
        "ls",
        "org",
        "outdated",
        "owner",
        "pack",
        "ping",
        "pkg",
        "prefix",
        "profile",
        "prune",
        "publish",
        "query",
        "rebuild",
        "repo",
        "restart",
        "root",
        "run",
        "sbom",
        "search",
        "set",
        "shrinkwrap",
        "stage",
        "star",
        "stars",
        "start",
        "stop",
        "team",
        "test",
        "token",
        "trust",
        "undeprecate",
        "uninstall",
        "unpublish",
        "unstar",
        "update",
        "version",
        "view",
        "whoami",
    ],
    aliases: &[
        ("author", "owner"),
        ("home", "docs"),
        ("issues", "bugs"),
        ("info", "view"),
        ("show", "view"),
        ("find", "search"),
        ("add", "install"),
        ("unlink", "uninstall"),
        ("remove", "uninstall"),
        ("rm", "uninstall"),
        ("r", "uninstall"),
        ("un", "uninstall"),
        ("rb", "rebuild"),
        ("list", "ls"),
        ("ln", "link"),
        ("create", "init"),
        ("i", "install"),
        ("it", "install-test"),
        ("cit", "install-ci-test"),
        ("u", "update"),
        ("up", "update"),
        ("c", "config"),
        ("s", "search"),
        ("se", "search"),
        ("tst", "test"),
        ("t", "test"),
        ("ddp", "dedupe"),
        ("v", "view"),
        ("run-script", "run"),
        ("clean-install", "ci"),
        ("clean-install-test", "install-ci-test"),
        ("x", "exec"),
        ("why", "explain"),
        ("la", "ll"),
        ("verison", "version"),
        ("ic", "ci"),
        ("innit", "init"),
        ("in", "install"),
        ("ins", "install"),
        ("inst", "install"),
        ("insta", "install"),
        ("instal", "install"),
        ("isnt", "install"),
        ("isnta", "install"),
        ("isntal", "install"),
        ("isntall", "install"),
        ("install-clean", "ci"),
        ("isntall-clean", "ci"),
        ("hlep", "help"),
        ("dist-tags", "dist-tag"),
        ("upgrade", "update"),
        ("udpate", "update"),
        ("rum", "run"),
        ("sit", "install-ci-test"),
        ("urn", "run"),
        ("ogr", "org"),
        ("add-user", "adduser"),
    ],
    prefixes: true,
    camel_case: true,
    lower_case: false,
};

/// RubyGems 3's commands (`gem help commands`) and aliases: an alias or an exact command (no
/// alias is a command), then any prefix of a command, in lower case.
pub(in crate::rules) const GEM: SubcommandNames = SubcommandNames {
    commands: &[
        "build",
        "cert",
        "check",
        "cleanup",
        "contents",
        "dependency",
        "environment",
        "exec",
        "fetch",
        "generate_index",
        "help",
        "info",
        "install",
        "list",
        "lock",
        "mirror",
        "open",
        "outdated",
        "owner",
        "pristine",
        "push",
        "query",
        "rdoc",
        "rebuild",
        "search",
        "server",
        "signin",
        "signout",
        "sources",
        "specification",
        "stale",
        "uninstall",
        "unpack",
        "update",
        "which",
        "yank",
    ],
    aliases: &[("i", "install"), ("login", "signin"), ("logout", "signout")],
    prefixes: true,
    camel_case: false,
    lower_case: true,
};

/// cargo's built-in aliases. Aliases from cargo's config are the exec supervisor's to read
/// ([`crate::rules::ExecFacts::cargo_aliases`]); cargo takes no prefix of a command.
pub(in crate::rules) const CARGO: SubcommandNames = SubcommandNames {
    commands: &[],
    aliases: &[
        ("b", "build"),
        ("c", "check"),
        ("d", "doc"),
        ("r", "run"),
        ("t", "test"),
        ("rm", "remove"),
    ],
    prefixes: false,
    camel_case: false,
    lower_case: false,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_names_every_command_it_starts_and_an_exact_command_only_itself() {
        assert_eq!(NPM.named("pub"), ["publish"]);
        assert_eq!(NPM.named("publish"), Vec::<&str>::new());
        assert_eq!(NPM.named("unp"), ["unpublish"]);
        // Ambiguous for npm (it refuses); every reading is decided.
        assert!(NPM.named("p").contains(&"publish") && NPM.named("p").contains(&"pack"));
        // An alias is exact: `npm i` installs, `npm r` uninstalls.
        assert_eq!(NPM.named("i"), ["install"]);
        assert_eq!(NPM.named("r"), ["uninstall"]);
        // A prefix of an alias is the alias's command (`npm install-cl` is `npm ci`).
        assert_eq!(NPM.named("install-cl"), ["ci"]);
        assert_eq!(NPM.named("distTag"), ["dist-tag"]);
        assert_eq!(NPM.named("zzz"), Vec::<&str>::new());
        assert_eq!(GEM.named("pu"), ["push"]);
        assert_eq!(GEM.named("push"), Vec::<&str>::new());
        assert_eq!(GEM.named("login"), ["signin"]);
        assert_eq!(GEM.named("PUSH"), ["push"]);
        assert_eq!(GEM.named("Pu"), ["push"]);
        assert_eq!(CARGO.named("b"), ["build"]);
        assert_eq!(CARGO.named("pub"), Vec::<&str>::new());
    }
}
