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

/// What the kernel saw: `attempts` times a process of the sandbox tried to reach an address
/// outside it (its network namespace counted the packets that had no route, and DNS queries to
/// a resolver on the host's loopback; see [`bridle_sandbox::net_watch`]). Whatever the command
/// printed (npm's `ENOTCACHED`, pip's retries, curl's "Couldn't connect"), that is the network
/// setting's doing: off, or an allow-list the command went around (its own connection or DNS
/// lookup instead of the proxy).
pub fn network_attempts(spec: &SandboxSpec, attempts: u64) -> Option<Attribution> {
    if attempts == 0 {
        return None;
    }
    let times = if attempts == 1 {
        "once"
    } else {
        "more than once"
    };
    match spec.network {
        Network::Off => Some(Attribution::liftable(format!(
            "the network is off (the command tried to reach it {times})"
        ))),
        Network::AllowList => {
            let port = spec
                .allow_list
                .as_ref()
                .map_or(bridle_policy::RELAY_PORT, |l| l.relay_port);
            Some(Attribution::liftable(format!(
                "the command tried to connect directly, not through the proxy, {times}: {}",
                crate::net::proxy_bypass_attribution(port)
            )))
        }
        Network::On => None,
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
mod tests;
