//! bridle's end of the supervisor's channel: reading its messages, answering each by id, and
//! handing them to the observer of the run (see the module docs of [`super`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use bridle_policy::Decision;

use super::{Answer, ExecObserver, ExecOutcome, ExecRecord, ToBridle};

/// What the reader thread hands to the thread that waits for the run.
#[derive(Debug)]
pub(crate) enum FromSupervisor {
    /// Signalled (or dropped) once the observer has it.
    Decided(ExecRecord, mpsc::Sender<bool>),
    /// Reply on the sender; dropping it answers "no". The flag turns true when the process
    /// the question is about is gone (the supervisor withdrew it): stop asking.
    Ask(ExecRecord, mpsc::Sender<bool>, Arc<AtomicBool>),
}

/// The answer recorded for a question whose process stopped waiting before anyone answered
/// (killed; or, on kernels without `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`, its exec
/// interrupted by a signal, which it may make again: that is a new question). The supervisor
/// withdrew it; its record says the same.
pub(crate) const GONE: &str = "withdrawn: the process stopped waiting before anyone answered";

/// How long a decision's report may hold the process it is about while nobody observes.
const DELIVERY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads the supervisor's messages from `socket` until it closes, passing each to `deliver`
/// (which returns false once nobody listens any more). A question is answered when its answer
/// comes, on a thread of its own, while the reading goes on (decisions and other questions
/// meanwhile); one that gets none (the waiting side is gone) is answered "no".
pub(crate) fn read_channel(socket: OwnedFd, deliver: impl Fn(FromSupervisor) -> bool) {
    let stream = UnixStream::from(socket);
    let Ok(writer) = stream.try_clone() else {
        return;
    };
    let writer = Arc::new(Mutex::new(writer));
    // The questions not yet answered, each with its withdrawal flag.
    let mut open: HashMap<u64, Arc<AtomicBool>> = HashMap::new();
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<ToBridle>(&line) else {
            tracing::warn!("malformed message from the exec supervisor: {line}");
            continue;
        };
        // A flag only the reader still holds belongs to a question answered.
        open.retain(|_, flag| Arc::strong_count(flag) > 1);
        match message {
            ToBridle::Decided { id, record } => {
                // The process goes on once the observer has printed and recorded the decision,
                // so that the line comes before what the failed exec makes anyone print; a
                // side that does not observe now holds it at most DELIVERY_WAIT. While a
                // question is open the observer is with the person: the decision waits in
                // its queue, and the process (and the supervisor) do not wait for it.
                let (tx, rx) = mpsc::channel();
                if deliver(FromSupervisor::Decided(record, tx)) && open.is_empty() {
                    let _ = rx.recv_timeout(DELIVERY_WAIT);
                }
                if !send_answer(&writer, Answer { id, approve: false }) {
                    break;
                }
            }
            ToBridle::Ask { id, record } => {
                let withdrawn = Arc::new(AtomicBool::new(false));
                let (tx, rx) = mpsc::channel();
                if !deliver(FromSupervisor::Ask(record, tx, Arc::clone(&withdrawn))) {
                    if !send_answer(&writer, Answer { id, approve: false }) {
                        break;
                    }
                    continue;
                }
                open.insert(id, Arc::clone(&withdrawn));
                let answering = Arc::clone(&writer);
                let waited = std::thread::Builder::new()
                    .name("bridle-exec-answer".into())
                    .spawn(move || {
                        let approve = rx.recv() == Ok(true);
                        drop(withdrawn);
                        send_answer(&answering, Answer { id, approve });
                    });
                if waited.is_err() {
                    // No thread to wait on: the question is answered no.
                    open.remove(&id);
                    if !send_answer(&writer, Answer { id, approve: false }) {
                        break;
                    }
                }
            }
            ToBridle::Withdraw { id } => {
                if let Some(flag) = open.remove(&id) {
                    flag.store(true, Ordering::SeqCst);
                }
            }
        }
    }
    // The supervisor is gone: nobody waits for the questions still open.
    for flag in open.values() {
        flag.store(true, Ordering::SeqCst);
    }
}

/// Writes `answer` as one line; false when the socket failed.
fn send_answer(writer: &Mutex<UnixStream>, answer: Answer) -> bool {
    let mut text = serde_json::to_string(&answer).unwrap_or_default();
    text.push('\n');
    writer
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .write_all(text.as_bytes())
        .is_ok()
}

/// Hands one message to `observer`; a question is answered on its sender.
pub(crate) fn observe(
    message: FromSupervisor,
    observer: &mut dyn ExecObserver,
    withdrawn: &dyn Fn() -> bool,
) {
    match message {
        FromSupervisor::Decided(record, delivered) => {
            observer.decided(&record);
            let _ = delivered.send(true);
        }
        FromSupervisor::Ask(record, reply, gone) => {
            let withdrawn = || withdrawn() || gone.load(Ordering::SeqCst);
            let _ = reply.send(observer.approve(&record, &withdrawn));
        }
    }
}

/// Hands a run's messages to its observer, keeping each question answered no until the
/// supervisor reports its decision: a sandbox stopped first (a timeout, a stop) reports
/// nothing more, and [`Observing::settle`] then records those questions itself, so that every
/// question asked has its decision on record.
pub(crate) struct Observing<'o> {
    observer: &'o mut dyn ExecObserver,
    refused: Vec<ExecRecord>,
}

impl<'o> Observing<'o> {
    pub(crate) fn new(observer: &'o mut dyn ExecObserver) -> Observing<'o> {
        Observing {
            observer,
            refused: Vec::new(),
        }
    }

    /// Hands `message` over; `withdrawn` says whether the run is over for its questions.
    pub(crate) fn pass(&mut self, message: FromSupervisor, withdrawn: &dyn Fn() -> bool) {
        match message {
            FromSupervisor::Decided(record, delivered) => {
                if record.decision == Decision::Ask {
                    self.refused
                        .retain(|r| !(r.pid == record.pid && r.argv == record.argv));
                }
                self.observer.decided(&record);
                let _ = delivered.send(true);
            }
            FromSupervisor::Ask(mut record, reply, gone) => {
                let gone = || gone.load(Ordering::SeqCst);
                let over = || withdrawn() || gone();
                // Once the run is over nothing is approved, not even from an earlier answer.
                let yes = !over() && self.observer.approve(&record, &over);
                if !yes {
                    record.outcome = ExecOutcome::Refused;
                    record.answer = Some(if withdrawn() {
                        "withdrawn".to_owned()
                    } else if gone() {
                        GONE.to_owned()
                    } else {
                        "not approved".to_owned()
                    });
                    self.refused.push(record);
                }
                let _ = reply.send(yes);
            }
        }
    }

    /// Records each question answered no whose decision the supervisor never reported; `why`
    /// says how the run ended (`the run timed out`).
    pub(crate) fn settle(self, why: &str) {
        for mut record in self.refused {
            if record.answer.as_deref() == Some("withdrawn") {
                record.answer = Some(format!("withdrawn: {why} before anyone answered"));
            }
            self.observer.decided(&record);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::record::tests::record;
    use crate::supervisor::record::{ExecOutcome, ExecRecord, ToBridle};
    use bridle_policy::Decision;

    /// Records what it is told, approving nothing.
    #[derive(Default)]
    struct Noting(Vec<ExecRecord>);

    impl ExecObserver for Noting {
        fn decided(&mut self, record: &ExecRecord) {
            self.0.push(record.clone());
        }

        fn approve(&mut self, _record: &ExecRecord, _withdrawn: &dyn Fn() -> bool) -> bool {
            false
        }
    }

    /// Every question asked has its decision on record: the supervisor's when it reported it,
    /// else bridle's own when the run ends (a stopped sandbox reports nothing more).
    #[test]
    fn a_question_whose_decision_never_came_is_recorded_when_the_run_ends() {
        let mut noting = Noting::default();
        let mut observing = Observing::new(&mut noting);
        let (tx, _rx) = mpsc::channel();
        let mut answered = record(Decision::Ask, ExecOutcome::Refused);
        let flag = || Arc::new(AtomicBool::new(false));
        observing.pass(
            FromSupervisor::Ask(answered.clone(), tx.clone(), flag()),
            &|| false,
        );
        answered.answer = Some("not approved".into());
        observing.pass(
            FromSupervisor::Decided(answered.clone(), tx.clone()),
            &|| false,
        );
        let mut open = record(Decision::Ask, ExecOutcome::Refused);
        open.pid = 8;
        observing.pass(FromSupervisor::Ask(open, tx.clone(), flag()), &|| true);
        // A question whose process is gone keeps that as its answer.
        let mut gone = record(Decision::Ask, ExecOutcome::Refused);
        gone.pid = 9;
        observing.pass(
            FromSupervisor::Ask(gone, tx, Arc::new(AtomicBool::new(true))),
            &|| false,
        );
        observing.settle("the run timed out");
        let answers: Vec<(i32, Option<&str>)> = noting
            .0
            .iter()
            .map(|r| (r.pid, r.answer.as_deref()))
            .collect();
        assert_eq!(
            answers,
            [
                (7, Some("not approved")),
                (
                    8,
                    Some("withdrawn: the run timed out before anyone answered")
                ),
                (9, Some(GONE)),
            ]
        );
    }

    /// A reader on a socket pair: the supervisor's end (and a writer of it), what the reader
    /// delivers, and its thread.
    fn reading() -> (
        UnixStream,
        UnixStream,
        mpsc::Receiver<FromSupervisor>,
        std::thread::JoinHandle<()>,
    ) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let ours_w = ours.try_clone().unwrap();
        let (delivered_tx, delivered) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            read_channel(OwnedFd::from(theirs), move |message| {
                delivered_tx.send(message).is_ok()
            });
        });
        (ours, ours_w, delivered, reader)
    }

    /// A question still open when the supervisor's end closes (the sandbox torn down) is
    /// withdrawn from whoever asks it.
    #[test]
    fn a_question_open_when_the_supervisor_goes_is_withdrawn() {
        let (ours, mut ours_w, delivered, reader) = reading();
        let mut line = serde_json::to_string(&ToBridle::Ask {
            id: 1,
            record: record(Decision::Ask, ExecOutcome::Refused),
        })
        .unwrap();
        line.push('\n');
        ours_w.write_all(line.as_bytes()).unwrap();
        let FromSupervisor::Ask(_, reply, gone) = delivered.recv().unwrap() else {
            panic!("a question")
        };
        assert!(!gone.load(Ordering::SeqCst));
        drop(ours_w);
        drop(ours);
        reader.join().unwrap();
        assert!(gone.load(Ordering::SeqCst), "the question stays open");
        drop(reply);
    }

    /// The reader answers a decision while a question waits for a person, and a withdrawal
    /// reaches the question's asker.
    #[test]
    fn a_question_open_does_not_hold_other_messages_and_its_withdrawal_reaches_the_asker() {
        let (ours, mut ours_w, delivered, reader) = reading();
        let mut send = |m: ToBridle| {
            let mut line = serde_json::to_string(&m).unwrap();
            line.push('\n');
            ours_w.write_all(line.as_bytes()).unwrap();
        };
        send(ToBridle::Ask {
            id: 1,
            record: record(Decision::Ask, ExecOutcome::Refused),
        });
        let FromSupervisor::Ask(_, reply, gone) = delivered.recv().unwrap() else {
            panic!("a question first")
        };
        send(ToBridle::Decided {
            id: 2,
            record: record(Decision::Deny, ExecOutcome::Refused),
        });
        let FromSupervisor::Decided(_, ack) = delivered.recv().unwrap() else {
            panic!("then the decision")
        };
        // (With a question open the reader does not wait for the observer.)
        let _ = ack.send(true);
        let mut answers = BufReader::new(ours.try_clone().unwrap()).lines();
        let first: Answer = serde_json::from_str(&answers.next().unwrap().unwrap()).unwrap();
        assert_eq!(
            first.id, 2,
            "the decision is answered while the question is open"
        );
        send(ToBridle::Withdraw { id: 1 });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !gone.load(Ordering::SeqCst) {
            assert!(
                std::time::Instant::now() < deadline,
                "the withdrawal never came"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        reply.send(false).unwrap();
        let second: Answer = serde_json::from_str(&answers.next().unwrap().unwrap()).unwrap();
        assert_eq!(
            second,
            Answer {
                id: 1,
                approve: false
            }
        );
        drop(ours_w);
        drop(ours);
        drop(answers);
        reader.join().unwrap();
    }

    #[test]
    fn a_question_nobody_answers_is_a_no() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let mut ours_w = ours.try_clone().unwrap();
        let reader = std::thread::spawn(move || {
            read_channel(OwnedFd::from(theirs), |message| {
                // The waiting side is gone: the reply sender is dropped unanswered.
                drop(message);
                true
            });
        });
        let ask = ToBridle::Ask {
            id: 9,
            record: record(Decision::Ask, ExecOutcome::Refused),
        };
        let mut line = serde_json::to_string(&ask).unwrap();
        line.push('\n');
        ours_w.write_all(line.as_bytes()).unwrap();
        let mut answer = String::new();
        BufReader::new(&ours).read_line(&mut answer).unwrap();
        assert_eq!(
            serde_json::from_str::<Answer>(&answer).unwrap(),
            Answer {
                id: 9,
                approve: false
            }
        );
        drop(ours_w);
        drop(ours);
        reader.join().unwrap();
    }
}
