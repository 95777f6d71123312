//! The agent loop's own cost (issue 11): one turn of the scripted model with a tool call per
//! step and a tool that does nothing, so what is measured is the loop — deriving the request,
//! logging, the barrier, naming and scheduling calls — per step. Once on a fresh session and
//! once after 20 000 logged events, to show the cost per step does not grow with the log
//! (the loop derives incrementally). The log lives in /dev/shm, so the fsync of each barrier
//! costs what the page cache costs, not what this machine's disk costs.
//!
//! Run: `cargo bench --bench loop`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use bridle_agent::log::{Backend, Event, NewSession, SessionDir, SessionLog};
use bridle_agent::model::script::ScriptModel;
use bridle_agent::tools::{Notes, ToolHost, ToolNote, ToolOutcome};
use bridle_agent::{Agent, AgentConfig};
use criterion::{Criterion, criterion_group, criterion_main};

const STEPS: usize = 50;

struct Noop;

impl ToolHost for Noop {
    fn schemas(&self) -> Vec<serde_json::Value> {
        vec![serde_json::json!({"name": "noop", "parameters": {"type": "object"}})]
    }

    fn concurrency_safe(&self, _name: &str, _arguments: &str) -> bool {
        false
    }

    fn call(&self, _name: &str, _arguments: &str, note: &mut Notes<'_>) -> ToolOutcome {
        let _ = note(ToolNote::Decided {
            decision: bridle_policy::Decision::Allow,
            by: "bench".into(),
        });
        ToolOutcome {
            ok: true,
            content: "ok".into(),
            sandbox: None,
        }
    }
}

fn script() -> String {
    let mut s = String::new();
    for _ in 0..STEPS - 1 {
        s.push_str("- tool_calls: [{name: noop, arguments: {}}]\n");
    }
    s.push_str("- text: done\n");
    s
}

fn session(dir: &std::path::Path, prefill: usize) -> SessionLog {
    let mut log = SessionDir::open(dir)
        .unwrap()
        .create(
            Backend::Jsonl,
            &NewSession {
                workspace: "/w".into(),
                profile: "p".into(),
                policy_digest: "d".into(),
            },
        )
        .unwrap();
    for i in 0..prefill {
        log.append(Event::ApprovalAsked {
            call_id: format!("old{i}"),
            question: "an earlier question".into(),
        })
        .unwrap();
    }
    log.barrier().unwrap();
    log
}

fn per_step(c: &mut Criterion, name: &str, prefill: usize) {
    let script = script();
    let responses = ScriptModel::parse("bench", &script).unwrap();
    let root = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut log = Some(session(root.path(), prefill));
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let model = ScriptModel::new("script:bench", responses.clone());
                let mut agent = Agent::new(
                    log.take().unwrap(),
                    Box::new(model),
                    &Noop,
                    AgentConfig {
                        max_steps: 100,
                        ..AgentConfig::default()
                    },
                );
                let start = Instant::now();
                let report = agent.run_turn("go").unwrap();
                total += start.elapsed();
                assert_eq!(report.answer, "done");
                log = Some(agent.into_log());
            }
            // Per step: the turn's time divided by its steps.
            total / u32::try_from(STEPS).unwrap()
        })
    });
}

fn loop_overhead(c: &mut Criterion) {
    per_step(c, "loop per step (fresh session)", 0);
    per_step(c, "loop per step (after 20k events)", 20_000);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(5));
    targets = loop_overhead
}
criterion_main!(benches);
