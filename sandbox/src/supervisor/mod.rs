//! The exec supervisor: command rules decided at every `execve`/`execveat` of every process in
//! a sandbox, on the argv and the program that actually run.
//!
//! It runs when the spec has command rules ([`bridle_policy::SandboxSpec::exec_rules`]), in a
//! process of its own, `bridle-execs` ([`pool`]), which the process that forks the command (the
//! sandbox's init, PID 1 of its PID namespace, or the launcher where there is no PID namespace)
//! forks once the command handed over its filter's listener. Both are bridle's own code, outside
//! the command's seccomp filter and Landlock domain. Under whole-tree tracing (no seccomp
//! filter, below) it runs in the process that forks the command, an ancestor of every process
//! of the sandbox.
//!
//! # How
//!
//! - The command's seccomp filter returns `SECCOMP_RET_USER_NOTIF` for `execve` and `execveat`
//!   (and `ptrace`, refused: see below) ([`crate::seccomp::compile_supervised`]); the command installs it with a listener and hands
//!   the listener to its parent over a socket pair made before the fork (`SCM_RIGHTS`), which
//!   forks the supervisor's process with it and closes its own copy; the command closes its
//!   copy before it execs. Every exec of every process of the sandbox then
//!   waits in the kernel, before the kernel reads its arguments, until the supervisor answers
//!   (once received, killably only, where the kernel has `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`:
//!   a signal does not fail it with `EINTR` while bridle asks).
//!   Nothing is traced between execs: forks, clones, signals and exits of the sandbox do not
//!   wake the supervisor (a `ptrace` call does, to be refused).
//! - At the notification the supervisor reads the path and argv from the caller's memory
//!   (`process_vm_readv`) and decides (before a refusal or a question is reported it checks
//!   that the notification is still valid: the tid still names the caller, not a recycled
//!   pid):
//!   - a file that is not there (`stat` fails: a shell or `execvp` searching `PATH` makes
//!     several such execs for each one that runs): its argv is not read; where the path names
//!     nothing through directories that cannot change and that anyone may search, the exec is
//!     answered with the kernel's own error (`ENOENT`, `ENOTDIR`: [`settled`]); otherwise it
//!     goes on as an allowed one (the kernel fails it, or it is decided at its exec event);
//!   - deny: the exec fails with `EACCES` (an ordinary failed exec, on every architecture);
//!   - ask: the notification stays pending, the caller blocked in `execve`, while bridle asks
//!     (the approvals seam, through the channel of [`record`]); with nobody to ask, or no
//!     channel, the answer is no. The thread asking does not hold the supervisor: the
//!     sandbox's other execs are decided meanwhile ([`channel`] keeps each answer to its
//!     question), and a question whose caller is gone (its notification no longer valid, or,
//!     at an exec event, the process killed) is withdrawn;
//!   - allow (or approved): the supervisor attaches to that thread with `PTRACE_SEIZE`
//!     (`PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL` only: no fork or clone tracing) and lets the
//!     call go on (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). That answer succeeds only while the
//!     caller still waits, and a waiting caller keeps its tid, so when it succeeds the thread
//!     seized is the caller (no separate validity check is needed).
//!     A thread already seized (an earlier exec of it failed, e.g. `execvp` searching `PATH`)
//!     stays seized. If it cannot be seized the exec fails with `EPERM` and the record says why.
//! - At `PTRACE_EVENT_EXEC`, reported after the kernel loaded the new program and before it
//!   runs one instruction, the supervisor decides again on what is now final: the argv from
//!   the new image's stack ([`stack`]; `/proc/PID/cmdline` where that stack is not the ELF
//!   loader's layout), the executed file from `/proc/PID/exe` (or from the notification, where
//!   the path it named names that file for good: see below) and the environment from
//!   `/proc/PID/environ` where a rule needs it; facts equal to the notification's keep its
//!   verdict (the rules are a pure function of them). Allowed: the supervisor
//!   detaches. Denied: the process is killed (SIGKILL) before its first instruction. (After a
//!   non-leader thread's exec the process has the thread group's id; the event message gives
//!   the former one.) While seized, other stops (signal delivery, group-stop) are passed on,
//!   and the exit of a seized thread forgets it.
//! - A thread of the supervisor's process waits at the listener (one per CPU; the others wait
//!   to be called there), answers, and waits for the exec event of the thread it seized itself
//!   ([`pool`] says why).
//! - The listener wakes on the waker's CPU (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`) only while
//!   the machine has CPU time to spare: that saves waking an idle CPU at each hand-over, and
//!   costs a build that keeps every CPU busy ([`wake`] says how much of each).
//! - Every supervising thread asks for the kernel's shortest scheduler slice, which what it
//!   starts does not inherit ([`SUPERVISOR_SLICE_NS`] says why).
//!
//! # Why a race cannot change what runs
//!
//! The check at the notification reads memory the caller shares with other threads (and, for
//! `vfork`/`posix_spawn`, with its parent, or with other processes through `MAP_SHARED`,
//! `memfd` or file mappings): anyone sharing it can rewrite argv after that read and before
//! the kernel copies it, and which tasks share it cannot be known from outside (a `vfork`
//! child shares it with tasks that are not its parent once its parent is gone: [`settled`]).
//! So that check decides denials early, and everything allowed to run is decided at
//! `PTRACE_EVENT_EXEC`, when:
//!
//! - the exec has replaced the memory of the process (a fresh `mm` that no other task shares:
//!   `de_thread` has killed every other thread of the thread group, and a `vfork` parent got
//!   its own memory back), so nobody but the stopped process itself can write its argv, and it
//!   does not run until the supervisor lets it;
//! - no other process can write it either: ptrace, `process_vm_writev` and `pidfd_getfd` are
//!   denied by the command's seccomp filter, and `/proc/PID/mem` cannot be opened for writing
//!   under Landlock (no write right below `/proc`, and without Landlock the mount view has
//!   `/proc` of the sandbox only, and other processes of the sandbox lack the ptrace access a
//!   write needs);
//! - the executed file is the one open as the process's `/proc/PID/exe`, not a path that could
//!   be swapped, and it cannot be written while it runs (`ETXTBSY`); or, without that lookup,
//!   the file of a path that names it for good ([`settled::Settler::fixed_program`]: stable
//!   directories on no proc filesystem, a read-only single-link ELF file of this machine's
//!   kind), where the new stack's `AT_EXECFN`, the kernel's own copy of the path it opened,
//!   is that path ([`tracee::after_exec`]).
//!
//! A decision at the exec event that differs from the one at the notification kills the
//! process: a racing rewrite can only ever end in a dead process, never an allowed one. (A
//! descriptor to `/proc/PID/mem` opened before the exec refers to the old memory, and one's own
//! `/proc/self/mem` does not open for writing under Landlock either.) The same argument, for
//! users, is in `SECURITY.md` ("Command rules at every exec").
//!
//! # Failing closed
//!
//! - With no listener (the supervisor gone), the kernel fails every `SECCOMP_RET_USER_NOTIF`
//!   syscall with `ENOSYS`: no exec runs unsupervised. If the supervisor's process dies, its
//!   parent stops the sandbox (killing the command, saying why), and `EXITKILL` kills every thread it had
//!   seized; it dies with its parent (`PR_SET_PDEATHSIG`, and the PID namespace ends with
//!   init), and the launcher dies with bridle (`PR_SET_PDEATHSIG`).
//! - Nothing inside can take the listener or stop its holder: it is close-on-exec and never in
//!   the command's descriptors after its setup, `pidfd_getfd` is denied, `/proc/PID/fd` of the
//!   supervisor's process (and of init) is out of reach of the Landlock domain (ptrace
//!   access), the domain's signal scope refuses signals to them, and a second listener in the
//!   filter chain is refused by the kernel (`EBUSY`).
//! - An exec whose argv or program the supervisor cannot read at the exec event is killed.
//! - Debuggers and `strace` inside fail: `ptrace` reaches the supervisor too, whose threads
//!   refuse every call that is not an exec at once, without the supervisor's lock (`EPERM`,
//!   "Operation not permitted", as in a sandbox without rules; `ENOSYS` with the supervisor
//!   gone), saying why on the sandbox's stderr (the command's), once per command line.
//! - Records of denials, asks and kills name the process's ancestry, read from
//!   `/proc/PID/status` (`PPid`) and `/proc/PID/cmdline` when the record is made.
//!
//! # Limits
//!
//! What runs without an exec is not seen: a shell's builtins, and a program that implements
//! what a rule names itself (a script speaking git's protocol, a modified copy of git) or
//! loads another program's code without exec. The network policy is the boundary for those.
//! Under `danger-full-access` (no seccomp filter, so no notification, and no PID namespace) the
//! supervisor runs from the launcher and traces the whole tree instead (`PTRACE_SEIZE` of the
//! command with fork, vfork, clone and exec events): each exec is checked at the exec event only
//! (a denied process is killed, not refused), and a process started with `CLONE_UNTRACED`
//! escapes it, so there it is a best effort, not a guarantee.
//! A call escalated to full access from a confined session (the mount-lock filter, a PID
//! namespace, no Landlock) is supervised by notification as above, and its filter adds the
//! denials of ptrace, `process_vm_writev` and `pidfd_getfd`; but without Landlock another
//! process of the same user inside can open `/proc/PID/mem` of one stopped at its exec event
//! for writing, so there too the rules are a best effort: a person approved full access.

mod cargo;
mod channel;
mod config_file;
mod elf;
mod facts;
mod git;
mod git_builtins;
mod git_correct;
mod held;
pub mod identity;
mod node;
mod notify;
mod pool;
pub mod record;
mod remote;
mod reporting;
mod settled;
mod stack;
mod tracee;
mod wake;

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use bridle_policy::rules::{ExecFacts, ExecRules};
use bridle_policy::{DecidedBy, Decision, SandboxSpec, Verdict};
use nix::sys::ptrace::{self, Event, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use channel::Channel;
use facts::{open_program, program_file};
pub(crate) use held::TreeQuestion;
use held::{Held, Then};
pub use identity::{KnownProgram, LOADER};
pub(crate) use pool::serve;
pub use record::{ExecAncestor, ExecObserver, ExecOutcome, ExecRecord, Unobserved};
pub(crate) use reporting::parent_of;
use reporting::status_number;

use crate::sys;
use tracee::ExecRead;

/// The scheduler slice of every supervising thread: the shortest the kernel takes. An exec the
/// supervisor answers wakes a task that, with the default slice, preempted the supervisor on
/// its CPU before it got back to waiting (its answer is the last thing it does): the
/// supervisor then stayed runnable there until the program exited, and the woken program's
/// parent, woken by that exit, was moved to the other CPU, an idle one that had to be woken
/// first. With a short slice the supervisor's deadline comes first: where the woken program
/// still preempts it, the supervisor runs first when the program exits, goes back to waiting
/// at once, and the parent runs on the CPU it was woken on (fork + exec + wait of `/bin/true`:
/// 45 to 70 µs less per exec; `bench/RESULTS.md`). What the thread forks or spawns gets the
/// default slice back.
pub(crate) const SUPERVISOR_SLICE_NS: u64 = 100_000;

/// What the launcher needs to supervise (part of its config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupervisorConfig {
    /// The rules.
    pub rules: ExecRules,
    /// The programs the rules name, resolved when the session started.
    pub programs: Vec<KnownProgram>,
    /// Whether a try of a `PATH` search that names nothing may be answered at its notification
    /// with the kernel's own error ([`settled`]): the command is under Landlock in the
    /// read-only mount view with the confined filter.
    pub settle: bool,
}

impl SupervisorConfig {
    /// The supervisor of `spec`, when it has command rules; resolves the programs they name
    /// now (call it once per session).
    pub fn for_spec(spec: &SandboxSpec) -> Option<SupervisorConfig> {
        let rules = spec.exec_rules.clone()?;
        let mut names = rules.program_names();
        names.extend(
            bridle_policy::rules::interpreter_names()
                .into_iter()
                .map(str::to_owned),
        );
        let names: Vec<String> = names.into_iter().collect();
        let rustup_home = spec
            .env
            .get("RUSTUP_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                spec.env
                    .get("HOME")
                    .map(|h| std::path::Path::new(h).join(".rustup"))
            });
        let programs = identity::resolve(
            &names,
            spec.env.get("PATH").map(String::as_str),
            spec.env.get("GIT_EXEC_PATH").map(String::as_str),
            &rustup_home
                .map(|h| identity::toolchain_dirs(&h))
                .unwrap_or_default(),
        );
        let settle = settles(spec);
        Some(SupervisorConfig {
            rules,
            programs,
            settle,
        })
    }
}

/// Whether `spec` gives what [`settled`] relies on: the read-only mount view (directories that
/// cannot change), which the confined modes have and require with Landlock, and the confined
/// filter (the command cannot mount).
fn settles(spec: &SandboxSpec) -> bool {
    use bridle_policy::{Guarantee, SandboxMode, SeccompProfile};
    let needed = [Guarantee::FsWrite, Guarantee::Proc];
    spec.mode != SandboxMode::DangerFullAccess
        && !spec.protected_kept
        && matches!(
            spec.seccomp,
            SeccompProfile::Confined
                | SeccompProfile::ConfinedNoNetwork
                | SeccompProfile::ConfinedAllowList
        )
        && needed
            .iter()
            .all(|g| spec.guarantees.contains(g) && !spec.accept_missing.contains(g))
}

/// The ptrace options of the whole-tree tracing used where there is no seccomp filter.
fn tree_options() -> Options {
    Options::PTRACE_O_TRACEEXEC
        | Options::PTRACE_O_TRACEFORK
        | Options::PTRACE_O_TRACEVFORK
        | Options::PTRACE_O_TRACECLONE
        | Options::PTRACE_O_EXITKILL
}

/// `text` shortened for a message (one line, at most 300 characters).
pub(crate) fn short(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match line.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line,
    }
}

/// Which check is deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// At the notification: the caller's memory, advisory.
    Before,
    /// At the exec event: final.
    After,
}

/// How execs reach the supervisor.
#[derive(Debug)]
enum Mode {
    /// Seccomp user notification: the listener (see the module docs).
    Notify(OwnedFd),
    /// Under the filter, before the command handed its listener over (or after it closed).
    NoListener,
    /// No seccomp filter: the whole tree is traced.
    Tree,
}

/// The exec supervisor of one sandbox (see the module docs).
#[derive(Debug)]
pub(crate) struct Supervisor {
    rules: ExecRules,
    names_git: bool,
    names_cargo: bool,
    identity: identity::Identity,
    mode: Mode,
    /// The threads traced now, with what their notification found.
    traced: HashMap<i32, Traced>,
    channel: Option<Arc<Channel>>,
    /// Reused by every exec event's read of the new stack.
    scratch: stack::Scratch,
    /// Where a `PATH` try that names nothing may be answered at its notification
    /// ([`settled`]).
    settler: Option<settled::Settler>,
    /// The last exec refused (pid, argv): a shell searching `PATH` tries the same command in
    /// every directory, which is one denial to report, not one per directory.
    last_refused: Option<(i32, Vec<String>)>,
    /// Where a record's ancestry stops (exclusive): the process that runs the sandbox's tree
    /// (init, or the launcher).
    root: i32,
}

/// An exec a person approved: its argv, and the file (device, inode) the question was about.
/// Another file run with the same argv (a path swapped after the question) is asked about again.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Approved {
    argv: Vec<String>,
    file: (u64, u64),
}

impl Approved {
    fn of(argv: &[String], file: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Approved {
            argv: argv.to_vec(),
            file: (file.dev(), file.ino()),
        }
    }
}

/// A thread traced from its notification to its exec event.
#[derive(Debug, Default)]
struct Traced {
    /// What a person approved at its notification: the exec event of the same argv and the
    /// same file does not ask again.
    approved: Option<Approved>,
    /// The facts its notification found and the rules' verdict on them. The rules' verdict is
    /// a function of the facts alone ([`ExecRules::decide`] is pure), so the exec event, which
    /// reads its own facts, needs not decide again when they are equal; unequal facts (a
    /// rewritten argv, another file) are decided afresh. Not kept for opaque facts: there the
    /// decision also reads files ([`Supervisor::decide`]).
    decided: Option<(ExecFacts, Verdict)>,
    /// The program its notification found, where the path names it for good: the exec event
    /// of that path needs not look up `/proc/PID/exe` ([`tracee::after_exec`]).
    fixed: Option<tracee::FixedProgram>,
}

impl Supervisor {
    /// A supervisor for `config`, reporting on `channel` (the socket to bridle).
    pub fn new(config: SupervisorConfig, channel: Option<OwnedFd>) -> Supervisor {
        let channel = channel.and_then(Channel::new).map(Arc::new);
        Supervisor {
            names_git: config.rules.names_git(),
            names_cargo: config.rules.names_cargo(),
            rules: config.rules,
            // Digests are kept only where the mount view is the sandbox's own, fixed one.
            identity: identity::Identity::new(config.programs).keeping_digests(config.settle),
            mode: Mode::NoListener,
            traced: HashMap::new(),
            channel,
            last_refused: None,
            scratch: stack::Scratch::default(),
            settler: config.settle.then(settled::Settler::default),
            root: i32::try_from(std::process::id()).unwrap_or(0),
        }
    }

    /// Without a seccomp filter: traces `command` and everything it starts, which must not run
    /// anything until this returned (it waits on a pipe its parent writes after).
    pub fn attach_tree(&mut self, command: Pid) -> Result<(), String> {
        ptrace::seize(command, tree_options()).map_err(|e| {
            format!(
                "command rules need the exec supervisor, which could not trace the command (ptrace: {e})"
            )
        })?;
        self.mode = Mode::Tree;
        self.traced.insert(command.as_raw(), Traced::default());
        Ok(())
    }

    /// The descriptors of its channel to bridle (kept open by the supervisor's own process).
    pub fn descriptors(&self) -> Vec<std::os::fd::RawFd> {
        self.channel.iter().flat_map(|c| c.descriptors()).collect()
    }

    /// The listener of the command's filter, which the command handed over.
    fn listen(&mut self, listener: OwnedFd) {
        self.mode = Mode::Notify(listener);
    }

    /// A traced task exited or was reaped.
    pub fn forget(&mut self, pid: Pid) {
        self.traced.remove(&pid.as_raw());
    }

    /// Handles one stop of a traced task and lets it go on (or kills it); an exec event that
    /// needs a person's answer is handed back, held, to ask without holding the supervisor
    /// ([`Held::ask`], then [`Supervisor::answered`]).
    fn on_stop(&mut self, status: WaitStatus) -> Option<Box<Held>> {
        match status {
            WaitStatus::PtraceEvent(pid, _, event) if event == Event::PTRACE_EVENT_EXEC as i32 => {
                return self.after_exec(pid);
            }
            WaitStatus::PtraceEvent(pid, _, event)
                if event == Event::PTRACE_EVENT_FORK as i32
                    || event == Event::PTRACE_EVENT_VFORK as i32
                    || event == Event::PTRACE_EVENT_CLONE as i32 =>
            {
                if let Ok(child) = ptrace::getevent(pid).map(|c| i32::try_from(c).unwrap_or(0)) {
                    self.traced.entry(child).or_default();
                }
                resume(pid, None);
            }
            WaitStatus::PtraceEvent(pid, signal, event)
                if event == Event::PTRACE_EVENT_STOP as i32 =>
            {
                // A group-stop (job control): stay stopped but keep reporting; anything else
                // (a new task's first stop) goes on.
                let stopping = matches!(
                    signal,
                    Signal::SIGSTOP | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU
                );
                if !(stopping && sys::ptrace::listen(pid).is_ok()) {
                    resume(pid, None);
                }
            }
            WaitStatus::PtraceEvent(pid, _, _) | WaitStatus::PtraceSyscall(pid) => {
                resume(pid, None);
            }
            // A signal on its way to a tracee: deliver it.
            WaitStatus::Stopped(pid, signal) => resume(pid, Some(signal)),
            WaitStatus::Exited(..)
            | WaitStatus::Signaled(..)
            | WaitStatus::Continued(_)
            | WaitStatus::StillAlive => {}
        }
        None
    }

    /// The exec event: the new program is loaded and has not run. A question is handed back.
    fn after_exec(&mut self, pid: Pid) -> Option<Box<Held>> {
        // The exec may have come from another thread, whose id the process now has. Only a
        // traced thread reports an exec, so with `pid` the only one traced it came from `pid`
        // (no `PTRACE_GETEVENTMSG` needed: one syscall less at nearly every exec).
        let only_this = self.traced.len() == 1 && self.traced.contains_key(&pid.as_raw());
        let former = if only_this {
            pid.as_raw()
        } else {
            ptrace::getevent(pid)
                .ok()
                .and_then(|t| i32::try_from(t).ok())
                .unwrap_or(pid.as_raw())
        };
        let seen = self.traced.remove(&former).unwrap_or_default();
        let mut approved = seen.approved;
        if former != pid.as_raw() {
            approved = approved.or(self.traced.remove(&pid.as_raw()).and_then(|t| t.approved));
        }
        // Tracing the tree, it stays traced; otherwise it is let go once allowed.
        let tree = matches!(self.mode, Mode::Tree);
        if tree {
            self.traced.insert(pid.as_raw(), Traced::default());
        }
        let found =
            tracee::after_exec(pid, &mut self.scratch, seen.fixed.as_ref()).and_then(|after| {
                let interpreters = match after.interpreter {
                    Some(fixed) => fixed.into_iter().collect(),
                    None => tracee::interpreters(pid, &after.file, self.settler.as_mut())?,
                };
                Ok((after.read, after.file, interpreters))
            });
        let (read, file, interpreters) = match found {
            Ok(found) => found,
            Err(tracee::Unreadable(why)) => {
                let verdict = Verdict {
                    decision: Decision::Deny,
                    by: DecidedBy::Default,
                    reason: format!("the exec supervisor could not read what runs: {why}"),
                };
                let read = ExecRead::default();
                let mut record = self.record(pid, &read, &ExecFacts::default(), &verdict);
                record.outcome = ExecOutcome::Killed;
                self.report(record);
                kill(pid);
                return None;
            }
        };
        // A program interpreter other than the dynamic loader is what runs, under the
        // program's name (a static copy of a denied program named by a file's `PT_INTERP`).
        let also: Vec<String> = interpreters
            .iter()
            .flat_map(|i| match &i.opened {
                Some(opened) => self.identity.names_of_file(opened),
                None => self
                    .identity
                    .names_of(&i.file, || open_checked(&i.path, &i.file)),
            })
            .filter(|name| name != LOADER)
            .collect();
        let exe = tracee::proc_path(pid, "exe");
        let facts = self.facts(
            pid,
            &read,
            &file,
            || open_program(exe.as_path()),
            &also,
            Stage::After,
        );
        let verdict = match seen.decided {
            Some((before, verdict)) if before == facts => verdict,
            _ => self.decide(pid, &read, &facts),
        };
        let allowed = match verdict.decision {
            Decision::Allow => true,
            Decision::Ask if approved == Some(Approved::of(&read.argv, &file)) => true,
            Decision::Ask => {
                let record = self.record(pid, &read, &facts, &verdict);
                return Some(Box::new(Held {
                    question: self.question(record),
                    then: Then::ExecEvent { pid, tree },
                }));
            }
            Decision::Deny => {
                let mut record = self.record(pid, &read, &facts, &verdict);
                record.outcome = ExecOutcome::Killed;
                self.report(record);
                false
            }
        };
        // Reported first, so that what the exec's failure makes others print comes after.
        self.let_go(pid, allowed, tree);
        None
    }

    /// Ends the exec event of `pid`: lets it go on (`allowed`; still traced when tracing the
    /// `tree`) or kills it.
    fn let_go(&mut self, pid: Pid, allowed: bool, tree: bool) {
        if !allowed {
            kill(pid);
        } else if tree {
            resume(pid, None);
        } else if ptrace::detach(pid, None).is_err() {
            // Still stopped and traced: let it go on as a tracee (its stops are passed on).
            self.traced.insert(pid.as_raw(), Traced::default());
            resume(pid, None);
        }
    }
}

/// Opens the file at `path` for its content, if it is still the file `file` describes.
fn open_checked(
    path: &std::path::Path,
    file: &std::fs::Metadata,
) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    let opened = open_program(path)?;
    let now = opened.metadata()?;
    if (now.dev(), now.ino()) == (file.dev(), file.ino()) {
        Ok(opened)
    } else {
        Err(std::io::Error::other("replaced since it was mapped"))
    }
}

/// Lets a stopped tracee go on; one that is gone meanwhile needs nothing.
fn resume(pid: Pid, signal: Option<Signal>) {
    let _ = ptrace::cont(pid, signal);
}

/// Kills a stopped tracee before it runs another instruction.
fn kill(pid: Pid) {
    let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
}
