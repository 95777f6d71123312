//! Init's watch over the protected binds and the paths that must stay absent.

use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::sys;

/// Mount points listed in a `/proc/self/mountinfo` text (field 5, octal escapes decoded).
fn mount_points(mountinfo: &str) -> std::collections::HashSet<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| {
            let mut out = Vec::new();
            let bytes = field.as_bytes();
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
/// Paths that must stay absent are checked every 5 ms for the first 200 ms, and from then on
/// through inotify on their directories, so a planted file is removed within the time it takes
/// to wake this thread (a timed check every second is the safety net; every 250 ms when inotify
/// is unavailable). inotify waits that long because releasing an inotify instance waits for an
/// SRCU grace period (about 15 ms here), which would otherwise be added to every short run as
/// init exits. Runs on its own thread in init
/// (PID 1), for the life of the run.
pub fn watch_protected(protected: Vec<PathBuf>, must_stay_absent: Vec<PathBuf>) {
    if protected.is_empty() && must_stay_absent.is_empty() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("bridle-protect-watch".into())
        .spawn(move || watch(protected, must_stay_absent));
}

/// How long a run lasts before paths that must stay absent are watched through inotify.
const INOTIFY_AFTER: std::time::Duration = std::time::Duration::from_millis(200);

fn watch(protected: Vec<PathBuf>, must_stay_absent: Vec<PathBuf>) {
    use nix::poll::{PollFd, PollFlags, PollTimeout};
    use std::io::{Read, Seek};
    let Ok(mut mountinfo) = std::fs::File::open("/proc/self/mountinfo") else {
        return;
    };
    let read_points = |file: &mut std::fs::File| {
        let mut text = String::new();
        let _ = file.rewind();
        let _ = file.read_to_string(&mut text);
        mount_points(&text)
    };
    let initial = read_points(&mut mountinfo);
    let watched: Vec<PathBuf> = protected
        .into_iter()
        .filter(|p| initial.contains(p))
        .collect();
    let started = std::time::Instant::now();
    let mut inotify = None;
    let mut inotify_tried = false;
    let mut mounts_changed = true;
    loop {
        if !inotify_tried && started.elapsed() >= INOTIFY_AFTER {
            inotify_tried = true;
            inotify = absent_watch(&must_stay_absent);
        }
        stop_if_planted(&must_stay_absent);
        if mounts_changed {
            let now = read_points(&mut mountinfo);
            if let Some(gone) = watched.iter().find(|p| !now.contains(*p)) {
                stop(&gone_message(gone));
            }
        }
        let timeout = PollTimeout::from(if must_stay_absent.is_empty() {
            u16::MAX
        } else if inotify.is_some() {
            1000
        } else if started.elapsed() < INOTIFY_AFTER {
            5
        } else {
            250
        });
        // Mount changes raise POLLPRI on mountinfo; creations in a watched directory make the
        // inotify descriptor readable.
        let mut fds = vec![PollFd::new(mountinfo.as_fd(), PollFlags::POLLPRI)];
        if let Some(i) = &inotify {
            fds.push(PollFd::new(i.as_fd(), PollFlags::POLLIN));
        }
        let ready = nix::poll::poll(&mut fds, timeout);
        // Re-read the mount table when it changed, and on a timeout as a safety net.
        mounts_changed =
            !matches!(ready, Ok(n) if n > 0) || fds[0].revents().is_some_and(|r| !r.is_empty());
        drop(fds);
        if let Some(i) = &inotify {
            // Drain: the check at the top of the loop looks at the paths themselves.
            while matches!(i.read_events(), Ok(events) if !events.is_empty()) {}
        }
    }
}

/// What init says when the protected bind at `gone` disappeared.
fn gone_message(gone: &Path) -> String {
    if gone.extension().is_some_and(|e| e == "lock") {
        format!(
            "bridle: bridle's lock `{}` was removed from outside the sandbox during the run, so git could replace the config it guards; the sandbox was stopped.\n",
            gone.display()
        )
    } else {
        format!(
            "bridle: protected path `{}` was removed or replaced from outside the sandbox during the run, which made it writable inside; the sandbox was stopped. Check the file: the command may have changed it.\n",
            gone.display()
        )
    }
}

/// An inotify descriptor watching the directories of `paths` for entries created or moved in.
fn absent_watch(paths: &[PathBuf]) -> Option<nix::sys::inotify::Inotify> {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    if paths.is_empty() {
        return None;
    }
    let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK).ok()?;
    for path in paths {
        let dir = path.parent()?;
        inotify
            .add_watch(
                dir,
                AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_ONLYDIR,
            )
            .ok()?;
    }
    Some(inotify)
}

/// Removes a planted path that must stay absent before anything on the host reads it, then stops
/// everything. Every other process of the sandbox is stopped first (a command could otherwise
/// plant the file again between the removal and the kill), and the path is checked until it
/// stays gone, which covers a creation that was already in the kernel when the stop arrived.
fn stop_if_planted(must_stay_absent: &[PathBuf]) {
    let planted = |p: &&PathBuf| std::fs::symlink_metadata(p).is_ok();
    let Some(first) = must_stay_absent.iter().find(planted) else {
        return;
    };
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(-1),
        nix::sys::signal::Signal::SIGSTOP,
    );
    let mut quiet = 0;
    for _ in 0..50 {
        let mut found = false;
        for path in must_stay_absent.iter().filter(planted) {
            found = true;
            let _ = std::fs::remove_file(path).or_else(|_| std::fs::remove_dir_all(path));
        }
        quiet = if found { 0 } else { quiet + 1 };
        if quiet >= 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    stop(&format!(
        "bridle: the command created `{}`, which would redirect git's configuration and hooks outside the protected paths; it was removed and the sandbox was stopped.\n",
        first.display()
    ));
}

/// Kills every process of the sandbox (init is PID 1 of its PID namespace) and exits 137.
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
        let text = "36 35 98:0 / /mnt/a\\040b rw - ext3 /dev/root rw\n37 35 98:0 / /w/.git/config ro - ext4 x rw\n";
        let points = mount_points(text);
        assert!(points.contains(Path::new("/mnt/a b")));
        assert!(points.contains(Path::new("/w/.git/config")));
    }
}
