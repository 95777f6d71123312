//! Front-end mapping benchmarks (issue 12): what a committed event costs on its way to a
//! front end, without the transport. An `assistant/chunk` to its `bridle run --json` line, to
//! the JSON-RPC `session/update` notification line `bridle acp` writes, and to the terminal
//! line of `bridle chat`; a `tool/result` of an edit to its ACP update with the diff; and a
//! `session/load` replay of a 10 000-event log.
//!
//! Run: `cargo bench --bench front`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use agent_client_protocol::v1::schema::{SessionId, SessionNotification};
use bridle_agent::front::acp::{AcpUpdates, replay};
use bridle_agent::front::json::json_line;
use bridle_agent::log::{Event, ToolCall};
use criterion::{Criterion, criterion_group, criterion_main};

fn chunk() -> Event {
    Event::AssistantChunk {
        text: "Reading the parser first, then ".into(),
        reasoning: false,
    }
}

fn edit_events() -> Vec<Event> {
    let call = ToolCall {
        call_id: "e1".into(),
        name: "edit_file".into(),
        arguments:
            r#"{"path":"src/parser.rs","old_string":"fn parse(","new_string":"pub fn parse("}"#
                .into(),
    };
    vec![
        Event::ToolCall(call),
        Event::ToolResult {
            call_id: "e1".into(),
            ok: true,
            content: "edited src/parser.rs (1 replacement)".into(),
            sandbox: None,
        },
    ]
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("front");
    let event = chunk();
    group.bench_function("run --json line of a chunk", |b| {
        b.iter(|| json_line(42, &event).unwrap().to_string());
    });
    let mut fold = AcpUpdates::live();
    group.bench_function("acp session/update line of a chunk", |b| {
        b.iter(|| {
            for update in fold.updates(&event) {
                let note = SessionNotification::new(SessionId::new("s"), update);
                let line = serde_json::json!({
                    "jsonrpc": "2.0", "method": "session/update", "params": note,
                });
                std::hint::black_box(line.to_string());
            }
        });
    });
    let edits = edit_events();
    group.bench_function("acp tool_call + diff update of an edit", |b| {
        b.iter(|| {
            let mut fold = AcpUpdates::live();
            for e in &edits {
                for update in fold.updates(e) {
                    std::hint::black_box(serde_json::to_string(&update).unwrap());
                }
            }
        });
    });
    let log: Vec<Event> = (0..10_000)
        .map(|i| match i % 4 {
            0 => chunk(),
            1 => edit_events()[0].clone(),
            2 => edit_events()[1].clone(),
            _ => Event::StepStart { turn: 0, step: i },
        })
        .collect();
    group.sample_size(20);
    group.bench_function("session/load replay of 10k events", |b| {
        b.iter(|| std::hint::black_box(replay(log.iter()).len()));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
