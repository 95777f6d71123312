//! Where the kernel wakes a supervisor thread at a notification, and the caller at its answer:
//! on the waker's own CPU (the listener's `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`) while the
//! machine has a CPU to spare, wherever the scheduler places it otherwise.
//!
//! Why both: at a notification the caller goes to sleep and at an answer the supervisor does,
//! so each hand-over can stay on the CPU the sleeper leaves. With CPUs idle that saves waking
//! one of them (on a virtual machine whose idle CPUs halt, an interrupt and an exit from halt):
//! in a loop of fork + exec + wait of `/bin/true` the supervisor's CPU time per exec fell from
//! 85 to 93 µs to 62 to 77 µs, the exec's added time by about 10 to 20 µs. With every CPU
//! busy (a parallel build) the flag set for good cost instead: the woken task, kept on the
//! waker's CPU, waits there or migrates, `make -j2` of 200 files 1 to 5 % slower. So the flag
//! follows how idle the machine was over the last [`WINDOW`]: on with at least [`SPARE_CPU`] of
//! a CPU idle (`bench/RESULTS.md`, thirteenth and twenty-second passes).
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

/// Idle CPU time per second of wall time (CPUs idle on average) at or above which wake-ups
/// stay on the waker's CPU.
const SPARE_CPU: f64 = 0.5;

/// The flag's state and the last sample of the machine's idle time.
pub(super) struct WakePlacement {
    /// `/proc/uptime`: seconds since boot, and idle seconds summed over the CPUs. `None` where
    /// it cannot be read: the flag is then never set.
    uptime: Option<File>,
    state: Mutex<State>,
}

struct State {
    /// When the last sample was taken (to read the file once per window at most).
    taken: Option<Instant>,
    /// Its uptime and idle seconds.
    uptime: f64,
    idle: f64,
    /// Whether the flag is set now.
    sync: bool,
    /// The kernel refused the flag (before 6.6): never tried again.
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
        let sync = first.is_some() && unotify::set_sync_wake_up(listener, true).is_ok();
        let (up, idle) = first.unwrap_or_default();
        Self {
            state: Mutex::new(State {
                taken: first.map(|_| Instant::now()),
                uptime: up,
                idle,
                sync,
                refused: first.is_some() && !sync,
            }),
            uptime,
        }
    }

    /// Called at each notification: once per window, samples the idle time and sets or clears
    /// the flag on `listener` to follow it. Never waits: a thread finding another one at it
    /// leaves it to that one.
    pub(super) fn follow_load(&self, listener: BorrowedFd<'_>) {
        let Some(uptime) = &self.uptime else { return };
        let Ok(mut state) = self.state.try_lock() else {
            return;
        };
        let now = Instant::now();
        if state.refused || state.taken.is_some_and(|t| now.duration_since(t) < WINDOW) {
            return;
        }
        let Some((up, idle)) = read_uptime(uptime) else {
            return;
        };
        let before = state.taken.map(|_| (state.uptime, state.idle));
        state.taken = Some(now);
        state.uptime = up;
        state.idle = idle;
        let Some(sync) = before.and_then(|before| wanted(before, (up, idle))) else {
            return;
        };
        if sync != state.sync {
            match unotify::set_sync_wake_up(listener, sync) {
                Ok(()) => state.sync = sync,
                Err(_) => state.refused = true,
            }
        }
    }
}

/// Whether wake-ups should stay on the waker's CPU, from two samples of `/proc/uptime`
/// (uptime, idle seconds): with at least [`SPARE_CPU`] idle on average between them. `None`
/// when they measure no time.
fn wanted(before: (f64, f64), after: (f64, f64)) -> Option<bool> {
    let spare = (after.1 - before.1) / (after.0 - before.0);
    spare.is_finite().then_some(spare >= SPARE_CPU)
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
    fn wake_ups_stay_on_the_waker_s_cpu_only_while_a_cpu_is_half_idle() {
        // One of two CPUs idle (a serial loop of execs): on.
        assert_eq!(wanted((100.0, 50.0), (100.2, 50.19)), Some(true));
        // Both busy (a parallel build): off.
        assert_eq!(wanted((100.0, 50.0), (100.2, 50.03)), Some(false));
        assert_eq!(wanted((100.0, 50.0), (100.2, 50.12)), Some(true));
        // No time between the samples: nothing to go by.
        assert_eq!(wanted((100.0, 50.0), (100.0, 50.0)), None);
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
