//! Privilege removal and the from-inside verification that it happened.
//!
//! Order (each step needs the privileges the later steps remove): lock the securebits so
//! uid 0 never regains capabilities through exec or setuid; drop every capability from the
//! bounding set; clear the ambient set; clear the effective, permitted and inheritable sets;
//! set no_new_privs. Root inside the sandbox is then as powerless as any user.

use nix::libc;

use crate::sys;

const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;

/// The locked securebits bridle sets.
pub const SECUREBITS: libc::c_ulong = SECBIT_NOROOT
    | SECBIT_NOROOT_LOCKED
    | SECBIT_NO_SETUID_FIXUP
    | SECBIT_NO_SETUID_FIXUP_LOCKED
    | SECBIT_KEEP_CAPS_LOCKED
    | SECBIT_NO_CAP_AMBIENT_RAISE
    | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

/// Removes every capability from the calling thread and sets no_new_privs. `Err` names the
/// step that failed.
pub fn drop_all(lock_securebits: bool) -> Result<(), String> {
    if lock_securebits {
        sys::set_securebits(SECUREBITS).map_err(|e| format!("locking securebits: {e}"))?;
    }
    let mut cap: libc::c_ulong = 0;
    loop {
        match sys::capbset_read(cap) {
            Ok(true) => sys::capbset_drop(cap)
                .map_err(|e| format!("dropping capability {cap} from the bounding set: {e}"))?,
            Ok(false) => {}
            Err(_) => break,
        }
        cap += 1;
        if cap > 128 {
            break;
        }
    }
    sys::cap_ambient_clear_all().map_err(|e| format!("clearing ambient capabilities: {e}"))?;
    sys::capset_clear().map_err(|e| format!("clearing capability sets: {e}"))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("setting no_new_privs: {e}"))?;
    Ok(())
}

/// Whether bridle runs as root (euid 0): the sandbox then takes capabilities away that root
/// would otherwise use to pass file permissions.
pub fn caller_is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Asks the kernel whether the calling thread's credentials and the owner and mode of `path`
/// allow `write` (or reading) it, unconfined (Landlock takes no part in `access(2)`): for a
/// missing file to be written, whether its nearest existing directory allows creating it.
/// `Err` names the path that refused and why (`EACCES`: its owner and mode).
pub fn unconfined_access(
    path: &std::path::Path,
    write: bool,
) -> Result<(), (nix::errno::Errno, std::path::PathBuf)> {
    use nix::errno::Errno;
    use nix::fcntl::{AT_FDCWD, AtFlags};
    use nix::unistd::{AccessFlags, faccessat};
    let mut at = path;
    let mut mode = if write {
        AccessFlags::W_OK
    } else {
        AccessFlags::R_OK
    };
    loop {
        match faccessat(AT_FDCWD, at, mode, AtFlags::AT_EACCESS) {
            Err(Errno::ENOENT) if write => match at.parent() {
                Some(parent) => {
                    at = parent;
                    mode = AccessFlags::W_OK | AccessFlags::X_OK;
                }
                None => return Err((Errno::ENOENT, path.to_path_buf())),
            },
            Ok(()) => return Ok(()),
            Err(e) => return Err((e, at.to_path_buf())),
        }
    }
}

/// Whether the calling thread, unconfined, may write `path` (or, missing, create it): a
/// permission error on a file its owner and mode refuse anyway (`/etc/shadow` to a user) is not
/// the sandbox's doing. Root passes, as it does outside the sandbox.
pub fn may_write_unconfined(path: &std::path::Path) -> bool {
    unconfined_access(path, true).is_ok()
}

/// Empties the calling thread's effective, permitted, inheritable and ambient capability sets
/// and checks that `/proc/thread-self/status` says so; `Err` names the step that failed.
/// Capabilities are per thread: bridle's other threads keep theirs. For the thread that does the
/// file tools' I/O, so that root's file tools get what root's commands get (no
/// `CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH` or `CAP_FOWNER`). The bounding set and securebits
/// only matter at an exec or a setuid, which that thread never does.
pub fn drop_from_current_thread() -> Result<(), String> {
    sys::cap_ambient_clear_all().map_err(|e| format!("clearing ambient capabilities: {e}"))?;
    sys::capset_clear().map_err(|e| format!("clearing capability sets: {e}"))?;
    let status = std::fs::read_to_string("/proc/thread-self/status")
        .map_err(|e| format!("reading /proc/thread-self/status to verify: {e}"))?;
    thread_has_no_capabilities(&status)
}

/// Checks the per-thread capability sets of a `/proc/.../status` text.
fn thread_has_no_capabilities(status: &str) -> Result<(), String> {
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        let value = status
            .lines()
            .find_map(|l| l.strip_prefix(set).and_then(|r| r.strip_prefix(':')))
            .map(str::trim)
            .ok_or_else(|| format!("{set} missing from /proc/thread-self/status"))?;
        if value.chars().any(|c| c != '0') {
            return Err(format!("{set} is {value}, expected no capabilities"));
        }
    }
    Ok(())
}

/// What `/proc/self/status` must say for a confined process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    /// `Seccomp: 2`.
    pub seccomp: bool,
    /// `NoNewPrivs: 1`.
    pub no_new_privs: bool,
    /// All five capability sets empty.
    pub no_capabilities: bool,
}

/// Checks `/proc/self/status` (given as text) against `expected`; `Err` names the first
/// mismatch.
pub fn verify_status(status: &str, expected: Expected) -> Result<(), String> {
    let field = |name: &str| -> Option<&str> {
        status.lines().find_map(|l| {
            l.strip_prefix(name)
                .and_then(|r| r.strip_prefix(':'))
                .map(str::trim)
        })
    };
    if expected.no_new_privs && field("NoNewPrivs") != Some("1") {
        return Err(format!(
            "NoNewPrivs is {:?}, expected 1",
            field("NoNewPrivs")
        ));
    }
    if expected.seccomp && field("Seccomp") != Some("2") {
        return Err(format!(
            "Seccomp is {:?}, expected 2 (filter mode)",
            field("Seccomp")
        ));
    }
    if expected.no_capabilities {
        for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            let value =
                field(set).ok_or_else(|| format!("{set} missing from /proc/self/status"))?;
            if value.chars().any(|c| c != '0') {
                return Err(format!("{set} is {value}, expected no capabilities"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFINED: &str = "Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n";

    fn all() -> Expected {
        Expected {
            seccomp: true,
            no_new_privs: true,
            no_capabilities: true,
        }
    }

    #[test]
    fn a_thread_keeping_a_capability_is_refused() {
        assert_eq!(thread_has_no_capabilities(CONFINED), Ok(()));
        // CAP_DAC_OVERRIDE (bit 1) left in the effective set.
        let status = CONFINED.replace("CapEff:\t0000000000000000", "CapEff:\t0000000000000002");
        assert!(
            thread_has_no_capabilities(&status)
                .unwrap_err()
                .contains("CapEff")
        );
        assert!(thread_has_no_capabilities("Name:\tx\n").is_err());
    }

    #[test]
    fn a_dropped_thread_has_no_capabilities_and_other_threads_keep_theirs() {
        let before = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let dropped = std::thread::spawn(drop_from_current_thread).join().unwrap();
        assert_eq!(dropped, Ok(()));
        // This thread is unchanged (capabilities are per thread).
        assert_eq!(
            std::fs::read_to_string("/proc/thread-self/status")
                .unwrap()
                .lines()
                .find(|l| l.starts_with("CapEff")),
            before.lines().find(|l| l.starts_with("CapEff"))
        );
    }

    #[test]
    fn confined_status_verifies() {
        assert_eq!(verify_status(CONFINED, all()), Ok(()));
    }

    #[test]
    fn any_capability_left_is_a_mismatch() {
        let status = CONFINED.replace("CapBnd:\t0000000000000000", "CapBnd:\t0000000000000400");
        assert!(
            verify_status(&status, all())
                .unwrap_err()
                .contains("CapBnd")
        );
    }

    #[test]
    fn missing_seccomp_or_nnp_is_a_mismatch() {
        assert!(
            verify_status(&CONFINED.replace("Seccomp:\t2", "Seccomp:\t0"), all())
                .unwrap_err()
                .contains("Seccomp")
        );
        assert!(
            verify_status(&CONFINED.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0"), all())
                .unwrap_err()
                .contains("NoNewPrivs")
        );
    }

    #[test]
    fn unconfined_expectations_skip_checks() {
        let status = "CapEff:\t000001ffffffffff\nNoNewPrivs:\t0\nSeccomp:\t0\n";
        assert_eq!(
            verify_status(
                status,
                Expected {
                    seccomp: false,
                    no_new_privs: false,
                    no_capabilities: false
                }
            ),
            Ok(())
        );
    }
}
