//! The session log conformance suite: every backend must pass every test here. Tampering is
//! done directly on the stored records (as someone editing the file would), never through the
//! log's own API.

#![cfg(test)]

use bridle_agent::log::{
    Backend, Event, INTERRUPTED, NOT_STARTED, NewSession, OUTCOME_UNKNOWN, PolicyRule,
    PolicySummary, PromptSection, Record, Repair, Reply, RequestHeader, SessionDir, ToolCall,
    TurnEndReason, Usage, chain::LogKey,
};
use bridle_policy::{ApprovalPolicy, Decision, Network, SandboxMode};
use pretty_assertions::assert_eq;

fn new_session() -> NewSession {
    NewSession {
        workspace: "/work/project".into(),
        profile: "workspace-write".into(),
        policy_digest: "ab".repeat(32),
    }
}

fn call(id: &str) -> Event {
    Event::ToolCall(ToolCall {
        call_id: id.into(),
        name: "bash".into(),
        arguments: r#"{"command":"ls"}"#.into(),
    })
}

/// A complete turn: user input, one step with one tool call, a final answer.
fn whole_turn(turn: u64) -> Vec<Event> {
    let id = format!("t{turn}-c1");
    vec![
        Event::TurnStart { turn },
        Event::UserMessage {
            id: None,
            text: format!("task {turn}"),
        },
        Event::StepStart { turn, step: 0 },
        Event::AssistantMessage {
            text: String::new(),
            tool_calls: vec![ToolCall {
                call_id: id.clone(),
                name: "bash".into(),
                arguments: r#"{"command":"ls"}"#.into(),
            }],
            reasoning: String::new(),
            reply: None,
        },
        call(&id),
        Event::ToolDecision {
            call_id: id.clone(),
            decision: Decision::Allow,
            by: "mode workspace-write".into(),
        },
        Event::NetDecision(bridle_agent::log::NetDecision {
            call_id: id.clone(),
            host: "crates.io".into(),
            port: 443,
            decision: Decision::Allow,
            by: "`network.allow` entry `crates.io` (profiles/ci-registries.yaml:14:7)".into(),
            error: None,
            connections: 2,
            sent: 1234,
            received: 56789,
            between_calls: false,
        }),
        Event::ToolResult {
            call_id: id,
            ok: true,
            content: "README.md\n".into(),
            sandbox: Some(serde_json::json!({"mode": "workspace-write"})),
        },
        Event::StepEnd { turn, step: 0 },
        Event::StepStart { turn, step: 1 },
        Event::AssistantMessage {
            text: "done".into(),
            tool_calls: vec![],
            reasoning: String::new(),
            reply: None,
        },
        Event::StepEnd { turn, step: 1 },
        Event::TurnEnd {
            turn,
            reason: TurnEndReason::Completed,
            detail: None,
            cancelled_by: None,
        },
    ]
}

/// The stored records of a session, read and written behind the log's back.
fn raw_records(backend: Backend, path: &std::path::Path) -> Vec<Record> {
    match backend {
        Backend::Jsonl => std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        Backend::Sqlite => {
            let conn = rusqlite::Connection::open(path).unwrap();
            let mut q = conn
                .prepare("SELECT seq, time, type, data, ignorable, hash FROM events ORDER BY rowid")
                .unwrap();
            q.query_map([], |row| {
                Ok(Record {
                    seq: u64::try_from(row.get::<_, i64>(0)?).unwrap(),
                    time: row.get(1)?,
                    kind: row.get(2)?,
                    data: serde_json::from_str(&row.get::<_, String>(3)?).unwrap(),
                    ignorable: row.get(4)?,
                    hash: row.get(5)?,
                })
            })
            .unwrap()
            .map(Result::unwrap)
            .collect()
        }
    }
}

fn write_raw(backend: Backend, path: &std::path::Path, records: &[Record]) {
    match backend {
        Backend::Jsonl => {
            let text: String = records
                .iter()
                .map(|r| serde_json::to_string(r).unwrap() + "\n")
                .collect();
            std::fs::write(path, text).unwrap();
        }
        Backend::Sqlite => {
            let conn = rusqlite::Connection::open(path).unwrap();
            // No primary key on the way back in, so the order (and duplicates) can be forged.
            conn.execute_batch(
                "DROP TABLE events;
                 CREATE TABLE events (seq INTEGER, time TEXT, type TEXT, data TEXT,
                                      ignorable INTEGER, hash TEXT);",
            )
            .unwrap();
            for r in records {
                conn.execute(
                    "INSERT INTO events VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    rusqlite::params![
                        i64::try_from(r.seq).unwrap(),
                        r.time,
                        r.kind,
                        r.data.to_string(),
                        r.ignorable,
                        r.hash
                    ],
                )
                .unwrap();
            }
        }
    }
}

/// Recomputes every hash with `key`: what a writer holding the key (a newer bridle) would store.
fn reseal(records: &mut [Record], key: &LogKey, id: &str) {
    let mut prev = key.genesis(id);
    for r in records {
        prev = key.link(&prev, &r.canonical_body());
        r.hash = bridle_agent::log::chain::to_hex(&prev);
    }
}

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: SessionDir,
    backend: Backend,
}

impl Fixture {
    fn new(backend: Backend) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SessionDir::open(&tmp.path().join("sessions")).unwrap();
        Self {
            _tmp: tmp,
            dir,
            backend,
        }
    }

    /// A session with `turns` complete turns; returns its id.
    fn session_with_turns(&self, turns: u64) -> String {
        let mut log = self.dir.create(self.backend, &new_session()).unwrap();
        for turn in 0..turns {
            for event in whole_turn(turn) {
                log.append(event).unwrap();
            }
        }
        log.id().to_owned()
    }

    fn path(&self, id: &str) -> std::path::PathBuf {
        self.dir.locate(id).unwrap().1
    }

    fn tamper(&self, id: &str, f: impl FnOnce(&mut Vec<Record>)) {
        let path = self.path(id);
        let mut records = raw_records(self.backend, &path);
        f(&mut records);
        write_raw(self.backend, &path, &records);
    }

    fn problem(&self, id: &str) -> (u64, String) {
        let v = self.dir.verify(id).unwrap();
        let shown = format!("{v:?}");
        v.problem
            .unwrap_or_else(|| panic!("verify passed: {shown}"))
    }
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod jsonl {
            $(#[test] fn $name() { super::$name(bridle_agent::log::Backend::Jsonl) })*
        }
        mod sqlite {
            $(#[test] fn $name() { super::$name(bridle_agent::log::Backend::Sqlite) })*
        }
    };
}

conformance!(
    a_new_session_starts_with_its_header_and_verifies,
    events_come_back_in_order_after_resume,
    every_event_type_comes_back_as_written,
    events_are_written_at_the_barrier_and_not_before,
    dropping_the_log_writes_what_was_buffered,
    resume_closes_an_open_turn_with_synthetic_results,
    resume_of_a_closed_session_repairs_nothing_and_continues_turn_numbers,
    a_session_open_for_appending_cannot_be_opened_twice,
    an_edited_event_is_detected,
    an_event_removed_from_the_middle_is_detected,
    reordered_events_are_detected,
    an_event_forged_without_the_key_is_detected,
    a_log_copied_under_another_id_is_detected,
    a_tampered_log_cannot_be_resumed,
    unknown_event_types_fail_unless_ignorable,
    fork_copies_the_prefix_and_marks_where_it_came_from,
    fork_inside_a_turn_or_past_the_end_is_refused,
    list_shows_every_session_with_its_status,
    a_second_header_is_refused_when_appending,
    events_cut_from_the_end_are_detected_by_the_head_record,
    a_missing_or_forged_head_record_is_detected,
    stored_bytes_that_differ_from_what_bridle_wrote_are_detected,
    a_new_session_appears_whole_or_not_at_all,
    a_lost_key_is_not_replaced_while_logs_need_it,
    a_compaction_breaking_its_rules_fails_verification_naming_it,
    a_compaction_is_never_appended_where_verification_would_refuse_it,
    a_compacted_session_resumes_and_forks_with_its_window,
);

/// A compaction sealed with the key (as a buggy or newer writer would store it) that breaks a
/// rule of `context/compacted` is refused by verification at its own event, saying which rule.
fn a_compaction_breaking_its_rules_fails_verification_naming_it(backend: Backend) {
    let f = Fixture::new(backend);
    // The fourth case keeps events 0 to 4 (the header, then turn 0 up to the answer listing
    // its call) and compacts while that call has no result.
    let cases: [(usize, u64, &str, &str); 4] = [
        (14, 99, "summary", "not between event 1 and itself"),
        (14, 1, "  ", "empty summary"),
        (14, 0, "summary", "not between event 1 and itself"),
        (5, 1, "summary", "\"t0-c1\" has no result"),
    ];
    for (keep, before, summary, expected) in cases {
        let id = f.session_with_turns(1);
        let key = LogKey::load(f.dir.path()).unwrap();
        f.tamper(&id, |records| {
            assert_eq!(records.len(), 14);
            records.truncate(keep);
            let prev = bridle_agent::log::chain::from_hex(&records.last().unwrap().hash).unwrap();
            records.push(Record::seal(
                &key,
                &prev,
                keep as u64,
                "2026-11-30T00:00:00.000Z".into(),
                &Event::ContextCompacted {
                    before,
                    summary: summary.into(),
                    by: "test".into(),
                },
            ));
        });
        let (seq, what) = f.problem(&id);
        assert_eq!(seq, keep as u64, "{what}");
        assert!(what.contains(expected), "{what}");
        let err = f.dir.resume(&id).unwrap_err().to_string();
        assert!(err.contains(expected), "{err}");
    }
}

/// `SessionLog::compact` (and `append`) check the same rules before anything is written, and
/// the boundary rule verification cannot check: `before` starts a turn or a step.
fn a_compaction_is_never_appended_where_verification_would_refuse_it(backend: Backend) {
    let f = Fixture::new(backend);
    let mut log = f.dir.create(backend, &new_session()).unwrap();
    for event in whole_turn(0) {
        log.append(event).unwrap();
    }
    let next = log.next_seq();
    let result_seq = log
        .events()
        .iter()
        .find(|(_, e)| matches!(e, Event::ToolResult { .. }))
        .unwrap()
        .0;
    let refused = |r: Result<u64, bridle_agent::AgentError>| r.unwrap_err().to_string();
    let err = refused(log.compact(result_seq, "s", "test"));
    assert!(err.contains("starts no turn or step"), "{err}");
    let err = refused(log.compact(next + 1, "s", "test"));
    assert!(err.contains("not between event 1 and itself"), "{err}");
    let err = refused(log.compact(1, "", "test"));
    assert!(err.contains("empty summary"), "{err}");
    assert_eq!(log.next_seq(), next, "nothing was written");
    // At a turn start, and at the end of everything so far: accepted.
    let first = log.compact(1, "turn 0 ran a command", "test").unwrap();
    assert_eq!(first, next);
    // A second compaction must replace the first.
    let err = refused(log.compact(1, "again", "test"));
    assert!(err.contains("compaction at event"), "{err}");
    let err = refused(log.append(Event::ContextCompacted {
        before: 1,
        summary: "again".into(),
        by: "test".into(),
    }));
    assert!(err.contains("compaction at event"), "{err}");
    log.compact(log.next_seq(), "everything", "test").unwrap();
    // A call waiting for its result: refused.
    log.append(Event::TurnStart { turn: 1 }).unwrap();
    log.append(Event::StepStart { turn: 1, step: 0 }).unwrap();
    log.append(Event::AssistantMessage {
        text: String::new(),
        tool_calls: vec![ToolCall {
            call_id: "c9".into(),
            name: "bash".into(),
            arguments: "{}".into(),
        }],
        reasoning: String::new(),
        reply: None,
    })
    .unwrap();
    let err = refused(log.compact(log.next_seq(), "mid-call", "test"));
    assert!(err.contains("\"c9\" has no result"), "{err}");
    let id = log.id().to_owned();
    drop(log);
    assert_eq!(f.dir.verify(&id).unwrap().problem, None);
}

/// A compacted session resumes with the same window, and a fork copies the compaction.
fn a_compacted_session_resumes_and_forks_with_its_window(backend: Backend) {
    let f = Fixture::new(backend);
    let mut log = f.dir.create(backend, &new_session()).unwrap();
    for turn in 0..2 {
        for event in whole_turn(turn) {
            log.append(event).unwrap();
        }
    }
    let second_turn = log
        .events()
        .iter()
        .find(|(_, e)| matches!(e, Event::TurnStart { turn: 1 }))
        .unwrap()
        .0;
    let at = log
        .compact(second_turn, "turn 0 fetched x", "test")
        .unwrap();
    let window: Vec<(u64, Event)> = log.request_window().events.to_vec();
    assert_eq!(window[0].0, second_turn);
    assert_eq!(log.request_window().summary, Some("turn 0 fetched x"));
    let id = log.id().to_owned();
    drop(log);
    let (log, repairs) = f.dir.resume(&id).unwrap();
    assert!(repairs.is_empty());
    assert_eq!(log.latest_compaction(), Some(at));
    assert_eq!(log.request_window().summary, Some("turn 0 fetched x"));
    assert_eq!(log.request_window().events, window.as_slice());
    drop(log);
    let fork = f.dir.fork(&id, None, backend, &new_session()).unwrap();
    assert_eq!(fork.latest_compaction(), Some(at));
    assert_eq!(fork.request_window().events[0].0, second_turn);
}

fn head_path(f: &Fixture, id: &str) -> std::path::PathBuf {
    f.dir.path().join(format!("{id}.head"))
}

fn events_cut_from_the_end_are_detected_by_the_head_record(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(2);
    let total = 1 + 2 * whole_turn(0).len() as u64;
    f.tamper(&id, |records| records.truncate(records.len() - 3));
    let (seq, what) = f.problem(&id);
    assert_eq!(seq, total - 3);
    assert!(what.contains("cut from the end"), "{what}");
    // Resuming would seal the cut into a valid-looking log: refused.
    let err = f.dir.resume(&id).unwrap_err().to_string();
    assert!(err.contains("cut from the end"), "{err}");
}

fn a_missing_or_forged_head_record_is_detected(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(1);
    let head = std::fs::read_to_string(head_path(&f, &id)).unwrap();
    std::fs::remove_file(head_path(&f, &id)).unwrap();
    let (_, what) = f.problem(&id);
    assert!(what.contains("head record is missing"), "{what}");
    // A head claiming fewer events than were written, without the key to seal it.
    let mut forged: serde_json::Value = serde_json::from_str(&head).unwrap();
    forged["seq"] = serde_json::json!(1);
    std::fs::write(head_path(&f, &id), forged.to_string()).unwrap();
    let (_, what) = f.problem(&id);
    assert!(what.contains("head record cannot be trusted"), "{what}");
    // Another session's head does not fit either.
    let other = f.session_with_turns(1);
    std::fs::copy(head_path(&f, &other), head_path(&f, &id)).unwrap();
    let (_, what) = f.problem(&id);
    assert!(what.contains("head record cannot be trusted"), "{what}");
    std::fs::write(head_path(&f, &id), head).unwrap();
    assert_eq!(f.dir.verify(&id).unwrap().problem, None);
}

fn stored_bytes_that_differ_from_what_bridle_wrote_are_detected(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(1);
    let path = f.path(&id);
    match backend {
        Backend::Jsonl => {
            // The decision says "deny" to whoever reads the first key, "allow" to serde.
            let text = std::fs::read_to_string(&path).unwrap();
            let edited = text.replacen(
                r#""decision":"allow""#,
                r#""decision":"deny","decision":"allow""#,
                1,
            );
            assert_ne!(edited, text);
            std::fs::write(&path, &edited).unwrap();
            let (seq, what) = f.problem(&id);
            assert_eq!(seq, 6);
            assert!(what.contains("not what bridle wrote"), "{what}");
            // Equivalent spellings are edits too.
            for (from, to) in [
                ("{\"seq\":3,", "{\"seq\":3.0e0,"),
                ("\"seq\":2,", "\"seq\": 2,"),
            ] {
                let id = f.session_with_turns(1);
                let path = f.path(&id);
                let text = std::fs::read_to_string(&path).unwrap();
                let edited = text.replacen(from, to, 1);
                assert_ne!(edited, text, "{from}");
                std::fs::write(&path, edited).unwrap();
                match f.dir.verify(&id) {
                    Ok(v) => assert!(v.problem.is_some(), "{from} -> {to} verified"),
                    Err(e) => assert!(e.to_string().contains(&id), "{e}"),
                }
            }
        }
        Backend::Sqlite => {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute(
                "UPDATE events SET data = replace(data, '\"decision\":\"allow\"', \
                 '\"decision\":\"deny\",\"decision\":\"allow\"') WHERE seq = 6",
                [],
            )
            .unwrap();
            drop(conn);
            let (seq, what) = f.problem(&id);
            assert_eq!(seq, 6);
            assert!(what.contains("not what bridle wrote"), "{what}");
        }
    }
}

fn a_new_session_appears_whole_or_not_at_all(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(0);
    // Nothing but the log, its head, its lock and the key: no staging files left over.
    let mut names: Vec<String> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut expected = vec![
        format!("{id}.{}", backend.extension()),
        format!("{id}.head"),
        format!("{id}.lock"),
        "log.key".to_owned(),
    ];
    expected.sort();
    assert_eq!(names, expected);
    // A staging file a crash left is not a session.
    std::fs::write(
        f.dir.path().join(".20261130-000000-00000000.jsonl.1-0.new"),
        "",
    )
    .unwrap();
    assert_eq!(f.dir.list().unwrap().len(), 1);
}

fn a_lost_key_is_not_replaced_while_logs_need_it(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(1);
    let key = f.dir.path().join("log.key");
    std::fs::rename(&key, f.dir.path().join("log.key.bak")).unwrap();
    let err = f
        .dir
        .create(backend, &new_session())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("log.key") && err.contains("restore it"),
        "{err}"
    );
    assert!(!key.exists());
    std::fs::rename(f.dir.path().join("log.key.bak"), &key).unwrap();
    assert_eq!(f.dir.verify(&id).unwrap().problem, None);
}

#[test]
fn a_session_directory_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    SessionDir::open(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = SessionDir::open(&dir).unwrap_err().to_string();
    assert!(
        err.contains("others can write") && err.contains("sessions"),
        "{err}"
    );
    let file = tmp.path().join("file");
    std::fs::write(&file, "").unwrap();
    let err = SessionDir::existing(&file).unwrap_err().to_string();
    assert!(err.contains("not a directory"), "{err}");
}

fn a_new_session_starts_with_its_header_and_verifies(backend: Backend) {
    let f = Fixture::new(backend);
    let log = f.dir.create(backend, &new_session()).unwrap();
    let id = log.id().to_owned();
    assert!(
        log.path()
            .ends_with(format!("{id}.{}", backend.extension()))
    );
    drop(log);
    let v = f.dir.verify(&id).unwrap();
    assert_eq!((v.intact, v.problem, v.torn), (1, None, None));
    let records = f.dir.read(&id).unwrap();
    let Some(Event::SessionHeader(h)) = records[0].event().unwrap() else {
        panic!("event 0 is {:?}", records[0].kind);
    };
    assert_eq!(h.id, id);
    assert_eq!(h.workspace, "/work/project");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(f.path(&id)).unwrap().permissions(),
    );
    assert_eq!(mode & 0o077, 0, "logs hold tool output: owner only");
    // Everything beside the log is the owner's only too, the lock included, in a 0700 directory.
    let mode_of = |path: &std::path::Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(path).unwrap().permissions())
            & 0o777
    };
    for name in [format!("{id}.lock"), format!("{id}.head"), "log.key".into()] {
        assert_eq!(mode_of(&f.dir.path().join(&name)), 0o600, "{name}");
    }
    assert_eq!(mode_of(f.dir.path()), 0o700);
}

/// One event of every type this version writes (the header is event 0 of every session), with
/// every optional field set.
fn one_of_each_type() -> Vec<Event> {
    let call = ToolCall {
        call_id: "c1".into(),
        name: "bash".into(),
        arguments: r#"{"command":"curl x","sandbox_permissions":"danger-full-access"}"#.into(),
    };
    vec![
        Event::SessionForked {
            from: "20261130-000000-00000000".into(),
            seq: 4,
        },
        Event::PolicyEffective(PolicySummary {
            digest: "ab".repeat(32),
            profile: "workspace-write".into(),
            mode: SandboxMode::WorkspaceWrite,
            approval: ApprovalPolicy::Ask,
            network: Network::Off,
            writable_roots: vec!["/w".into(), "<session temp dir>".into()],
            protected_paths: vec!["/w/.git/hooks".into()],
            masked_paths: vec!["/home/u/.local/state/bridle/sessions".into()],
            rules: vec![PolicyRule {
                id: "no-push".into(),
                applies_to: "command".into(),
                decision: Decision::Deny,
            }],
        }),
        Event::TurnStart { turn: 0 },
        Event::UserMessage {
            id: Some("q1".into()),
            text: "go".into(),
        },
        Event::StepStart { turn: 0, step: 0 },
        Event::RequestHeader(RequestHeader {
            sections: vec![PromptSection {
                name: "base".into(),
                order: 10,
                text: "Be careful.".into(),
            }],
            tools: vec![serde_json::json!({"name": "bash"})],
            model: "openai:m".into(),
        }),
        Event::AssistantChunk {
            text: "hmm".into(),
            reasoning: true,
        },
        Event::AssistantMessage {
            text: "Fetching.".into(),
            tool_calls: vec![call.clone()],
            reasoning: "hmm".into(),
            reply: Some(Reply {
                model: Some("m-2025-01-01".into()),
                finish: Some("tool_calls".into()),
                usage: Some(Usage {
                    prompt_tokens: 120,
                    completion_tokens: 9,
                }),
            }),
        },
        Event::ToolCall(call),
        Event::ApprovalAsked {
            call_id: "c1".into(),
            question: "allow?".into(),
        },
        Event::ApprovalDecided {
            call_id: "c1".into(),
            answer: "approved".into(),
            by: "the user at the terminal".into(),
        },
        Event::ToolDecision {
            call_id: "c1".into(),
            decision: Decision::Allow,
            by: "approved escalation".into(),
        },
        Event::ExecDecision {
            call_id: "c1".into(),
            exec: bridle_agent::log::ExecDecision {
                pid: 12,
                program: "/usr/bin/git".into(),
                argv: vec!["git".into(), "push".into(), "origin".into(), "main".into()],
                decision: Decision::Deny,
                rule: Some("deny-git-push".into()),
                reason: "pushing is not allowed".into(),
                outcome: "refused".into(),
                same_as: vec![],
                ancestry: vec![
                    "11 sh -c git push origin main".into(),
                    "1 bridle-init".into(),
                ],
                answer: None,
                message: "rule deny-git-push denied exec of /usr/bin/git push origin main (pid 12)"
                    .into(),
                between_calls: false,
            },
        },
        Event::NetDecision(bridle_agent::log::NetDecision {
            call_id: "c1".into(),
            host: "crates.io".into(),
            port: 443,
            decision: Decision::Allow,
            by: "`network.allow` entry `crates.io`".into(),
            error: None,
            connections: 1,
            sent: 10,
            received: 20,
            between_calls: false,
        }),
        Event::SandboxQuarantine {
            call_id: "c1".into(),
            path: "/w/sub/.git/config".into(),
            reason: "core.fsmonitor runs a command".into(),
            moved_to: Some("/w/sub/.git/config.bridle-moved-1".into()),
        },
        Event::ToolResult {
            call_id: "c1".into(),
            ok: false,
            content: "no route".into(),
            sandbox: Some(serde_json::json!({"mode": "danger-full-access", "escalated": true})),
        },
        Event::StepEnd { turn: 0, step: 0 },
        Event::SandboxMode {
            mode: SandboxMode::ReadOnly,
        },
        Event::ApprovalPolicy {
            policy: ApprovalPolicy::Never,
        },
        Event::PlanMode { active: true },
        Event::InputReceived {
            input_id: "input-1".into(),
            kind: "steer".into(),
        },
        Event::InputIncluded {
            input_id: "input-1".into(),
            turn: 0,
            step: 0,
            carried: true,
        },
        Event::TurnEnd {
            turn: 0,
            reason: TurnEndReason::Aborted,
            detail: Some("the turn was cancelled (signal SIGINT)".into()),
            cancelled_by: Some("signal SIGINT".into()),
        },
        Event::InputDropped {
            input_id: "input-2".into(),
            kind: "steer".into(),
            turn: Some(0),
            reason: bridle_agent::log::DropReason::Cancelled,
        },
        Event::ContextCompacted {
            before: 2,
            summary: "The user asked to fetch x; the network was off.".into(),
            by: "threshold".into(),
        },
    ]
}

fn every_event_type_comes_back_as_written(backend: Backend) {
    let events = one_of_each_type();
    let mut kinds: Vec<&str> = std::iter::once("session/header")
        .chain(events.iter().map(Event::kind))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let mut known = bridle_agent::log::KNOWN_KINDS.to_vec();
    known.sort_unstable();
    assert_eq!(kinds, known, "a type is missing from this test");
    let f = Fixture::new(backend);
    let mut log = f.dir.create(backend, &new_session()).unwrap();
    for event in &events {
        log.append(event.clone()).unwrap();
    }
    let id = log.id().to_owned();
    drop(log);
    assert_eq!(f.dir.verify(&id).unwrap().problem, None);
    let back: Vec<Event> = f
        .dir
        .read(&id)
        .unwrap()
        .iter()
        .skip(1)
        .map(|r| r.event().unwrap().unwrap())
        .collect();
    assert_eq!(back, events);
}

fn events_come_back_in_order_after_resume(backend: Backend) {
    let f = Fixture::new(backend);
    let mut log = f.dir.create(backend, &new_session()).unwrap();
    let mut expected = vec![log.events()[0].1.clone()];
    for event in whole_turn(0).into_iter().chain([
        Event::SandboxMode {
            mode: SandboxMode::ReadOnly,
        },
        Event::PlanMode { active: true },
        Event::AssistantChunk {
            text: "thinking".into(),
            reasoning: true,
        },
    ]) {
        expected.push(event.clone());
        log.append(event).unwrap();
    }
    let id = log.id().to_owned();
    drop(log);
    let (log, repairs) = f.dir.resume(&id).unwrap();
    assert_eq!(repairs, vec![]);
    let seqs: Vec<u64> = log.events().iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (0..expected.len() as u64).collect::<Vec<_>>());
    let events: Vec<Event> = log.events().iter().map(|(_, e)| e.clone()).collect();
    assert_eq!(events, expected);
}

fn events_are_written_at_the_barrier_and_not_before(backend: Backend) {
    let f = Fixture::new(backend);
    let mut log = f.dir.create(backend, &new_session()).unwrap();
    let id = log.id().to_owned();
    log.append(Event::TurnStart { turn: 0 }).unwrap();
    log.append(Event::UserMessage {
        id: None,
        text: "hi".into(),
    })
    .unwrap();
    assert_eq!(
        f.dir.verify(&id).unwrap().intact,
        1,
        "buffered events were written"
    );
    log.barrier().unwrap();
    let v = f.dir.verify(&id).unwrap();
    assert_eq!((v.intact, v.problem), (3, None));
}

fn dropping_the_log_writes_what_was_buffered(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(2);
    let v = f.dir.verify(&id).unwrap();
    assert_eq!(
        (v.intact, v.problem),
        (1 + 2 * whole_turn(0).len() as u64, None)
    );
}

fn resume_closes_an_open_turn_with_synthetic_results(backend: Backend) {
    let f = Fixture::new(backend);
    let mut log = f.dir.create(backend, &new_session()).unwrap();
    let listed = |id: &str| ToolCall {
        call_id: id.into(),
        name: "bash".into(),
        arguments: "{}".into(),
    };
    for event in [
        Event::TurnStart { turn: 0 },
        Event::StepStart { turn: 0, step: 0 },
        Event::AssistantMessage {
            text: String::new(),
            tool_calls: vec![
                listed("ran"),
                listed("waiting"),
                listed("denied"),
                listed("never"),
            ],
            reasoning: String::new(),
            reply: None,
        },
        call("ran"),
        Event::ToolDecision {
            call_id: "ran".into(),
            decision: Decision::Allow,
            by: "rule allow-ls".into(),
        },
        call("waiting"),
        call("denied"),
        Event::ToolDecision {
            call_id: "denied".into(),
            decision: Decision::Deny,
            by: "rule deny-push".into(),
        },
    ] {
        log.append(event).unwrap();
    }
    let id = log.id().to_owned();
    // The process dies here: what was recorded is on disk, the turn is open.
    drop(log);
    let (log, repairs) = f.dir.resume(&id).unwrap();
    assert_eq!(
        repairs,
        vec![Repair::TurnClosed {
            turn: 0,
            synthetic: 4
        }]
    );
    let tail: Vec<Event> = log.events()[9..].iter().map(|(_, e)| e.clone()).collect();
    let result = |id: &str, text: &str| Event::ToolResult {
        call_id: id.into(),
        ok: false,
        content: text.into(),
        sandbox: None,
    };
    assert_eq!(
        tail,
        vec![
            result("ran", OUTCOME_UNKNOWN),
            result("waiting", NOT_STARTED),
            result("denied", NOT_STARTED),
            // Listed in the answer, never recorded as a call.
            result("never", NOT_STARTED),
            Event::StepEnd { turn: 0, step: 0 },
            Event::TurnEnd {
                turn: 0,
                reason: TurnEndReason::Interrupted,
                detail: Some(INTERRUPTED.into()),
                cancelled_by: None,
            },
        ]
    );
    assert_eq!(log.progress().next_turn(), 1);
    drop(log);
    // The repair is itself recorded and sealed: a second resume has nothing to do.
    let (_, repairs) = f.dir.resume(&id).unwrap();
    assert_eq!(repairs, vec![]);
    assert_eq!(f.dir.verify(&id).unwrap().problem, None);
}

fn resume_of_a_closed_session_repairs_nothing_and_continues_turn_numbers(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(3);
    let (mut log, repairs) = f.dir.resume(&id).unwrap();
    assert_eq!(repairs, vec![]);
    assert_eq!(log.progress().next_turn(), 3);
    for event in whole_turn(3) {
        log.append(event).unwrap();
    }
    drop(log);
    let summary = f.dir.list().unwrap();
    assert_eq!(summary[0].turns, 4);
    assert_eq!(f.dir.verify(&id).unwrap().problem, None);
}

fn a_session_open_for_appending_cannot_be_opened_twice(backend: Backend) {
    let f = Fixture::new(backend);
    let log = f.dir.create(backend, &new_session()).unwrap();
    let err = f.dir.resume(log.id()).unwrap_err().to_string();
    assert!(err.contains("another bridle process"), "{err}");
    // Reading is fine while it is open.
    assert_eq!(f.dir.verify(log.id()).unwrap().problem, None);
    let id = log.id().to_owned();
    drop(log);
    f.dir.resume(&id).unwrap();
}

fn an_edited_event_is_detected(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(2);
    f.tamper(&id, |records| {
        records[7].data["content"] = serde_json::json!("nothing to see here\n");
    });
    let (seq, what) = f.problem(&id);
    assert_eq!(seq, 7);
    assert!(what.contains("hash does not match"), "{what}");
}

fn an_event_removed_from_the_middle_is_detected(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(2);
    f.tamper(&id, |records| {
        records.remove(5);
    });
    let (seq, what) = f.problem(&id);
    assert_eq!(seq, 5);
    assert!(what.contains("expected event 5, found event 6"), "{what}");
    // Renumbering the rest to hide the gap still breaks the chain.
    let id = f.session_with_turns(2);
    f.tamper(&id, |records| {
        records.remove(5);
        for (i, r) in records.iter_mut().enumerate() {
            r.seq = i as u64;
        }
    });
    assert_eq!(f.problem(&id).0, 5);
}

fn reordered_events_are_detected(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(1);
    f.tamper(&id, |records| {
        records.swap(3, 4);
        let (a, b) = (records[3].seq, records[4].seq);
        records[3].seq = b;
        records[4].seq = a;
    });
    assert_eq!(f.problem(&id).0, 3);
}

fn an_event_forged_without_the_key_is_detected(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(1);
    let other = tempfile::tempdir().unwrap();
    let wrong_key = LogKey::load_or_create(other.path()).unwrap();
    f.tamper(&id, |records| {
        // A complete, well-formed turn/start sealed with another key after the real last hash.
        let prev = bridle_agent::log::chain::from_hex(&records.last().unwrap().hash).unwrap();
        let forged = Record::seal(
            &wrong_key,
            &prev,
            records.len() as u64,
            "2026-11-30T00:00:00.000Z".into(),
            &Event::TurnStart { turn: 1 },
        );
        records.push(forged);
    });
    let (seq, what) = f.problem(&id);
    assert_eq!(seq, whole_turn(0).len() as u64 + 1);
    assert!(what.contains("forged"), "{what}");
}

fn a_log_copied_under_another_id_is_detected(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(1);
    let copy = "20261130-000000-00000000";
    let ext = backend.extension();
    std::fs::copy(f.path(&id), f.dir.path().join(format!("{copy}.{ext}"))).unwrap();
    let (seq, what) = f.problem(copy);
    assert_eq!(seq, 0, "{what}");
}

fn a_tampered_log_cannot_be_resumed(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(1);
    f.tamper(&id, |records| {
        records[2].data["text"] = serde_json::json!("a different task");
    });
    let err = f.dir.resume(&id).unwrap_err().to_string();
    assert!(err.contains("fails verification at event 2"), "{err}");
    assert!(err.contains(&id), "the error names the log: {err}");
    let err = f
        .dir
        .fork(&id, None, backend, &new_session())
        .unwrap_err()
        .to_string();
    assert!(err.contains("fails verification at event 2"), "{err}");
}

fn unknown_event_types_fail_unless_ignorable(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(1);
    let key = LogKey::load(f.dir.path()).unwrap();
    let future = |ignorable: bool| Record {
        seq: 0,
        time: "2026-11-30T00:00:00.000Z".into(),
        kind: "memory/recall".into(),
        data: serde_json::json!({"note": "from a newer bridle"}),
        ignorable,
        hash: String::new(),
    };
    f.tamper(&id, |records| {
        let mut r = future(false);
        r.seq = records.len() as u64;
        records.push(r);
        reseal(records, &key, &id);
    });
    let (seq, what) = f.problem(&id);
    assert!(what.contains("memory/recall"), "{what}");
    let err = f.dir.resume(&id).unwrap_err().to_string();
    assert!(
        err.contains("memory/recall") && err.contains(&seq.to_string()),
        "{err}"
    );

    let id = f.session_with_turns(1);
    f.tamper(&id, |records| {
        let mut r = future(true);
        r.seq = records.len() as u64;
        records.push(r);
        reseal(records, &key, &id);
    });
    assert_eq!(f.dir.verify(&id).unwrap().problem, None);
    let (mut log, _) = f.dir.resume(&id).unwrap();
    // Skipped when read, still counted: the next event follows it.
    assert_eq!(log.next_seq(), 1 + whole_turn(0).len() as u64 + 1);
    log.append(Event::PlanMode { active: false }).unwrap();
    drop(log);
    assert_eq!(f.dir.verify(&id).unwrap().problem, None);
}

fn fork_copies_the_prefix_and_marks_where_it_came_from(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(2);
    let turn_len = whole_turn(0).len() as u64;
    // The end of turn 0.
    let at = turn_len;
    let fork = f.dir.fork(&id, Some(at), backend, &new_session()).unwrap();
    let fork_id = fork.id().to_owned();
    assert_ne!(fork_id, id);
    let events: Vec<Event> = fork.events().iter().map(|(_, e)| e.clone()).collect();
    assert_eq!(events.len() as u64, at + 2);
    let Event::SessionHeader(h) = &events[0] else {
        panic!("{:?}", events[0])
    };
    assert_eq!(h.id, fork_id);
    assert_eq!(
        &events[1..=usize::try_from(at).unwrap()],
        &whole_turn(0)[..]
    );
    assert_eq!(
        events.last(),
        Some(&Event::SessionForked {
            from: id.clone(),
            seq: at
        })
    );
    assert_eq!(fork.progress().next_turn(), 1);
    drop(fork);
    assert_eq!(f.dir.verify(&fork_id).unwrap().problem, None);
    // The source is untouched, and the copied events keep their original times.
    let source = f.dir.read(&id).unwrap();
    assert_eq!(source.len() as u64, 1 + 2 * turn_len);
    let copied = f.dir.read(&fork_id).unwrap();
    assert_eq!(copied[3].time, source[3].time);
    // Without a point: the whole session.
    let whole = f
        .dir
        .fork(&id, None, Backend::Jsonl, &new_session())
        .unwrap();
    assert_eq!(whole.events().len() as u64, 1 + 2 * turn_len + 1);
}

fn fork_inside_a_turn_or_past_the_end_is_refused(backend: Backend) {
    let f = Fixture::new(backend);
    let id = f.session_with_turns(1);
    let err = f
        .dir
        .fork(&id, Some(4), backend, &new_session())
        .unwrap_err()
        .to_string();
    assert!(err.contains("inside turn 0"), "{err}");
    let err = f
        .dir
        .fork(&id, Some(99), backend, &new_session())
        .unwrap_err()
        .to_string();
    assert!(err.contains("events 0 to 13"), "{err}");
    assert_eq!(
        f.dir.list().unwrap().len(),
        1,
        "a refused fork leaves no session"
    );
}

fn list_shows_every_session_with_its_status(backend: Backend) {
    let f = Fixture::new(backend);
    let done = f.session_with_turns(2);
    let fresh = f
        .dir
        .create(backend, &new_session())
        .unwrap()
        .id()
        .to_owned();
    let mut open = f.dir.create(backend, &new_session()).unwrap();
    open.append(Event::TurnStart { turn: 0 }).unwrap();
    let open_id = open.id().to_owned();
    drop(open);
    let broken = f.session_with_turns(1);
    f.tamper(&broken, |records| {
        records[1].data["turn"] = serde_json::json!(7)
    });
    std::fs::write(f.dir.path().join("notes.txt"), "not a session").unwrap();
    let list = f.dir.list().unwrap();
    let status = |id: &str| {
        list.iter()
            .find(|s| s.id == id)
            .map(|s| (s.turns, s.status.clone()))
            .unwrap()
    };
    assert_eq!(list.len(), 4);
    assert_eq!(status(&done), (2, "completed".into()));
    assert_eq!(status(&fresh), (0, "new".into()));
    assert_eq!(status(&open_id), (1, "open".into()));
    let (_, why) = status(&broken);
    assert!(
        why.starts_with("unreadable") && why.contains("event 1"),
        "{why}"
    );
}

fn a_second_header_is_refused_when_appending(backend: Backend) {
    let f = Fixture::new(backend);
    let mut log = f.dir.create(backend, &new_session()).unwrap();
    let header = log.events()[0].1.clone();
    let err = log.append(header).unwrap_err().to_string();
    assert!(err.contains("session/header"), "{err}");
    log.append(Event::TurnStart { turn: 0 }).unwrap();
}

// Backend-specific behaviour.

#[test]
fn jsonl_a_torn_last_line_is_reported_then_set_aside_on_resume() {
    let f = Fixture::new(Backend::Jsonl);
    let id = f.session_with_turns(1);
    let path = f.path(&id);
    let mut bytes = std::fs::read(&path).unwrap();
    let intact = bytes.len();
    bytes.extend_from_slice(br#"{"seq":13,"time":"2026-11-30T0"#);
    std::fs::write(&path, &bytes).unwrap();
    let v = f.dir.verify(&id).unwrap();
    assert_eq!(v.problem, None, "a torn tail is a crash, not tampering");
    assert_eq!(v.torn.as_ref().map(|t| t.offset), Some(intact as u64));
    let (log, repairs) = f.dir.resume(&id).unwrap();
    let Some(Repair::TornTailSetAside { len, saved_to }) = repairs.first() else {
        panic!("{repairs:?}");
    };
    assert_eq!(*len, (bytes.len() - intact) as u64);
    // Nothing is lost: the torn bytes are kept beside the log.
    assert_eq!(std::fs::read(saved_to).unwrap(), &bytes[intact..]);
    assert_eq!(std::fs::read(&path).unwrap().len(), intact);
    drop(log);
    assert_eq!(f.dir.verify(&id).unwrap().torn, None);
}

#[test]
fn jsonl_a_corrupt_line_in_the_middle_is_an_error_naming_the_line() {
    let f = Fixture::new(Backend::Jsonl);
    let id = f.session_with_turns(1);
    let path = f.path(&id);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[4] = "{not json";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let err = f.dir.verify(&id).unwrap_err().to_string();
    assert!(err.contains("line 5") && err.contains(&id), "{err}");
    let err = f.dir.resume(&id).unwrap_err().to_string();
    assert!(err.contains("line 5"), "{err}");
}

#[test]
fn sqlite_a_database_that_is_not_a_bridle_log_is_refused() {
    let f = Fixture::new(Backend::Sqlite);
    let path = f.dir.path().join("20261130-000000-0000abcd.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE t (x INTEGER);").unwrap();
    drop(conn);
    let err = f
        .dir
        .verify("20261130-000000-0000abcd")
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a bridle log"), "{err}");
}

#[test]
fn session_ids_that_could_name_other_files_are_refused() {
    let f = Fixture::new(Backend::Jsonl);
    for id in ["../x", "a/b", "", "x.jsonl", &"a".repeat(65)] {
        let err = f.dir.verify(id).unwrap_err().to_string();
        assert!(err.contains("invalid session id"), "{id}: {err}");
    }
    let err = f
        .dir
        .verify("20261130-000000-ffffffff")
        .unwrap_err()
        .to_string();
    assert!(err.contains("no session"), "{err}");
}
