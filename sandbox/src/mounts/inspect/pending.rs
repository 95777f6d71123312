//! Records of inspections not done yet, so that a run whose end-of-run inspection never happened
//! (bridle was killed) or stopped at a bound is made up for by the next run in the same roots.
//!
//! Each run writes `pending/PID-ID` (its start time and the device and inode of each root it
//! may write) before its command starts, and removes it once an inspection covering everything
//! since then has completed. A later run looks back to the start of every record left by a
//! process that is gone and shares a root with it, and removes those records once its own
//! inspection, which covered them, completed. Records of runs still going are left to them.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::mounts::state;

/// The first line of every record.
const HEADER: &str = "bridle-inspection 1";

/// A record of a run that is gone and older than this is dropped by any run that completes its
/// inspection (its roots may be gone: nothing would make up for it).
const FORGET_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);

#[derive(Debug)]
pub(super) struct Record {
    dir: PathBuf,
    name: String,
    roots: Vec<(u64, u64)>,
}

/// What a record holds.
struct Content {
    pid: u32,
    start: SystemTime,
    roots: Vec<(u64, u64)>,
}

fn parse(name: &str, text: &[u8]) -> Option<Content> {
    let pid = name.split('-').next()?.parse().ok()?;
    let text = std::str::from_utf8(text).ok()?;
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    let mut start = lines.next()?.split(' ');
    let secs: u64 = start.next()?.parse().ok()?;
    let nanos: u32 = start.next()?.parse().ok()?;
    let start = SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))?;
    let roots = lines
        .map(|line| {
            let (dev, ino) = line.split_once(' ')?;
            Some((dev.parse().ok()?, ino.parse().ok()?))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Content { pid, start, roots })
}

fn alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

impl Record {
    /// Writes this run's record; `None` when records cannot be kept here (then only this run's
    /// own inspection stands).
    pub(super) fn begin(roots: &[PathBuf], start: SystemTime) -> Option<Record> {
        let ids: Vec<(u64, u64)> = roots
            .iter()
            .filter_map(|r| std::fs::symlink_metadata(r).ok())
            .map(|m| (m.dev(), m.ino()))
            .collect();
        let dir = match state::records_dir("pending") {
            Ok(dir) => dir,
            Err(e) => {
                tracing::warn!("the records of pending inspections cannot be kept: {e}");
                return None;
            }
        };
        let since = start
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let mut text = format!("{HEADER}\n{} {}\n", since.as_secs(), since.subsec_nanos());
        for (dev, ino) in &ids {
            text.push_str(&format!("{dev} {ino}\n"));
        }
        let name = format!("{}-{}", std::process::id(), crate::mounts::unique_suffix());
        if let Err(e) = state::write_record(&dir, &name, text.as_bytes()) {
            tracing::warn!("the record of this run's inspection cannot be written: {e}");
            return None;
        }
        Some(Record {
            dir,
            name,
            roots: ids,
        })
    }

    /// Records left by runs that are gone and shared a root with this one.
    fn orphans(&self) -> Vec<(String, Content)> {
        self.gone()
            .into_iter()
            .filter(|(_, c)| c.roots.iter().any(|r| self.roots.contains(r)))
            .collect()
    }

    /// Records left by runs that are gone, whatever their roots.
    fn gone(&self) -> Vec<(String, Content)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                if name == self.name || name.starts_with('.') {
                    return None;
                }
                let content = parse(&name, &state::read_record(&self.dir, &name)?)?;
                (!alive(content.pid)).then_some((name, content))
            })
            .collect()
    }

    /// How far back this run's inspection must look: to `own` (its start), or to the start of
    /// an earlier run in the same roots whose inspection never completed.
    pub(super) fn since(&self, own: SystemTime) -> SystemTime {
        self.orphans()
            .into_iter()
            .map(|(_, c)| c.start)
            .fold(own, SystemTime::min)
    }

    /// Removes this record of a command that never ran.
    pub(super) fn discard(self) {
        let _ = std::fs::remove_file(self.dir.join(&self.name));
    }

    /// Ends the record: with `covered` (an inspection looked at everything since the start of
    /// this record and the orphans it made up for), this record and those orphans whose roots
    /// this run inspected are removed; otherwise this one is kept for the next run.
    pub(super) fn complete(self, covered: bool) {
        if !covered {
            return;
        }
        for (name, content) in self.gone() {
            let covered = content.roots.iter().all(|r| self.roots.contains(r));
            let stale = content.start.elapsed().is_ok_and(|age| age > FORGET_AFTER);
            if covered || stale {
                let _ = std::fs::remove_file(self.dir.join(name));
            }
        }
        let _ = std::fs::remove_file(self.dir.join(&self.name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_left_by_a_gone_run_makes_the_next_look_back_and_is_then_removed() {
        let root = tempfile::tempdir().unwrap();
        let roots = vec![root.path().to_path_buf()];
        let long_ago = SystemTime::now() - Duration::from_secs(3600);
        let left = Record::begin(&roots, long_ago).unwrap();
        // What a killed run leaves: a record under a pid that is gone.
        let dead = format!("{}-x", u32::MAX);
        std::fs::rename(left.dir.join(&left.name), left.dir.join(&dead)).unwrap();
        let now = SystemTime::now();
        let run = Record::begin(&roots, now).unwrap();
        assert_eq!(run.since(now), long_ago);
        let dir = run.dir.clone();
        let own = run.name.clone();
        run.complete(true);
        assert!(!dir.join(&dead).exists());
        assert!(!dir.join(own).exists());
    }

    #[test]
    fn a_week_old_record_of_a_gone_run_elsewhere_is_dropped() {
        let gone_root = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let old = SystemTime::now() - FORGET_AFTER - Duration::from_secs(60);
        let left = Record::begin(&[gone_root.path().to_path_buf()], old).unwrap();
        let dead = format!("{}-y", u32::MAX);
        std::fs::rename(left.dir.join(&left.name), left.dir.join(&dead)).unwrap();
        let run = Record::begin(&[root.path().to_path_buf()], SystemTime::now()).unwrap();
        let dir = run.dir.clone();
        run.complete(true);
        assert!(!dir.join(&dead).exists());
    }

    #[test]
    fn an_incomplete_inspection_keeps_its_record_and_other_roots_are_not_affected() {
        let root = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let start = SystemTime::now() - Duration::from_secs(60);
        let run = Record::begin(&[root.path().to_path_buf()], start).unwrap();
        let path = run.dir.join(&run.name);
        run.complete(false);
        assert!(path.exists());
        // Alive (this process): not taken for an orphan.
        let elsewhere = Record::begin(&[other.path().to_path_buf()], SystemTime::now()).unwrap();
        let same = Record::begin(&[root.path().to_path_buf()], SystemTime::now()).unwrap();
        assert!(same.since(SystemTime::now()) > start);
        elsewhere.complete(true);
        same.complete(true);
        assert!(path.exists());
        std::fs::remove_file(path).unwrap();
    }
}
