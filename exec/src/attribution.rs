//! Whether a failed command's error lines look caused by the sandbox, and by what: a path
//! outside the writable roots, a protected or masked path, a blocked system call, the network
//! setting, or (bridle running as root) a file of another user that root reaches only with the
//! capabilities the sandbox takes away.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use bridle_policy::{ApprovalPolicy, Network, SandboxMode, SandboxSpec};

/// What the sandbox looks to have caused, and whether one call in a wider mode would get past it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribution {
    /// What was in the way, naming the path, call or setting (`` `/w/.git/config` is a
    /// protected path ``).
    pub what: String,
    /// False for protected and masked paths: an escalated call keeps them, so asking for
    /// `sandbox_permissions` cannot help.
    pub escalation_lifts: bool,
}

impl Attribution {
    fn liftable(what: String) -> Attribution {
        Attribution {
            what,
            escalation_lifts: true,
        }
    }

    fn kept(what: String) -> Attribution {
        Attribution {
            what,
            escalation_lifts: false,
        }
    }

    /// The line a tool result ends with, for the model: what the sandbox denied under `mode`,
    /// and whether to ask for a wider mode (never under the approval policy `never`, where
    /// nobody can approve one).
    pub fn note(&self, mode: SandboxMode, approval: ApprovalPolicy) -> String {
        if self.escalation_lifts && approval == ApprovalPolicy::Never {
            format!(
                "[denied by the sandbox (mode {mode}): {}. The approval policy is `never`, so no wider mode can be approved: do not ask for `sandbox_permissions`.]",
                self.what
            )
        } else if self.escalation_lifts {
            format!(
                "[denied by the sandbox (mode {mode}): {}. To do this, call again with `sandbox_permissions` and a `justification`; a person must approve it.]",
                self.what
            )
        } else {
            format!(
                "[denied by the sandbox (mode {mode}): {}. A wider mode keeps it too, so do not ask for `sandbox_permissions`.]",
                self.what
            )
        }
    }
}

impl From<String> for Attribution {
    fn from(what: String) -> Attribution {
        Attribution::liftable(what)
    }
}

/// Decides whether a failure looks caused by the sandbox, from the error lines and the spec.
///
/// Attributed: "Read-only file system" or "Permission denied" naming a path outside every
/// writable root or inside a protected path (the mount view and Landlock produce exactly these),
/// and git's "could not lock config file" naming a protected config (bridle holds its lock);
/// "No such file or directory" or "does not exist" naming a path on the host's `/tmp` that the
/// private `/tmp` does not show; "Operation not permitted" on socket, mount, namespace and
/// tracing operations (seccomp); and,
/// with the network off, unreachable-network and name-resolution failures. Not attributed: a
/// permission error on a path the sandbox allows (a 0400 file, an ssh key the server refused).
/// Paths may be relative to `cwd`, the command's working directory, or (as git names them) to a
/// directory above it; a relative path is only looked for among the protected and masked
/// paths, since the command may have changed directory first. Residual uncertainty: a read-only host filesystem, or
/// a tool that prints no path, can be misattributed or missed; the wording says "looks caused".
pub fn attribute(spec: &SandboxSpec, cwd: &Path, stderr: &str) -> Option<Attribution> {
    for line in stderr.lines() {
        let lower = line.to_ascii_lowercase();
        // git cannot take the lock bridle holds on a protected config while the run lasts.
        let fs_error = lower.contains("read-only file system")
            || lower.contains("permission denied")
            || lower.contains("could not lock config file");
        if let Some(found) = fs_error
            .then(|| fs_attribution(spec, cwd, line, &lower))
            .flatten()
        {
            return Some(found);
        }
        let missing =
            lower.contains("no such file or directory") || lower.contains("does not exist");
        if let Some(found) = missing.then(|| hidden_in_tmp(spec, cwd, line)).flatten() {
            return Some(found);
        }
        if lower.contains("operation not permitted")
            && [
                "socket",
                "connect",
                "mount",
                "unshare",
                "ptrace",
                "namespace",
                "bind",
            ]
            .iter()
            .any(|w| lower.contains(w))
        {
            return Some(format!("a blocked system call (`{}`)", line.trim()).into());
        }
        if spec.network == Network::AllowList
            && [
                "network is unreachable",
                "could not resolve host",
                "temporary failure in name resolution",
                "name or service not known",
                "no address associated with hostname",
            ]
            .iter()
            .any(|w| lower.contains(w))
        {
            let port = spec
                .allow_list
                .as_ref()
                .map_or(bridle_policy::RELAY_PORT, |l| l.relay_port);
            return Some(crate::net::proxy_bypass_attribution(port).into());
        }
        if spec.network == Network::Off
            && [
                "network is unreachable",
                "could not resolve host",
                "temporary failure in name resolution",
                "name or service not known",
            ]
            .iter()
            .any(|w| lower.contains(w))
        {
            return Some(Attribution::liftable("the network is off".into()));
        }
    }
    None
}

/// A file-system error line's attribution: the first path it names (absolute, or relative to
/// `cwd`) that the sandbox keeps from being written or read.
fn fs_attribution(spec: &SandboxSpec, cwd: &Path, line: &str, lower: &str) -> Option<Attribution> {
    let git_config = lower.contains("could not lock config file");
    for word in path_words(line) {
        let path = bridle_policy::normalize(&cwd.join(word));
        if let Some(found) = kept_path(spec, &path, git_config) {
            return Some(found);
        }
        if !word.starts_with('/') {
            // git names files from the top of the work tree, which may be above `cwd`. Where
            // the command changed directory first, a relative name means something else: only
            // protected and masked paths are looked for, never "outside the writable roots".
            let above = cwd.ancestors().skip(1).find_map(|base| {
                kept_path(
                    spec,
                    &bridle_policy::normalize(&base.join(word)),
                    git_config,
                )
            });
            if above.is_some() {
                return above;
            }
            // A read-only file system is the mount view's doing whatever the directory was:
            // name the path as the command did.
            if lower.contains("read-only file system") && !spec.protected_kept {
                return Some(Attribution::liftable(format!(
                    "`{word}` is outside the writable roots (a read-only file system there)"
                )));
            }
            continue;
        }
        // Full access keeps only the protected paths, the masks and the disks' nodes.
        if spec.protected_kept {
            if path.starts_with("/dev") && lower.contains("read-only file system") {
                return Some(Attribution::kept(format!(
                    "`{}` is a device node that reaches a disk or memory, hidden from a command escalated to full access",
                    path.display()
                )));
            }
        } else if !spec.writable_roots.iter().any(|r| path.starts_with(r))
            && (lower.contains("read-only file system")
                || bridle_sandbox::privileges::may_write_unconfined(&path))
        {
            return Some(Attribution::liftable(format!(
                "`{}` is outside the writable roots",
                path.display()
            )));
        }
    }
    None
}

/// A path a "no such file" line names that exists on the host below `/tmp`, where the
/// sandbox's private `/tmp` shows only the workspace, the writable roots and `$HOME` (a sibling
/// of a workspace in `/tmp`, say: `git submodule add ../lib`). Full access shows the host's.
fn hidden_in_tmp(spec: &SandboxSpec, cwd: &Path, line: &str) -> Option<Attribution> {
    if !spec.private_tmp {
        return None;
    }
    let home = spec.env.get("HOME").map(PathBuf::from);
    path_words(line).into_iter().find_map(|word| {
        let path = bridle_policy::normalize(&cwd.join(word));
        let shown = path
            .strip_prefix("/tmp")
            .or_else(|_| path.strip_prefix("/dev/shm"))
            .is_ok()
            && !path.starts_with(&spec.workspace)
            && !path.starts_with(&spec.temp_dir)
            && !spec.writable_roots.iter().any(|r| path.starts_with(r))
            && !home.as_ref().is_some_and(|h| path.starts_with(h))
            && std::fs::symlink_metadata(&path).is_ok();
        shown.then(|| {
            let named = if word.starts_with('/') {
                format!("`{word}`")
            } else {
                format!("`{word}` (`{}`)", path.display())
            };
            Attribution::liftable(format!(
                "{named} exists outside the sandbox, in a /tmp the sandbox replaces with a private \
                 one (only the workspace and the writable roots are seen there; \
                 `danger-full-access` sees the host's)"
            ))
        })
    })
}

/// Whether `path` is in a protected or masked path of `spec` (a mask hides what its path
/// resolves to as well: `~/.netrc -> /opt/netrc`). Both stay when a call is escalated.
fn kept_path(spec: &SandboxSpec, path: &Path, git_config: bool) -> Option<Attribution> {
    if spec.protected_paths.iter().any(|p| path.starts_with(p)) {
        let why = if git_config {
            " (a repository's git config, read-only while the run lasts: `git config`, \
             `git remote add` and setting an upstream cannot change it; `git -c NAME=VALUE` \
             sets a value for one command, and `--no-track` makes a branch without an upstream)"
        } else {
            ""
        };
        return Some(Attribution::kept(format!(
            "`{}` is a protected path{why}",
            path.display()
        )));
    }
    crate::fs_tools::in_masked_path(spec, path)
        .then(|| Attribution::kept(format!("`{}` is a masked path", path.display())))
}

/// The words of an error line that name a file: absolute paths, and relative ones that are
/// quoted (`'x'`), contain a `/`, or stand right before the error (`x: Permission denied`).
fn path_words(line: &str) -> Vec<&str> {
    const QUOTES: &[char] = &['\'', '"', '`', '‘', '’'];
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let mut words = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let before_error = token.ends_with(':')
            && tokens.get(i + 1).is_some_and(|next| {
                let next = next.to_ascii_lowercase();
                next == "read-only" || next == "permission"
            });
        let trimmed = token.trim_end_matches([':', ',', ';']);
        let quoted = trimmed.starts_with(QUOTES);
        let word = trimmed
            .trim_matches(QUOTES)
            .trim_end_matches([':', ',', ';']);
        if !word.chars().any(char::is_alphanumeric) {
            continue;
        }
        // `git@host: Permission denied (publickey)` names a login, not a file.
        let login = word.contains('@') && !word.contains('/');
        if word.starts_with('/') || quoted || word.contains('/') || (before_error && !login) {
            words.push(word);
        }
    }
    words
}

/// For bridle running as root, under a mode that takes root's capabilities away (every mode
/// but `danger-full-access`): a "Permission denied" naming a file of another user whose mode
/// refuses root what it would need `CAP_DAC_OVERRIDE` for, or, when the line names no existing
/// file, such a directory a missing file would be created in. Root's own files (a `chmod 000`
/// of its own) are not attributed, nor masked or protected paths (said as such elsewhere).
/// Paths may be relative to `cwd`, the command's working directory.
pub fn root_without_capabilities(spec: &SandboxSpec, cwd: &Path, stderr: &str) -> Option<String> {
    if spec.mode == SandboxMode::DangerFullAccess {
        return None;
    }
    for line in stderr.lines() {
        if !line.to_ascii_lowercase().contains("permission denied") {
            continue;
        }
        let named: Vec<PathBuf> = words_in(line)
            .into_iter()
            .map(|w| bridle_policy::normalize(&cwd.join(w)))
            .filter(|p| {
                !spec
                    .masked_paths
                    .iter()
                    .chain(&spec.protected_paths)
                    .any(|m| p.starts_with(m))
            })
            .collect();
        let existing: Vec<&Path> = named
            .iter()
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .map(PathBuf::as_path)
            .collect();
        let candidates = if existing.is_empty() {
            named.iter().filter_map(|p| p.parent()).collect()
        } else {
            existing
        };
        if let Some(found) = candidates.into_iter().find_map(refused_to_root) {
            return Some(found);
        }
    }
    None
}

/// What to say when `path` is another user's file whose mode refuses root reading and writing
/// it (a directory: listing, entering and creating in it) without capabilities.
fn refused_to_root(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.uid() == 0 {
        return None;
    }
    // Root is "others" to another user's file, or in its group when the group is 0.
    let bits = if meta.gid() == 0 {
        (meta.mode() >> 3) & 0o7
    } else {
        meta.mode() & 0o7
    };
    let needed = if meta.is_dir() { 0o7 } else { 0o6 };
    (bits & needed != needed).then(|| {
        format!(
            "`{}` belongs to uid {} and its mode ({:o}) refuses root what only the capabilities the sandbox takes away (CAP_DAC_OVERRIDE) would give",
            path.display(),
            meta.uid(),
            meta.mode() & 0o7777
        )
    })
}

/// The words of an error line that can name a file (quoted or bare, trailing `:` dropped).
fn words_in(line: &str) -> Vec<&str> {
    line.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | '‘' | '’'))
        .map(|w| w.trim_end_matches([':', ',', ';']))
        .filter(|w| !w.is_empty() && w.chars().any(char::is_alphanumeric))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w() -> &'static Path {
        Path::new("/w")
    }

    fn spec() -> SandboxSpec {
        SandboxSpec {
            mode: SandboxMode::WorkspaceWrite,
            workspace: "/w".into(),
            guarantees: vec![],
            accept_missing: vec![],
            readable_roots: vec!["/".into()],
            writable_roots: vec!["/w".into(), "/var/tmp/t".into(), "/dev/null".into()],
            protected_paths: vec!["/w/.git/hooks".into()],
            must_stay_absent: Vec::new(),
            masked_paths: vec!["/home/u/.ssh".into()],
            network: Network::Off,
            allow_list: None,
            unix_sockets: bridle_policy::UnixSockets::Block,
            seccomp: bridle_policy::SeccompProfile::ConfinedNoNetwork,
            limits: bridle_policy::ResourceLimits {
                processes: None,
                memory_bytes: None,
                file_size_bytes: None,
                open_files: None,
                cpu_time_secs: None,
                wall_time_secs: None,
                command_timeout_secs: None,
                command_timeout_max_secs: None,
                spill_size_bytes: None,
            },
            env: Default::default(),
            temp_dir: "/var/tmp/t".into(),
            private_tmp: true,
            cache_home: None,
            exec_rules: None,
            masks_may_vanish: Vec::new(),
            protected_kept: false,
        }
    }

    #[test]
    fn a_host_path_the_private_tmp_does_not_show_is_attributed() {
        let host = tempfile::Builder::new()
            .prefix("bridle-attr-")
            .tempdir_in("/tmp")
            .unwrap();
        let lib = host.path().join("lib");
        let ws = host.path().join("ws");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        let mut s = spec();
        s.workspace.clone_from(&ws);
        s.writable_roots = vec![ws.clone()];
        let said = attribute(
            &s,
            &ws,
            &format!("fatal: repository '{}' does not exist", lib.display()),
        )
        .unwrap();
        assert!(
            said.what.contains("private one") && said.escalation_lifts,
            "{said:?}"
        );
        let said = attribute(
            &s,
            &ws,
            "ls: cannot access '../lib': No such file or directory",
        )
        .unwrap();
        assert!(said.what.contains(&lib.display().to_string()), "{said:?}");
        // Missing on the host too, inside the workspace, or with the host's /tmp: not the sandbox.
        for line in [
            "ls: cannot access '../nothing': No such file or directory",
            "ls: cannot access 'src': No such file or directory",
        ] {
            assert_eq!(attribute(&s, &ws, line), None, "{line}");
        }
        s.private_tmp = false;
        assert_eq!(
            attribute(
                &s,
                &ws,
                "ls: cannot access '../lib': No such file or directory"
            ),
            None
        );
    }

    #[test]
    fn sandbox_caused_errors_are_attributed() {
        let s = spec();
        assert!(
            attribute(
                &s,
                w(),
                "touch: cannot touch '/etc/x': Read-only file system"
            )
            .unwrap()
            .what
            .contains("/etc/x")
        );
        assert!(
            attribute(
                &s,
                w(),
                "sh: 1: cannot create /w/.git/hooks/pre-commit: Read-only file system"
            )
            .unwrap()
            .what
            .contains("protected")
        );
        assert!(
            attribute(
                &s,
                w(),
                "error: could not lock config file /w/.git/hooks/x: File exists"
            )
            .unwrap()
            .what
            .contains("protected")
        );
        assert!(
            attribute(&s, w(), "cat: /home/u/.ssh/id_rsa: Permission denied")
                .unwrap()
                .what
                .contains("masked")
        );
        assert!(
            attribute(&s, w(), "curl: (6) Could not resolve host: example.com")
                .unwrap()
                .what
                .contains("network is off")
        );
        assert!(
            attribute(
                &s,
                w(),
                "python3: socket.socket: [Errno 1] Operation not permitted"
            )
            .is_some()
        );
    }

    #[test]
    fn under_full_access_only_what_the_view_keeps_is_attributed() {
        let s = SandboxSpec {
            mode: bridle_policy::SandboxMode::DangerFullAccess,
            masks_may_vanish: Vec::new(),
            protected_kept: true,
            ..spec()
        };
        assert!(
            attribute(&s, w(), "bash: line 2: /dev/vda: Read-only file system")
                .unwrap()
                .what
                .contains("reaches a disk")
        );
        assert!(
            attribute(
                &s,
                w(),
                "sh: 1: cannot create /w/.git/hooks/x: Read-only file system"
            )
            .unwrap()
            .what
            .contains("protected")
        );
        // Nothing else is read-only because of the sandbox there.
        assert_eq!(
            attribute(
                &s,
                w(),
                "touch: cannot touch '/etc/x': Read-only file system"
            ),
            None
        );
        assert_eq!(attribute(&s, w(), "cat: /root/x: Permission denied"), None);
    }

    #[test]
    fn ordinary_permission_errors_are_not_attributed() {
        let s = spec();
        assert_eq!(
            attribute(&s, w(), "cat: /w/secret.txt: Permission denied"),
            None
        );
        assert_eq!(
            attribute(&s, w(), "git@github.com: Permission denied (publickey)."),
            None
        );
        assert_eq!(
            attribute(&s, w(), "rm: cannot remove 'x': Operation not permitted"),
            None
        );
        assert_eq!(attribute(&s, w(), "everything is fine"), None);
    }

    #[test]
    fn a_denied_target_of_a_masked_symlink_is_attributed_to_the_mask() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("netrc");
        std::fs::write(&target, "secret").unwrap();
        let link = dir.path().join(".netrc");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut s = spec();
        s.masked_paths = vec![link];
        let real = std::fs::canonicalize(&target).unwrap();
        let said = attribute(
            &s,
            w(),
            &format!("cat: {}: Permission denied", real.display()),
        );
        assert!(said.is_some_and(|m| m.what.contains("masked") && !m.escalation_lifts));
    }

    #[test]
    fn a_relative_path_in_a_protected_directory_is_attributed() {
        let s = spec();
        let said = attribute(
            &s,
            w(),
            "touch: cannot touch '.git/hooks/x': Read-only file system",
        )
        .unwrap();
        assert!(said.what.contains("`/w/.git/hooks/x` is a protected path"));
        assert!(!said.escalation_lifts);
        assert!(
            said.note(SandboxMode::WorkspaceWrite, ApprovalPolicy::Ask)
                .contains("do not ask")
        );
    }

    #[test]
    fn git_names_a_protected_config_from_the_top_of_the_work_tree() {
        let mut s = spec();
        s.protected_paths.push("/w/.git/config".into());
        // git moved to the top of the work tree; the command ran in `/w/src/lib`.
        let said = attribute(
            &s,
            Path::new("/w/src/lib"),
            "error: could not lock config file .git/config: File exists",
        )
        .unwrap();
        assert!(said.what.contains("`/w/.git/config` is a protected path"));
        assert!(said.what.contains("git -c NAME=VALUE"));
        assert!(!said.escalation_lifts);
    }

    #[test]
    fn a_relative_path_is_never_resolved_to_a_path_outside_the_writable_roots() {
        // The command may have changed directory before naming it: a read-only file system
        // names the path as the command did, and a permission error is left alone.
        let s = spec();
        let said = attribute(&s, w(), "touch: cannot touch '../x': Read-only file system")
            .unwrap()
            .what;
        assert!(said.starts_with("`../x` is outside"), "{said}");
        assert!(!said.contains("`/x`"), "{said}");
        assert_eq!(
            attribute(&s, w(), "sh: 1: cannot create x: Permission denied"),
            None
        );
    }

    #[test]
    fn what_an_escalated_call_would_get_past_says_how_to_ask() {
        let s = spec();
        let said = attribute(
            &s,
            w(),
            "touch: cannot touch '/etc/x': Read-only file system",
        )
        .unwrap();
        assert!(said.escalation_lifts);
        assert!(
            said.note(SandboxMode::WorkspaceWrite, ApprovalPolicy::Ask)
                .contains("call again with `sandbox_permissions`")
        );
        assert!(
            said.note(SandboxMode::WorkspaceWrite, ApprovalPolicy::Never)
                .contains("no wider mode can be approved")
        );
    }
}
