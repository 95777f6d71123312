//! The supervisor's end of the socket to bridle, shared by its threads.
//!
//! Every message carries an id and bridle answers each one by id, in any order: a thread that
//! waits for a person's answer (an exec held at its notification or its exec event) does not
//! hold the others' reports, nor their execs. One waiting thread at a time reads the socket
//! and hands answers for other ids to their threads.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::record::{Answer, ToBridle};
use crate::sys;

/// How often a thread waiting for an answer looks whether it is still wanted (the process
/// asked about may be gone) and whether the sandbox is being stopped.
const LOOK_AGAIN: Duration = Duration::from_millis(100);

/// The socket to bridle (see [`super::record`]).
#[derive(Debug)]
pub(super) struct Channel {
    writer: Mutex<UnixStream>,
    inbox: Mutex<Inbox>,
    /// Signalled when an answer was read, the reader was put back, or the socket closed.
    arrived: Condvar,
    next_id: AtomicU64,
    descriptors: [RawFd; 2],
}

#[derive(Debug)]
struct Inbox {
    /// The socket's reading end; taken by the thread reading it now.
    reader: Option<BufReader<UnixStream>>,
    /// The ids whose answer a thread waits for, with the answer once read. An answer to an
    /// id nobody waits for any more (a question withdrawn) is dropped.
    waiting: HashMap<u64, Option<bool>>,
    /// The socket closed or failed: no answer comes any more.
    closed: bool,
}

/// How an exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exchanged {
    /// bridle answered (for a question: whether it approved).
    Answered(bool),
    /// The channel is gone, or the sandbox is being stopped.
    Closed,
    /// `wanted` turned false before an answer came; bridle was told (`Withdraw`).
    Withdrawn,
}

/// What one read of the socket found.
enum Read {
    Answer(Answer),
    Nothing,
    Closed,
}

impl Channel {
    /// The channel over `socket`.
    pub(super) fn new(socket: OwnedFd) -> Option<Channel> {
        let writer = UnixStream::from(socket);
        let reader = writer.try_clone().ok()?;
        let descriptors = [writer.as_raw_fd(), reader.as_raw_fd()];
        Some(Channel {
            writer: Mutex::new(writer),
            inbox: Mutex::new(Inbox {
                reader: Some(BufReader::new(reader)),
                waiting: HashMap::new(),
                closed: false,
            }),
            arrived: Condvar::new(),
            next_id: AtomicU64::new(0),
            descriptors,
        })
    }

    /// The descriptors it holds open.
    pub(super) fn descriptors(&self) -> [RawFd; 2] {
        self.descriptors
    }

    /// Sends the message `make` builds with a fresh id and waits for bridle's answer to it,
    /// while `wanted` holds (looked at every [`LOOK_AGAIN`]).
    pub(super) fn exchange(
        &self,
        make: impl FnOnce(u64) -> ToBridle,
        wanted: &dyn Fn() -> bool,
    ) -> Exchanged {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        self.inbox().waiting.insert(id, None);
        if !self.send(&make(id)) {
            self.close();
        }
        let ended = loop {
            // Looked at without the inbox: it may take a syscall.
            let still_wanted = wanted();
            let mut inbox = self.inbox();
            if let Some(Some(answer)) = inbox.waiting.get(&id) {
                break Exchanged::Answered(*answer);
            }
            if inbox.closed || sys::ptrace::termination_pending() {
                break Exchanged::Closed;
            }
            if !still_wanted {
                break Exchanged::Withdrawn;
            }
            let Some(mut reader) = inbox.reader.take() else {
                // Another thread reads: it hands this one its answer, or the reader back.
                drop(
                    self.arrived
                        .wait_timeout(inbox, LOOK_AGAIN)
                        .unwrap_or_else(std::sync::PoisonError::into_inner),
                );
                continue;
            };
            drop(inbox);
            let read = read_one(&mut reader);
            let mut inbox = self.inbox();
            inbox.reader = Some(reader);
            match read {
                Read::Answer(answer) => {
                    if let Some(slot) = inbox.waiting.get_mut(&answer.id) {
                        *slot = Some(answer.approve);
                    }
                    self.arrived.notify_all();
                }
                Read::Nothing => {}
                Read::Closed => {
                    inbox.closed = true;
                    self.arrived.notify_all();
                }
            }
        };
        let others = {
            let mut inbox = self.inbox();
            inbox.waiting.remove(&id);
            !inbox.waiting.is_empty()
        };
        // The reader is back and this thread leaves: another may read now.
        if others {
            self.arrived.notify_all();
        }
        if ended == Exchanged::Withdrawn && !self.send(&ToBridle::Withdraw { id }) {
            self.close();
        }
        ended
    }

    /// Writes one message; false when the socket failed.
    fn send(&self, message: &ToBridle) -> bool {
        let mut text = serde_json::to_string(message).unwrap_or_default();
        text.push('\n');
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .write_all(text.as_bytes())
            .is_ok()
    }

    fn close(&self) {
        self.inbox().closed = true;
        self.arrived.notify_all();
    }

    fn inbox(&self) -> MutexGuard<'_, Inbox> {
        self.inbox
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Reads one answer, waiting at most [`LOOK_AGAIN`] for it to start.
fn read_one(reader: &mut BufReader<UnixStream>) -> Read {
    if reader.buffer().is_empty() {
        let fd = reader.get_ref().as_fd();
        let mut poll = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLIN)];
        let timeout =
            nix::poll::PollTimeout::try_from(LOOK_AGAIN).unwrap_or(nix::poll::PollTimeout::NONE);
        match nix::poll::poll(&mut poll, timeout) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => return Read::Nothing,
            Ok(_) => {}
            Err(_) => return Read::Closed,
        }
    }
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) | Err(_) => Read::Closed,
        Ok(_) => serde_json::from_str::<Answer>(&line).map_or(Read::Nothing, Read::Answer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::ExecOutcome;
    use crate::supervisor::record::tests::record;
    use bridle_policy::Decision;
    use std::io::{BufRead, BufReader};
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::thread::JoinHandle;

    fn ask(id: u64) -> ToBridle {
        ToBridle::Ask {
            id,
            record: record(Decision::Ask, ExecOutcome::Refused),
        }
    }

    fn decided(id: u64) -> ToBridle {
        ToBridle::Decided {
            id,
            record: record(Decision::Deny, ExecOutcome::Refused),
        }
    }

    fn pair() -> (Arc<Channel>, UnixStream) {
        let (ours, theirs) = UnixStream::pair().expect("socket pair");
        (
            Arc::new(Channel::new(OwnedFd::from(ours)).expect("channel")),
            theirs,
        )
    }

    /// A thread exchanging the message `make` builds on `channel`, while `wanted` holds.
    fn exchanging(
        channel: &Arc<Channel>,
        make: fn(u64) -> ToBridle,
        wanted: impl Fn() -> bool + Send + 'static,
    ) -> JoinHandle<Exchanged> {
        let channel = Arc::clone(channel);
        std::thread::spawn(move || channel.exchange(make, &wanted))
    }

    fn id_of(line: &str) -> u64 {
        match serde_json::from_str::<ToBridle>(line).expect("a message") {
            ToBridle::Decided { id, .. } | ToBridle::Ask { id, .. } | ToBridle::Withdraw { id } => {
                id
            }
        }
    }

    #[test]
    fn a_report_is_answered_while_another_thread_waits_for_a_person() {
        let (channel, theirs) = pair();
        let mut lines = BufReader::new(theirs.try_clone().expect("clone")).lines();
        let mut answers = theirs;
        let asking = exchanging(&channel, ask, || true);
        let question = id_of(&lines.next().expect("the question").expect("read"));
        let reporting = exchanging(&channel, decided, || true);
        let report = id_of(&lines.next().expect("the report").expect("read"));
        writeln!(answers, r#"{{"id":{report},"approve":false}}"#).expect("write");
        assert_eq!(
            reporting.join().expect("reporting thread"),
            Exchanged::Answered(false),
            "the report is answered while the question is still open"
        );
        writeln!(answers, r#"{{"id":{question},"approve":true}}"#).expect("write");
        assert_eq!(
            asking.join().expect("asking thread"),
            Exchanged::Answered(true)
        );
    }

    #[test]
    fn a_question_no_longer_wanted_is_withdrawn_and_its_late_answer_dropped() {
        let (channel, theirs) = pair();
        let mut lines = BufReader::new(theirs.try_clone().expect("clone")).lines();
        let mut answers = theirs;
        let gone = Arc::new(AtomicBool::new(false));
        let asking = {
            let gone = Arc::clone(&gone);
            exchanging(&channel, ask, move || !gone.load(Ordering::SeqCst))
        };
        let question = id_of(&lines.next().expect("the question").expect("read"));
        gone.store(true, Ordering::SeqCst);
        assert_eq!(asking.join().expect("asking"), Exchanged::Withdrawn);
        let withdrawal: ToBridle =
            serde_json::from_str(&lines.next().expect("the withdrawal").expect("read"))
                .expect("a message");
        assert_eq!(withdrawal, ToBridle::Withdraw { id: question });
        // The late answer to it goes nowhere, and the next exchange gets its own.
        writeln!(answers, r#"{{"id":{question},"approve":true}}"#).expect("write");
        let next = exchanging(&channel, decided, || true);
        let report = id_of(&lines.next().expect("the report").expect("read"));
        writeln!(answers, r#"{{"id":{report},"approve":false}}"#).expect("write");
        assert_eq!(next.join().expect("next"), Exchanged::Answered(false));
    }

    #[test]
    fn a_closed_socket_ends_every_exchange() {
        let (channel, theirs) = pair();
        drop(theirs);
        assert_eq!(channel.exchange(ask, &|| true), Exchanged::Closed);
    }
}
