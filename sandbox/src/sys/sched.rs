//! The calling thread's scheduling attributes (`sched_getattr`/`sched_setattr`).

use std::io;

use nix::libc;

use super::check;

/// `SCHED_FLAG_RESET_ON_FORK`: what the thread makes (processes and threads) starts with the
/// defaults again, not with what is set here.
const RESET_ON_FORK: u64 = 0x01;

/// The size of `struct sched_attr` as these calls pass it (its first version, 48 bytes).
fn attr_size() -> u32 {
    u32::try_from(std::mem::size_of::<libc::sched_attr>()).unwrap_or(u32::MAX)
}

/// The calling thread's `struct sched_attr` (its first version: the policy, flags, nice and
/// runtime).
fn attributes() -> io::Result<libc::sched_attr> {
    let mut attr = libc::sched_attr {
        size: 0,
        sched_policy: 0,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: 0,
        sched_deadline: 0,
        sched_period: 0,
    };
    // SAFETY: sched_getattr writes at most `attr_size()` bytes, the size of `attr`, which it
    // points at; pid 0 is the calling thread and flags must be 0.
    let ret =
        unsafe { libc::syscall(libc::SYS_sched_getattr, 0, &raw mut attr, attr_size(), 0u32) };
    check(ret)?;
    Ok(attr)
}

/// Asks the scheduler to run the calling thread in slices of `runtime_ns` (EEVDF's custom
/// slice, Linux 6.12: a thread with a short slice gets an early deadline, so a task it wakes
/// does not preempt it before it sleeps again), keeping its policy and nice value; what it
/// makes later starts with the defaults (`SCHED_FLAG_RESET_ON_FORK`). Only for the fair
/// policies (`SCHED_OTHER`, `SCHED_BATCH`); a thread under another one is left as it is.
/// Kernels before 6.12 ignore the runtime of a fair thread.
pub fn set_fair_slice(runtime_ns: u64) -> io::Result<()> {
    let mut attr = attributes()?;
    let fair = [libc::SCHED_OTHER, libc::SCHED_BATCH]
        .iter()
        .any(|p| u32::try_from(*p).is_ok_and(|p| p == attr.sched_policy));
    if !fair {
        return Ok(());
    }
    attr.size = attr_size();
    attr.sched_runtime = runtime_ns;
    attr.sched_flags = RESET_ON_FORK;
    // SAFETY: sched_setattr reads `attr.size` bytes from the pointer, which points at `attr`
    // of exactly that size; pid 0 is the calling thread and flags must be 0.
    let ret = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &raw const attr, 0u32) };
    check(ret).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `se.slice` a new process gets (`/proc/self/sched` of a `cat` it runs).
    fn slice_of_a_new_process() -> Option<u64> {
        let out = std::process::Command::new("cat")
            .arg("/proc/self/sched")
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.starts_with("se.slice"))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.trim().parse().ok())
    }

    #[test]
    fn a_thread_given_a_short_slice_keeps_it_and_what_it_starts_gets_the_default() {
        let lacks = crate::host_lacks("custom-slice");
        let default = slice_of_a_new_process().expect("se.slice in /proc/self/sched");
        // A thread of its own, so the test harness's threads are left as they are.
        let (own, started) = std::thread::spawn(|| {
            set_fair_slice(100_000).expect("sched_setattr");
            let own = attributes().expect("sched_getattr");
            (own, slice_of_a_new_process())
        })
        .join()
        .unwrap();
        if !lacks {
            assert_eq!(
                own.sched_runtime, 100_000,
                "set BRIDLE_HOST_LACKS=custom-slice on kernels before 6.12"
            );
        }
        assert_eq!(own.sched_flags & RESET_ON_FORK, RESET_ON_FORK);
        assert_eq!(started, Some(default), "a process the thread started");
    }
}
