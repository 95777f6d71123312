//! Which git config entries make git on the host run or load something, and which entries of a
//! config are safe to keep.
//!
//! A repository a sandboxed command created is inspected when the run ends; an entry listed here
//! in its config means the user's own git (`git status`, `git log`, a fetch, a commit) could run
//! a command the sandboxed command chose, outside the sandbox. The list errs towards flagging:
//! `git init` and `git clone` write none of these, so flagging costs ordinary use nothing.
//!
//! Not flagged, after checking what git does with them: `url.*.insteadOf` and `pushInsteadOf`
//! (they rewrite URLs; a rewrite to `ext::` needs `protocol.*`, which is flagged), `remote.*.url`
//! (git refuses `ext::` without `protocol.ext.allow`, and URLs that look like options),
//! `core.worktree`, `core.attributesFile` and `core.excludesFile` (they change which files git
//! looks at; the filter and diff drivers attributes name run only when a config defines them,
//! and those definitions are flagged), `receive.*` (push-time hooks are files in `hooks/`, which
//! are inspected themselves), `http.*` and `user.*`.

use super::StrictEntry;

/// Sections every key of which runs or loads something (or may: aliases can carry `-c`).
const SECTIONS: &[(&str, &str)] = &[
    ("include", "loads another config file"),
    ("includeif", "loads another config file"),
    (
        "alias",
        "an alias can run a command (`!cmd`, git's `-c` options, or a subcommand's such as \
         `rebase -x`); bridle does not tell a harmless one from those",
    ),
    (
        "filter",
        "a filter driver runs a command on checkout and add",
    ),
    ("credential", "a credential helper runs a command"),
    ("pager", "names a pager command"),
    ("browser", "names a browser command"),
    ("man", "names a manual viewer command"),
    ("difftool", "names a diff tool command"),
    ("mergetool", "names a merge tool command"),
    ("guitool", "names a command for git gui"),
    ("sendemail", "names commands git send-email runs"),
    ("imap", "`imap.tunnel` runs a command"),
    ("uploadpack", "`uploadpack.packObjectsHook` runs a command"),
    ("protocol", "allows transports that run commands (`ext::`)"),
    ("gpg", "names the signing program"),
    ("hook", "a config-based hook runs a command"),
    ("instaweb", "names the web server git instaweb runs"),
    ("trailer", "`trailer.*.command` runs a command"),
];

/// Single keys (`section.key`, or `section.*.key` for any subsection).
const KEYS: &[(&str, &str)] = &[
    ("core.fsmonitor", "runs a command on every `git status`"),
    ("core.hookspath", "takes hooks from another directory"),
    ("core.sshcommand", "names the ssh command"),
    ("core.pager", "names the pager command"),
    ("core.editor", "names the editor command"),
    ("core.askpass", "names a password prompt command"),
    ("core.gitproxy", "names a proxy command"),
    ("core.alternaterefscommand", "runs a command"),
    ("diff.external", "names an external diff command"),
    ("diff.*.textconv", "a diff driver runs a command"),
    ("diff.*.command", "a diff driver runs a command"),
    ("merge.*.driver", "a merge driver runs a command"),
    ("interactive.difffilter", "runs a command"),
    ("sequence.editor", "names the rebase editor command"),
    ("web.browser", "names a browser command"),
    ("help.browser", "names a browser command"),
    ("init.templatedir", "copies hooks from another directory"),
    ("remote.*.uploadpack", "names the command a fetch runs"),
    ("remote.*.receivepack", "names the command a push runs"),
    ("remote.*.vcs", "names a remote helper program"),
    ("lfs.customtransfer.*", "git-lfs runs a transfer program"),
    ("lfs.extension.*", "git-lfs runs an extension program"),
];

/// Last parts of key names that name a program, for keys not listed above (other tools read
/// repository config too: git-lfs, git-annex, ...).
const COMMAND_NAMES: &[&str] = &[
    "command", "cmd", "program", "editor", "pager", "helper", "hook", "driver", "textconv",
    "tunnel", "askpass", "browser", "viewer",
];

/// The update strategies `submodule.*.update` may name without running a command.
const SUBMODULE_UPDATES: &[&str] = &["checkout", "rebase", "merge", "none"];

/// Why git (or a tool reading git's config) would run or load something because of `entry`;
/// `None` when it runs nothing.
pub fn runs_code(entry: &StrictEntry) -> Option<&'static str> {
    if let Some((_, why)) = SECTIONS.iter().find(|(s, _)| *s == entry.section) {
        return Some(why);
    }
    let matches = |pattern: &str| {
        let mut parts = pattern.splitn(3, '.');
        let (Some(section), Some(second)) = (parts.next(), parts.next()) else {
            return false;
        };
        match parts.next() {
            // `section.*.key`: any subsection.
            Some(key) if second == "*" => {
                entry.section == section && entry.subsection.is_some() && entry.key == key
            }
            // `section.sub.*`: any key of that subsection (its own subsections included, since
            // git splits the subsection at the first dot only).
            Some("*") => {
                entry.section == section
                    && entry
                        .subsection
                        .as_deref()
                        .is_some_and(|s| s.eq_ignore_ascii_case(second) || starts_dotted(s, second))
            }
            Some(_) => false,
            None => entry.section == section && entry.subsection.is_none() && entry.key == second,
        }
    };
    if let Some((_, why)) = KEYS.iter().find(|(pattern, _)| matches(pattern)) {
        return Some(why);
    }
    if entry.section == "submodule"
        && entry.subsection.is_some()
        && entry.key == "update"
        && !entry
            .value
            .as_deref()
            .is_some_and(|v| SUBMODULE_UPDATES.contains(&v.trim()))
    {
        return Some(
            "a submodule update strategy other than checkout, rebase or merge runs a command",
        );
    }
    if COMMAND_NAMES.iter().any(|name| entry.key.ends_with(name)) {
        return Some("names a program to run");
    }
    None
}

/// Whether `subsection` is `prefix.SOMETHING` (case-insensitively for the prefix).
fn starts_dotted(subsection: &str, prefix: &str) -> bool {
    subsection.len() > prefix.len()
        && subsection.is_char_boundary(prefix.len())
        && subsection[..prefix.len()].eq_ignore_ascii_case(prefix)
        && subsection.as_bytes()[prefix.len()] == b'.'
}

/// Entries a fresh config keeps from one that was moved aside: what git needs to go on using
/// the repository as it was (its format, whether it is bare, its remotes and branches), and the
/// everyday settings a person sets in a repository (who commits, how pulls and line endings
/// go; a UX pass on 2026-12-07 found a first commit failing after `user.*` was dropped). Each
/// runs nothing.
const KEPT: &[&str] = &[
    "user.name",
    "user.email",
    "pull.rebase",
    "pull.ff",
    "merge.ff",
    "fetch.prune",
    "core.autocrlf",
    "core.eol",
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "extensions.objectformat",
    "extensions.refstorage",
    "extensions.worktreeconfig",
    "extensions.partialclone",
    "remote.*.url",
    "remote.*.pushurl",
    "remote.*.fetch",
    "remote.*.promisor",
    "remote.*.partialclonefilter",
    "branch.*.remote",
    "branch.*.merge",
    "submodule.*.url",
    "submodule.*.active",
];

fn kept(entry: &StrictEntry) -> bool {
    KEPT.iter().any(|pattern| {
        let (section, rest) = pattern.split_once('.').unwrap_or((pattern, ""));
        match rest.split_once('.') {
            Some(("*", key)) => {
                entry.section == section && entry.subsection.is_some() && entry.key == key
            }
            _ => entry.section == section && entry.subsection.is_none() && entry.key == rest,
        }
    })
}

/// A fresh config text holding the entries of `entries` that a repository needs and that run
/// nothing (see `KEPT`), in their order, each written in one canonical form; and the names of
/// the entries kept. Entries whose value or subsection holds a control character are left out.
pub fn safe_config(entries: &[StrictEntry], heading: &str) -> (String, Vec<String>) {
    let clean = |s: &str| !s.chars().any(char::is_control);
    let mut text = String::new();
    for line in heading.lines() {
        text.push_str("# ");
        text.push_str(line);
        text.push('\n');
    }
    let mut names = Vec::new();
    let mut open: Option<(&str, Option<&str>)> = None;
    for entry in entries.iter().filter(|e| kept(e) && runs_code(e).is_none()) {
        let value = entry.value.as_deref().unwrap_or("true");
        if !clean(value) || !entry.subsection.as_deref().is_none_or(clean) {
            continue;
        }
        let section = (entry.section.as_str(), entry.subsection.as_deref());
        if open != Some(section) {
            match section.1 {
                Some(sub) => text.push_str(&format!("[{} \"{}\"]\n", section.0, escape(sub))),
                None => text.push_str(&format!("[{}]\n", section.0)),
            }
            open = Some(section);
        }
        text.push_str(&format!("\t{} = \"{}\"\n", entry.key, escape(value)));
        names.push(entry.name());
    }
    (text, names)
}

fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::super::parse_strict;
    use super::*;
    use pretty_assertions::assert_eq;

    fn flagged(text: &str) -> Vec<String> {
        parse_strict(text.as_bytes())
            .unwrap()
            .iter()
            .filter(|e| runs_code(e).is_some())
            .map(StrictEntry::name)
            .collect()
    }

    #[test]
    fn what_init_and_clone_write_runs_nothing() {
        let text = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = /srv/x.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n[lfs]\n\trepositoryformatversion = 0\n[user]\n\tname = a\n[url \"https://x/\"]\n\tinsteadOf = y:\n";
        assert_eq!(flagged(text), Vec::<String>::new());
    }

    #[test]
    fn keys_that_run_or_load_something_are_flagged() {
        let text = "[core]\n\tfsmonitor = touch x\n\thooksPath = h\n\tsshCommand = s\n\tpager = p\n\teditor = e\n\taskPass = a\n\tgitProxy = g\n[include]\n\tpath = x\n[includeIf \"gitdir:/\"]\n\tpath = y\n[alias]\n\tst = status\n[filter \"x\"]\n\tclean = c\n[diff \"x\"]\n\ttextconv = t\n\tcommand = c\n\tbinary = true\n[merge \"x\"]\n\tdriver = d\n[credential]\n\thelper = h\n[uploadpack]\n\tpackObjectsHook = h\n[sequence]\n\teditor = e\n[gpg]\n\tprogram = g\n[gpg \"ssh\"]\n\tprogram = g\n[pager]\n\tlog = l\n[web]\n\tbrowser = b\n[browser \"x\"]\n\tcmd = c\n[difftool \"x\"]\n\tcmd = c\n[mergetool \"x\"]\n\tcmd = c\n[remote \"o\"]\n\tuploadpack = u\n\treceivepack = r\n[protocol]\n\tallow = always\n[protocol \"ext\"]\n\tallow = always\n[submodule \"s\"]\n\tupdate = !evil\n[submodule \"t\"]\n\tupdate = rebase\n[lfs \"customtransfer.x\"]\n\tpath = p\n[annex]\n\tweb-download-command = w\n[hook \"x\"]\n\tcommand = c\n[init]\n\ttemplateDir = t\n";
        assert_eq!(
            flagged(text),
            [
                "core.fsmonitor",
                "core.hookspath",
                "core.sshcommand",
                "core.pager",
                "core.editor",
                "core.askpass",
                "core.gitproxy",
                "include.path",
                "includeif.gitdir:/.path",
                "alias.st",
                "filter.x.clean",
                "diff.x.textconv",
                "diff.x.command",
                "merge.x.driver",
                "credential.helper",
                "uploadpack.packobjectshook",
                "sequence.editor",
                "gpg.program",
                "gpg.ssh.program",
                "pager.log",
                "web.browser",
                "browser.x.cmd",
                "difftool.x.cmd",
                "mergetool.x.cmd",
                "remote.o.uploadpack",
                "remote.o.receivepack",
                "protocol.allow",
                "protocol.ext.allow",
                "submodule.s.update",
                "lfs.customtransfer.x.path",
                "annex.web-download-command",
                "hook.x.command",
                "init.templatedir",
            ]
        );
    }

    #[test]
    fn a_safe_config_keeps_what_the_repository_needs_in_one_form() {
        let text = "[core]\n\tbare = false\n\tfsmonitor = evil\n\trepositoryformatversion = 0\n[remote \"o\\\"x\"]\n\turl = \"/srv/a b\"\n\tuploadpack = evil\n[alias]\n\turl = x\n[branch \"main\"]\n\tremote = o\n\tmerge = refs/heads/main\\n[x]\n[user]\n\tname = T\n\tsigningkey = k\n";
        let entries = parse_strict(text.as_bytes()).unwrap();
        let (config, kept) = safe_config(&entries, "written by bridle\nsecond line");
        assert_eq!(
            config,
            "# written by bridle\n# second line\n[core]\n\tbare = \"false\"\n\trepositoryformatversion = \"0\"\n[remote \"o\\\"x\"]\n\turl = \"/srv/a b\"\n[branch \"main\"]\n\tremote = \"o\"\n[user]\n\tname = \"T\"\n"
        );
        assert_eq!(
            kept,
            [
                "core.bare",
                "core.repositoryformatversion",
                "remote.o\"x.url",
                "branch.main.remote",
                "user.name"
            ]
        );
        // What it wrote reads back as the same entries.
        let again = parse_strict(config.as_bytes()).unwrap();
        assert_eq!(
            again.iter().map(StrictEntry::name).collect::<Vec<_>>(),
            kept
        );
    }
}
