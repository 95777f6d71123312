//! Whether a failed command's error lines look caused by the sandbox, and by what: a path
//! outside the writable roots, a protected or masked path, a blocked system call, the network
//! setting, or (bridle running as root) a file of another user that root reaches only with the
//! capabilities the sandbox takes away.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use bridle_policy::{Network, SandboxMode, SandboxSpec};

/// Decides whether a failure looks caused by the sandbox, from the error lines and the spec.
///
/// Attributed: "Read-only file system" or "Permission denied" naming a path outside every
/// writable root or inside a protected path (the mount view and Landlock produce exactly these),
/// and git's "could not lock config file" naming a protected config (bridle holds its lock);
/// "Operation not permitted" on socket, mount, namespace and tracing operations (seccomp); and,
/// with the network off, unreachable-network and name-resolution failures. Not attributed: a
/// permission error on a path the sandbox allows (a 0400 file, an ssh key the server refused).
/// Residual uncertainty: a read-only host filesystem, or a tool that prints no path, can be
/// misattributed or missed; the wording says "looks caused".
pub fn attribute(spec: &SandboxSpec, stderr: &str) -> Option<String> {
    for line in stderr.lines() {
        let lower = line.to_ascii_lowercase();
        // git cannot take the lock bridle holds on a protected config while the run lasts.
        let fs_error = lower.contains("read-only file system")
            || lower.contains("permission denied")
            || lower.contains("could not lock config file");
        if fs_error {
            for path in paths_in(line) {
                let inside_root = spec.writable_roots.iter().any(|r| path.starts_with(r));
                let protected = spec.protected_paths.iter().any(|p| path.starts_with(p));
                // A mask hides what its path resolves to too (`~/.netrc -> /opt/netrc`).
                let masked = spec.masked_paths.iter().any(|p| {
                    path.starts_with(p)
                        || std::fs::canonicalize(p).is_ok_and(|real| path.starts_with(real))
                });
                if protected {
                    return Some(format!("`{}` is a protected path", path.display()));
                }
                if masked {
                    return Some(format!("`{}` is a masked path", path.display()));
                }
                // Full access keeps only the protected paths, the masks and the disks' nodes.
                if spec.protected_kept {
                    if path.starts_with("/dev") && lower.contains("read-only file system") {
                        return Some(format!(
                            "`{}` is a device node that reaches a disk or memory, hidden from a command escalated to full access",
                            path.display()
                        ));
                    }
                    continue;
                }
                if !inside_root {
                    return Some(format!(
                        "`{}` is outside the writable roots",
                        path.display()
                    ));
                }
            }
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
            return Some(format!("a blocked system call (`{}`)", line.trim()));
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
            return Some(crate::net::proxy_bypass_attribution(port));
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
            return Some("the network is off".into());
        }
    }
    None
}

/// Absolute paths mentioned in an error line (quoted or bare, trailing `:` dropped).
fn paths_in(line: &str) -> Vec<PathBuf> {
    line.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | '‘' | '’'))
        .map(|w| w.trim_end_matches([':', ',', ';']))
        .filter(|w| w.starts_with('/'))
        .map(|w| bridle_policy::normalize(Path::new(w)))
        .collect()
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
            protected_kept: false,
        }
    }

    #[test]
    fn sandbox_caused_errors_are_attributed() {
        let s = spec();
        assert!(
            attribute(&s, "touch: cannot touch '/etc/x': Read-only file system")
                .unwrap()
                .contains("/etc/x")
        );
        assert!(
            attribute(
                &s,
                "sh: 1: cannot create /w/.git/hooks/pre-commit: Read-only file system"
            )
            .unwrap()
            .contains("protected")
        );
        assert!(
            attribute(
                &s,
                "error: could not lock config file /w/.git/hooks/x: File exists"
            )
            .unwrap()
            .contains("protected")
        );
        assert!(
            attribute(&s, "cat: /home/u/.ssh/id_rsa: Permission denied")
                .unwrap()
                .contains("masked")
        );
        assert!(
            attribute(&s, "curl: (6) Could not resolve host: example.com")
                .unwrap()
                .contains("network is off")
        );
        assert!(
            attribute(
                &s,
                "python3: socket.socket: [Errno 1] Operation not permitted"
            )
            .is_some()
        );
    }

    #[test]
    fn under_full_access_only_what_the_view_keeps_is_attributed() {
        let s = SandboxSpec {
            mode: bridle_policy::SandboxMode::DangerFullAccess,
            protected_kept: true,
            ..spec()
        };
        assert!(
            attribute(&s, "bash: line 2: /dev/vda: Read-only file system")
                .unwrap()
                .contains("reaches a disk")
        );
        assert!(
            attribute(
                &s,
                "sh: 1: cannot create /w/.git/hooks/x: Read-only file system"
            )
            .unwrap()
            .contains("protected")
        );
        // Nothing else is read-only because of the sandbox there.
        assert_eq!(
            attribute(&s, "touch: cannot touch '/etc/x': Read-only file system"),
            None
        );
        assert_eq!(attribute(&s, "cat: /root/x: Permission denied"), None);
    }

    #[test]
    fn ordinary_permission_errors_are_not_attributed() {
        let s = spec();
        assert_eq!(attribute(&s, "cat: /w/secret.txt: Permission denied"), None);
        assert_eq!(
            attribute(&s, "git@github.com: Permission denied (publickey)."),
            None
        );
        assert_eq!(
            attribute(&s, "rm: cannot remove 'x': Operation not permitted"),
            None
        );
        assert_eq!(attribute(&s, "everything is fine"), None);
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
        let said = attribute(&s, &format!("cat: {}: Permission denied", real.display()));
        assert!(said.is_some_and(|m| m.contains("masked")));
    }
}
