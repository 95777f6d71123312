//! A process-count limit for root: the kernel never applies `RLIMIT_NPROC` to uid 0, so when
//! bridle runs as root a profile's `limits.processes` is enforced by a pids cgroup instead. The
//! parent creates `bridle-<pid>-<n>` under the pids controller, writes `pids.max`, the launcher
//! moves itself in before it forks anything, and the parent removes the group when the run is
//! over. A bridle killed before that (SIGKILL, a crash) cannot remove its group: the next run
//! removes the empty groups of bridle processes that are gone. Unprivileged users get
//! `RLIMIT_NPROC`, which the kernel does apply to them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Where this process may create pids cgroups, or why it cannot.
pub fn pids_parent() -> Result<PathBuf, String> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("reading /proc/self/cgroup: {e}"))?;
    // cgroup v1: a line `N:pids:/path` and the hierarchy mounted at /sys/fs/cgroup/pids.
    let v1 = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "pids")
            .then(|| Path::new("/sys/fs/cgroup/pids").join(path.trim_start_matches('/')))
    });
    // cgroup v2: the line `0::/path`; usable when pids is enabled for our group's children.
    let v2 = own.lines().find_map(|l| l.strip_prefix("0::")).map(|path| {
        let root = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            PathBuf::from("/sys/fs/cgroup")
        } else {
            PathBuf::from("/sys/fs/cgroup/unified")
        };
        root.join(path.trim_start_matches('/'))
    });
    // A v1 pids hierarchy can always have children; a v2 group only when its parent enabled the
    // controller for it (pids.max exists) or it enabled it for its own children.
    let v1 = v1.map(|p| (p, true));
    let v2 = v2.map(|p| {
        let enabled = p.join("pids.max").exists()
            || std::fs::read_to_string(p.join("cgroup.subtree_control"))
                .is_ok_and(|c| c.split_whitespace().any(|x| x == "pids"));
        (p, enabled)
    });
    for (candidate, enabled) in [v1, v2].into_iter().flatten() {
        let writable = nix::unistd::access(&candidate, nix::unistd::AccessFlags::W_OK).is_ok();
        if enabled && writable {
            return Ok(candidate);
        }
    }
    Err("no writable cgroup with the pids controller".to_owned())
}

/// A pids cgroup for one run; removed on drop (after the run's processes are gone).
#[derive(Debug)]
pub struct PidsGroup {
    dir: PathBuf,
}

impl PidsGroup {
    /// Creates a group under `parent` allowing at most `max` processes.
    pub fn create(parent: &Path, max: u64) -> Result<PidsGroup, String> {
        sweep_left_over(parent);
        static SERIAL: AtomicU32 = AtomicU32::new(0);
        // A group of this name is left over from a bridle process that had our pid and was
        // killed before it removed it: removed when empty, else another name is taken.
        let mut tries = 0;
        let dir = loop {
            let name = format!(
                "bridle-{}-{}",
                std::process::id(),
                SERIAL.fetch_add(1, Ordering::Relaxed)
            );
            let dir = parent.join(name);
            let made = match std::fs::create_dir(&dir) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 16 => {
                    tries += 1;
                    if std::fs::remove_dir(&dir).is_err() {
                        continue;
                    }
                    std::fs::create_dir(&dir)
                }
                other => other,
            };
            made.map_err(|e| format!("creating the pids cgroup `{}`: {e}", dir.display()))?;
            break dir;
        };
        let group = PidsGroup { dir };
        std::fs::write(group.dir.join("pids.max"), max.to_string())
            .map_err(|e| format!("writing pids.max in `{}`: {e}", group.dir.display()))?;
        Ok(group)
    }

    /// The file a process writes its pid to in order to join.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }
}

impl Drop for PidsGroup {
    fn drop(&mut self) {
        // Only succeeds once the group is empty, which it is after the run's tree is gone.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

/// Groups younger than this are left alone by [`sweep_left_over`].
const SWEEP_AGE: std::time::Duration = std::time::Duration::from_secs(10);

/// Removes the groups under `parent` left by bridle processes that are gone and left nothing
/// running in them. The group of a live bridle is never touched: between creating it and its
/// launcher joining, it is empty. Its pid is not enough to tell (a bridle in another PID
/// namespace may share `parent`), so a group must also be older than [`SWEEP_AGE`]: the
/// launcher joins within milliseconds, and stays in it until the run ends. (A cgroup
/// directory is removed only when empty: `rmdir` fails with `EBUSY` while a process is in it,
/// so a process started from a dead bridle's run keeps its group.)
fn sweep_left_over(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_pid) else {
            continue;
        };
        // A cgroup directory's modification time is when it was made.
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|made| now.duration_since(made).is_ok_and(|age| age >= SWEEP_AGE));
        if old && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// The pid of the bridle process that made a group named `name` (`bridle-<pid>-<serial>`).
fn owner_pid(name: &str) -> Option<u32> {
    let (pid, serial) = name.strip_prefix("bridle-")?.split_once('-')?;
    serial.parse::<u32>().ok()?;
    pid.parse().ok()
}

/// Moves the calling process into the group whose `cgroup.procs` is `procs_file`.
pub fn join(procs_file: &Path) -> std::io::Result<()> {
    std::fs::write(procs_file, std::process::id().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Groups of our name left by a killed bridle process that had our pid: an empty one is
    /// replaced, one still in use is passed over for another name.
    #[test]
    fn a_group_left_by_an_earlier_process_of_our_pid_does_not_stop_the_run() {
        let parent = tempfile::tempdir().unwrap();
        for serial in 0..400 {
            let dir = parent
                .path()
                .join(format!("bridle-{}-{serial}", std::process::id()));
            std::fs::create_dir(&dir).unwrap();
            // Odd ones are "in use" (not removable).
            if serial % 2 == 1 {
                std::fs::write(dir.join("cgroup.procs"), "1").unwrap();
            }
        }
        let group = PidsGroup::create(parent.path(), 7).unwrap();
        assert_eq!(
            std::fs::read_to_string(group.dir.join("pids.max")).unwrap(),
            "7"
        );
    }

    /// A bridle killed with SIGKILL leaves its group: the next run removes it when its
    /// process is gone and the group is empty, and nothing else.
    #[test]
    fn empty_groups_of_bridle_processes_that_are_gone_are_removed_at_the_next_run() {
        let parent = tempfile::tempdir().unwrap();
        // Above the largest pid_max (2^22): never a live process.
        let gone = 1u32 << 23;
        let dir = |name: &str| parent.path().join(name);
        for name in [
            format!("bridle-{gone}-0"),
            format!("bridle-{gone}-17"),
            format!("bridle-{gone}-1"),
            "bridle-1-0".to_owned(),
            format!("bridle-{gone}"),
            format!("bridle-{gone}-x"),
            format!("other-{gone}-0"),
        ] {
            std::fs::create_dir(dir(&name)).unwrap();
        }
        // Still in use: a process started by the dead run is in it (rmdir fails).
        std::fs::write(dir(&format!("bridle-{gone}-1")).join("cgroup.procs"), "1").unwrap();
        // Every group made a minute ago, but one just made (a live bridle's in another PID
        // namespace, about to be joined).
        let minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        for entry in std::fs::read_dir(parent.path()).unwrap() {
            let dir = std::fs::File::open(entry.unwrap().path()).unwrap();
            dir.set_modified(minute_ago).unwrap();
        }
        std::fs::create_dir(dir(&format!("bridle-{gone}-2"))).unwrap();
        let group = PidsGroup::create(parent.path(), 7).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(parent.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut want = vec![
            format!("bridle-{gone}-1"),
            format!("bridle-{gone}-2"),
            "bridle-1-0".to_owned(),
            format!("bridle-{gone}"),
            format!("bridle-{gone}-x"),
            format!("other-{gone}-0"),
            group.dir.file_name().unwrap().to_str().unwrap().to_owned(),
        ];
        want.sort();
        assert_eq!(left, want);
    }
}
