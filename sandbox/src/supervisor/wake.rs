//! Where the kernel wakes a supervisor thread at a notification, and the caller at its answer:
//! on the waker's own CPU (the listener's `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`) while the
//! machine has CPU time to spare, wherever the scheduler places it otherwise.
//!
//! Why both: at a notification the caller goes to sleep and at an answer the supervisor does,
//! so each hand-over can stay on the CPU the sleeper leaves. With CPUs idle that saves waking
//! one of them (on a virtual machine whose idle CPUs halt, an interrupt and an exit from halt):
//! in a loop of fork + exec + wait of `/bin/true` the supervisor's CPU time per exec fell from
//! 85 to 93 µs to 62 to 77 µs, the exec's added time by about 10 to 20 µs. With every CPU
//! busy (a parallel build) the flag set for good cost instead: the woken task, kept on the
//! waker's CPU, waits there or migrates, `make -j2` of 200 files 1 to 5 % slower. So the flag
//! follows how idle the machine was over the last [`WINDOW`]: on from [`SPARE_ON`] of a CPU
//! idle on average, off again below [`SPARE_OFF`] (`bench/RESULTS.md`, thirteenth and
//! twenty-second passes).
//! Only where the threads wake changes, never what is decided.

use std::fs::File;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sys::notify as unotify;

/// How long the machine's idle time is measured before the flag follows it: `/proc/uptime`
/// counts in hundredths of a second, so a shorter window would mostly measure its rounding.
const WINDOW: Duration = Duration::from_millis(200);

/// Idle CPU time per second of wall time (CPUs idle on average) from which wake-ups stay on
/// the waker's CPU, and below which they no longer do: apart, so that a load between them
/// (and `/proc/uptime`'s rounding, about 0.1 of a CPU over a window) does not flip the flag at
/// every window.
const SPARE_ON: f64 = 0.6;
const SPARE_OFF: f64 = 0.4;

/// The flag's state and the last sample of the machine's idle time.
pub(super) struct WakePlacement {
    /// `/proc/uptime`: seconds since boot, and idle seconds summed over the CPUs. `None` where
    /// it cannot be read: the flag is then never set.
    uptime: Option<File>,
    state: Mutex<State>,
}

struct State {
    /// The last sample: when it was taken (to read the file once per window at most), and its
    /// uptime and idle seconds.
    last: Option<(Instant, (f64, f64))>,
    /// Whether the flag is set now.
    sync: bool,
    /// The kernel does not know the flag (`EINVAL`: before 6.6): never tried again.
    refused: bool,
}

impl WakePlacement {
    /// Starts with the flag set on `listener` and the first sample taken: a sandbox starts as
    /// one process, and most (a tool call's command) run their programs one after another, so
    /// the flag is what the first window most likely wants, and a short-lived sandbox has it
    /// throughout.
    pub(super) fn new(listener: BorrowedFd<'_>) -> Self {
        let uptime = File::open("/proc/uptime").ok();
        let first = uptime.as_ref().and_then(read_uptime);
        let set = first.map(|_| unotify::set_sync_wake_up(listener, true));
        let sync = matches!(set, Some(Ok(())));
        Self {
            state: Mutex::new(State {
                last: first.map(|sample| (Instant::now(), sample)),
                sync,
                refused: set.is_some_and(|r| unknown_flag(r.as_ref().err())),
            }),
            uptime,
        }
    }

    /// Called after each exec notification is answered: once per window, samples the idle time
    /// and sets or clears the flag on `listener` to follow it. A thread finding another one at
    /// it leaves it to that one (the kernel's own lock, taken by the ioctl, is held briefly).
    pub(super) fn follow_load(&self, listener: BorrowedFd<'_>) {
        let Some(uptime) = &self.uptime else { return };
        let Ok(mut state) = self.state.try_lock() else {
            return;
        };
        let now = Instant::now();
        if state.refused
            || state
                .last
                .is_some_and(|(t, _)| now.duration_since(t) < WINDOW)
        {
            return;
        }
        let Some(sample) = read_uptime(uptime) else {
            return;
        };
        let before = state.last.replace((now, sample));
        let Some(spare) = before.and_then(|(_, before)| spare_cpu(before, sample)) else {
            return;
        };
        let sync = wanted(state.sync, spare);
        if sync != state.sync {
            match unotify::set_sync_wake_up(listener, sync) {
                Ok(()) => state.sync = sync,
                // Anything else (`EINTR` at the kernel's lock) is tried again next window.
                Err(e) => state.refused = unknown_flag(Some(&e)),
            }
        }
    }
}

/// CPUs idle on average between two samples of `/proc/uptime` (uptime, idle seconds); `None`
/// when they measure no time.
fn spare_cpu(before: (f64, f64), after: (f64, f64)) -> Option<f64> {
    let spare = (after.1 - before.1) / (after.0 - before.0);
    spare.is_finite().then_some(spare)
}

/// Whether wake-ups should stay on the waker's CPU, given whether they do now and the CPUs
/// idle on average over the last window.
fn wanted(now: bool, spare: f64) -> bool {
    if now {
        spare >= SPARE_OFF
    } else {
        spare >= SPARE_ON
    }
}

/// Whether `error` says the kernel does not know the flag.
fn unknown_flag(error: Option<&std::io::Error>) -> bool {
    error.is_some_and(|e| e.raw_os_error() == Some(nix::libc::EINVAL))
}

/// The two numbers of `/proc/uptime` ("36312.96 21310.01\n"), read from its start.
fn read_uptime(file: &File) -> Option<(f64, f64)> {
    let mut buf = [0u8; 64];
    let n = file.read_at(&mut buf, 0).ok()?;
    parse_uptime(std::str::from_utf8(&buf[..n]).ok()?)
}

fn parse_uptime(text: &str) -> Option<(f64, f64)> {
    let mut fields = text.split_ascii_whitespace();
    let up = fields.next()?.parse().ok()?;
    let idle = fields.next()?.parse().ok()?;
    Some((up, idle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptime_is_read_as_its_two_numbers() {
        assert_eq!(
            parse_uptime("36312.96 21310.01\n"),
            Some((36312.96, 21310.01))
        );
        assert_eq!(parse_uptime("36312.96\n"), None);
        assert_eq!(parse_uptime("x 1\n"), None);
    }

    #[test]
    fn idle_cpus_are_the_idle_time_over_the_wall_time_between_two_samples() {
        let spare = |before, after| spare_cpu(before, after).map(|s| (s * 100.0).round() / 100.0);
        // One of two CPUs idle (a serial loop of execs).
        assert_eq!(spare((100.0, 50.0), (100.2, 50.19)), Some(0.95));
        // Both busy (a parallel build).
        assert_eq!(spare((100.0, 50.0), (100.2, 50.03)), Some(0.15));
        // No time between the samples: nothing to go by.
        assert_eq!(spare_cpu((100.0, 50.0), (100.0, 50.0)), None);
    }

    #[test]
    fn wake_ups_stay_on_the_waker_s_cpu_while_cpus_idle_and_flip_only_past_the_other_bound() {
        assert!(wanted(false, 0.95) && wanted(true, 0.95));
        assert!(!wanted(false, 0.15) && !wanted(true, 0.15));
        // Between the bounds the flag stays as it is.
        assert!(!wanted(false, 0.5) && wanted(true, 0.5));
        assert!(wanted(false, SPARE_ON) && !wanted(true, SPARE_OFF - 0.01));
    }

    #[test]
    fn only_einval_says_the_kernel_lacks_the_flag() {
        use std::io::Error;
        assert!(unknown_flag(Some(&Error::from_raw_os_error(
            nix::libc::EINVAL
        ))));
        assert!(!unknown_flag(Some(&Error::from_raw_os_error(
            nix::libc::EINTR
        ))));
        assert!(!unknown_flag(None));
    }

    #[test]
    fn this_machine_s_uptime_reads_and_grows() {
        let file = File::open("/proc/uptime").expect("open /proc/uptime");
        let (up, idle) = read_uptime(&file).expect("read /proc/uptime");
        assert!(up > 0.0 && idle >= 0.0, "{up} {idle}");
        std::thread::sleep(Duration::from_millis(30));
        let (later, _) = read_uptime(&file).expect("read /proc/uptime again");
        assert!(later > up, "{later} after {up}");
    }
}
