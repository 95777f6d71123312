//! git's own commands, as its autocorrection weighs them: its builtins (which a correction runs
//! in its own process, with no exec to decide), which of them every git since 2.17 has, and
//! its common commands.

/// git's builtins (`git --list-cmds=builtins` of git 2.47, and those of gits up to 2.55):
/// what a correction runs in-process.
pub(super) const BUILTINS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "backfill",
    "bisect",
    "blame",
    "branch",
    "bugreport",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout--worker",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "credential",
    "credential-cache",
    "credential-cache--daemon",
    "credential-store",
    "describe",
    "diagnose",
    "diff",
    "diff-files",
    "diff-index",
    "diff-pairs",
    "diff-tree",
    "difftool",
    "fast-export",
    "fast-import",
    "fetch",
    "fetch-pack",
    "fmt-merge-msg",
    "for-each-ref",
    "for-each-repo",
    "format-patch",
    "format-rev",
    "fsck",
    "fsck-objects",
    "fsmonitor--daemon",
    "gc",
    "get-tar-commit-id",
    "grep",
    "hash-object",
    "help",
    "history",
    "hook",
    "index-pack",
    "init",
    "init-db",
    "interpret-trailers",
    "last-modified",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "mailinfo",
    "mailsplit",
    "maintenance",
    "merge",
    "merge-base",
    "merge-file",
    "merge-index",
    "merge-ours",
    "merge-recursive",
    "merge-recursive-ours",
    "merge-recursive-theirs",
    "merge-subtree",
    "merge-tree",
    "mktag",
    "mktree",
    "multi-pack-index",
    "mv",
    "name-rev",
    "notes",
    "pack-objects",
    "pack-redundant",
    "pack-refs",
    "patch-id",
    "pickaxe",
    "prune",
    "prune-packed",
    "pull",
    "push",
    "range-diff",
    "read-tree",
    "rebase",
    "receive-pack",
    "reflog",
    "refs",
    "remote",
    "remote-ext",
    "remote-fd",
    "repack",
    "replace",
    "replay",
    "repo",
    "rerere",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "send-pack",
    "shortlog",
    "show",
    "show-branch",
    "show-index",
    "show-ref",
    "sparse-checkout",
    "stage",
    "stash",
    "status",
    "stripspace",
    "submodule--helper",
    "switch",
    "symbolic-ref",
    "tag",
    "unpack-file",
    "unpack-objects",
    "update-index",
    "update-ref",
    "update-server-info",
    "upload-archive",
    "upload-archive--writer",
    "upload-pack",
    "url-parse",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
];

/// Builtins of the newest gits only (2.40 and later): an older one (`/usr/bin/git` 2.39 has neither `refs`,
/// `replay` nor a builtin `bisect`; `hook`, `diagnose`, `checkout--worker` and
/// `fsmonitor--daemon` are younger than git 2.30) does not know them and may correct them to
/// another builtin, so their corrections are taken too.
const RECENT: &[&str] = &[
    "backfill",
    "bisect",
    "checkout--worker",
    "diagnose",
    "diff-pairs",
    "format-rev",
    "fsmonitor--daemon",
    "history",
    "hook",
    "last-modified",
    "refs",
    "replay",
    "repo",
    "url-parse",
];

/// Builtins younger than git 2.17 besides [`RECENT`] (and older than 2.39): not among the
/// candidates of an older git, so they are not counted on to outscore a correction.
const YOUNGER_THAN_2_17: &[&str] = &[
    "bugreport",
    "commit-graph",
    "for-each-repo",
    "maintenance",
    "multi-pack-index",
    "range-diff",
    "restore",
    "sparse-checkout",
    "switch",
];

/// Builtins git installs no `git-SUB` file for: an older git, which lists its commands from
/// its exec path, does not weigh them.
const NOT_DASHED: &[&str] = &[
    "merge-recursive-ours",
    "merge-recursive-theirs",
    "pickaxe",
    "upload-archive--writer",
    "version",
];

/// Builtins that were scripts in some git since 2.17 (`rebase` before 2.20, `stash` before
/// 2.22, `am`, `submodule`...): such a git runs them as an exec of `git-SUB` from its exec
/// path, and with an exec path of the sandbox's, where it finds none, corrects them.
const ONCE_SCRIPTS: &[&str] = &["am", "rebase", "stash", "submodule", "difftool", "bisect"];

/// Builtins a build of git may leave out (Git 3.0's breaking changes drop them).
const DEPRECATED: &[&str] = &["pack-redundant", "whatchanged"];

/// git's common commands (those `git help` lists) in every git since 2.17: a candidate that
/// is one of them and starts with what was typed scores best, and git then corrects nothing
/// (`git st` and `git pus` are not corrected, whatever `help.autocorrect` says).
pub(super) const COMMON: &[&str] = &[
    "add", "bisect", "branch", "clone", "commit", "diff", "fetch", "grep", "init", "log", "merge",
    "mv", "pull", "push", "rebase", "reset", "rm", "show", "status", "tag",
];

/// Whether every git since 2.17 runs `sub` as a builtin, whatever its exec path: one
/// younger, one a build may leave out, or one that was a script, is an unknown command to
/// some git, which may correct it.
pub(super) fn in_every_git(sub: &str) -> bool {
    has_everywhere(sub) && !ONCE_SCRIPTS.contains(&sub)
}

/// Whether every git since 2.17 knows `name` as one of its own commands (a builtin, or once
/// a script in its exec path).
fn has_everywhere(name: &str) -> bool {
    BUILTINS.contains(&name)
        && !RECENT.contains(&name)
        && !YOUNGER_THAN_2_17.contains(&name)
        && !DEPRECATED.contains(&name)
}

/// Whether every git since 2.17 weighs the builtin `name` as a candidate of its correction:
/// it has it, and an older git, which lists its commands from its exec path, finds a
/// `git-NAME` file there.
pub(super) fn competes(name: &str) -> bool {
    has_everywhere(name) && !NOT_DASHED.contains(&name)
}
