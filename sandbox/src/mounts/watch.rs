//! Init's watch over the protected binds and the paths that must stay absent.

use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::aside::move_aside;
use crate::sys;

/// Mount points listed in a `/proc/self/mountinfo` text (field 5, octal escapes decoded), as
/// bytes: a mount point need not be UTF-8.
fn mount_points(mountinfo: &[u8]) -> std::collections::HashSet<PathBuf> {
    mountinfo
        .split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').nth(4))
        .map(|bytes| {
            let mut out = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'\\' && i + 3 < bytes.len() {
                    let code = std::str::from_utf8(&bytes[i + 1..i + 4])
                        .ok()
                        .and_then(|o| u8::from_str_radix(o, 8).ok());
                    if let Some(c) = code {
                        out.push(c);
                        i += 4;
                        continue;
                    }
                }
                out.push(bytes[i]);
                i += 1;
            }
            PathBuf::from(std::ffi::OsStr::from_bytes(&out))
        })
        .collect()
}

/// Watches the protected-path binds from init: when one disappears (the host renamed or deleted
/// the file, which detaches a bind in every other mount namespace), the path is no longer
/// read-only inside, so the whole sandbox is stopped at once and the user told to check it.
///
/// Paths that must stay absent are checked every `ABSENT_CHECK_MS` milliseconds for the whole
/// run, so a planted one is moved aside within that time. (inotify on their directories would
/// wake this thread sooner, but for every file git creates in `.git`: measured, it cost more
/// than the polling, 2 to 3% of a `git status` loop, and releasing an instance with watches
/// adds an SRCU grace period, about 15 ms, to init's exit; a command can also use up the
/// user's inotify instances first.) Runs on its own thread in init (PID 1), for the life of
/// the run.
pub fn watch_protected(protected: Vec<PathBuf>, must_stay_absent: Vec<PathBuf>) {
    if protected.is_empty() && must_stay_absent.is_empty() {
        return;
    }
    let started = std::thread::Builder::new()
        .name("bridle-protect-watch".into())
        .spawn(move || watch(protected, must_stay_absent));
    // Without the watch, nothing stops a command that plants what must stay absent: fail
    // closed (a command can make this happen by using up a process limit first).
    if let Err(e) = started {
        claim_exit();
        stop(&format!(
            "bridle: sandbox unavailable: G-FS-PROTECT (starting the watch over protected paths: {e}); the sandbox was stopped.\n"
        ));
    }
}

/// How often paths that must stay absent are checked.
const ABSENT_CHECK_MS: u16 = 5;

/// How often the mount table is read again without a change notification (a safety net).
const MOUNTS_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

fn watch(protected: Vec<PathBuf>, must_stay_absent: Vec<PathBuf>) {
    use nix::poll::{PollFd, PollFlags, PollTimeout};
    use std::io::{Read, Seek};
    let mut mountinfo = match std::fs::File::open("/proc/self/mountinfo") {
        Ok(file) => file,
        Err(e) => {
            claim_exit();
            stop(&format!(
                "bridle: sandbox unavailable: G-FS-PROTECT (opening the mount table to watch protected paths: {e}); the sandbox was stopped.\n"
            ));
        }
    };
    let read_points = |file: &mut std::fs::File| {
        let mut text = Vec::new();
        let _ = file.rewind();
        let _ = file.read_to_end(&mut text);
        mount_points(&text)
    };
    let initial = read_points(&mut mountinfo);
    // Every protected path was bound before the command started; one missing from the mount
    // table now cannot be watched, so nothing runs unwatched.
    if let Some(unseen) = protected.iter().find(|p| !initial.contains(*p)) {
        claim_exit();
        stop(&format!(
            "bridle: sandbox unavailable: G-FS-PROTECT (protected path `{}` is not in the mount table, so it cannot be watched); the sandbox was stopped.\n",
            unseen.display()
        ));
    }
    let watched = protected;
    let timeout = PollTimeout::from(if must_stay_absent.is_empty() {
        1000
    } else {
        ABSENT_CHECK_MS
    });
    let mut mounts_read = std::time::Instant::now();
    let mut mounts_changed = false;
    loop {
        stop_if_planted(&must_stay_absent);
        if mounts_changed || mounts_read.elapsed() >= MOUNTS_CHECK {
            mounts_read = std::time::Instant::now();
            let now = read_points(&mut mountinfo);
            if let Some(gone) = watched.iter().find(|p| !now.contains(*p)) {
                claim_exit();
                stop(&gone_message(gone));
            }
        }
        // Mount changes raise POLLPRI on mountinfo.
        let mut fds = [PollFd::new(mountinfo.as_fd(), PollFlags::POLLPRI)];
        let _ = nix::poll::poll(&mut fds, timeout);
        mounts_changed = fds[0].revents().is_some_and(|r| !r.is_empty());
    }
}

/// What init says when the protected bind at `gone` disappeared.
fn gone_message(gone: &Path) -> String {
    if gone.extension().is_some_and(|e| e == "lock") {
        format!(
            "bridle: the lock `{}` was removed from outside the sandbox during the run, so git could replace the config it guards; the sandbox was stopped.\n",
            gone.display()
        )
    } else {
        format!(
            "bridle: protected path `{}` was removed or replaced from outside the sandbox during the run, which made it writable inside; the sandbox was stopped. Check the file: the command may have changed it.\n",
            gone.display()
        )
    }
}

/// Moves a planted path that must stay absent aside before anything on the host reads it (never
/// deleting it: the host may have made it), then stops everything. Every other process of the
/// sandbox is stopped first (a command could otherwise plant it again between the move and the
/// kill), and the path is checked until it stays gone, which covers a creation that was already
/// in the kernel when the stop arrived.
fn stop_if_planted(must_stay_absent: &[PathBuf]) {
    let planted = |p: &&PathBuf| std::fs::symlink_metadata(p).is_ok();
    let Some(first) = must_stay_absent.iter().find(planted) else {
        return;
    };
    // From here on this thread decides how init exits.
    claim_exit();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(-1),
        nix::sys::signal::Signal::SIGSTOP,
    );
    let mut moved = Vec::new();
    let mut quiet = 0;
    for _ in 0..50 {
        let mut found = false;
        for path in must_stay_absent.iter().filter(planted) {
            found = true;
            moved.push(move_aside(path));
        }
        quiet = if found { 0 } else { quiet + 1 };
        if quiet >= 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let to = moved.first().and_then(Option::as_deref);
    stop(&format!(
        "bridle: {} and the sandbox was stopped.\n",
        planted_message(first, to)
    ));
}

/// What bridle says of a path that must stay absent and appeared: where it was moved (`None`:
/// it could not be).
pub fn planted_message(path: &Path, moved_to: Option<&Path>) -> String {
    let whereto = match moved_to {
        Some(to) => format!("it was moved to `{}`", to.display()),
        None => "it could not be moved aside: remove it before running git there".to_string(),
    };
    format!(
        "`{}` appeared during the run; git on the host would read it as configuration, hooks or a repository, so {whereto}",
        path.display()
    )
}

/// After a run, once none of its processes is left: moves aside every path of
/// `must_stay_absent` that exists (the command may have planted one and ended before init's
/// next check, or been killed with init). Returns what was moved where (`None`: it could not
/// be moved).
pub fn sweep_planted(must_stay_absent: &[PathBuf]) -> Vec<(PathBuf, Option<PathBuf>)> {
    must_stay_absent
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .map(|p| (p.clone(), move_aside(p)))
        .collect()
}

/// Taken by whichever of init's threads decides how init exits: the watch while it moves a
/// planted path aside and stops the sandbox (so init's main thread cannot exit with the
/// command's status meanwhile), init's main thread when the command ended. Never released by
/// the thread that exits.
static EXIT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Makes the calling thread the one that decides how init exits (see `EXIT`); blocks forever
/// when another thread already is, which then exits the process.
fn claim_exit() {
    std::mem::forget(EXIT.lock());
}

/// Exits init with `code`, unless the watch is stopping the sandbox, which then exits it.
pub fn exit_init(code: i32) -> ! {
    claim_exit();
    sys::exit_now(code)
}

/// Kills every process of the sandbox (init is PID 1 of its PID namespace) and exits 137.
/// The caller holds `EXIT`.
fn stop(message: &str) -> ! {
    let _ = sys::write_all_raw(2, message.as_bytes());
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(-1),
        nix::sys::signal::Signal::SIGKILL,
    );
    sys::exit_now(137)
}

#[cfg(test)]
mod mountinfo_tests {
    use super::*;

    #[test]
    fn mount_points_are_parsed_with_escapes() {
        let text = b"36 35 98:0 / /mnt/a\\040b rw - ext3 /dev/root rw\n37 35 98:0 / /w/.git/config ro - ext4 x rw\n38 35 98:0 / /w/.git/modules/\xff ro - ext4 x rw\n";
        let points = mount_points(text);
        assert!(points.contains(Path::new(std::ffi::OsStr::from_bytes(
            b"/w/.git/modules/\xff"
        ))));
        assert!(points.contains(Path::new("/mnt/a b")));
        assert!(points.contains(Path::new("/w/.git/config")));
    }
}
