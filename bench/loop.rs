//! The agent loop's own cost (issue 11): one turn of the scripted model with a tool call per
//! step and a tool that does nothing, so what is measured is the loop — deriving the request,
//! logging, the barriers, naming and scheduling calls — per step. On a fresh session and after
//! 20 000 and 100 000 logged events, to show the cost per step does not grow with the log
//! (the loop derives incrementally). The log lives in /dev/shm, so the fsync of each barrier
//! costs what the page cache costs, not what this machine's disk costs; set
//! `BRIDLE_BENCH_LOG_DIR` to a directory on a disk to measure with real syncs (two barriers
//! per step, each an `fdatasync` of the log and one of its head).
//!
//! Criterion gives the wall time per step; on a loaded machine that is mostly waiting to be
//! scheduled (each step hands over to the model's thread and back), so after criterion the
//! bench prints the process's CPU time (user + system, every thread) per step over
//! `CPU_TURNS` turns of each session, which is what the loop itself costs.
//!
//! Run: `cargo bench --bench loop` (the load average is printed before and after);
//! `cargo bench --bench loop -- cpu` for the CPU-time figures alone (no criterion benchmark
//! matches `cpu`); `BRIDLE_BENCH_LOG_DIR=/var/tmp cargo bench --bench loop -- cpu` on disk.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

use std::time::{Duration, Instant};

use bridle_agent::log::{Backend, Event, NewSession, SessionDir, SessionLog};
use bridle_agent::model::script::ScriptModel;
use bridle_agent::tools::{Notes, ToolHost, ToolNote, ToolOutcome};
use bridle_agent::{Agent, AgentConfig};
use criterion::{Criterion, criterion_group};

const STEPS: usize = 50;
/// Turns per session for the CPU-time figures.
const CPU_TURNS: usize = 20;
/// The sessions measured: name and events logged before the first turn.
const SESSIONS: [(&str, usize); 3] = [
    ("fresh session", 0),
    ("after 20k events", 20_000),
    ("after 100k events", 100_000),
];

struct Noop;

impl ToolHost for Noop {
    fn schemas(&self) -> Vec<serde_json::Value> {
        vec![serde_json::json!({"name": "noop", "parameters": {"type": "object"}})]
    }

    fn concurrency_safe(&self, _name: &str, _arguments: &str) -> bool {
        false
    }

    fn call(&self, _call: &bridle_agent::log::ToolCall, note: &mut Notes<'_>) -> ToolOutcome {
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

/// Runs one turn of the script on `log` and hands the log back.
fn turn(
    log: SessionLog,
    responses: &[bridle_agent::model::script::ScriptedResponse],
) -> SessionLog {
    let model = ScriptModel::new("script:bench", responses.to_vec());
    let mut agent = Agent::new(
        log,
        Box::new(model),
        &Noop,
        AgentConfig {
            max_steps: 100,
            ..AgentConfig::default()
        },
    )
    .unwrap();
    let report = agent.run_turn("go").unwrap();
    assert_eq!(report.answer, "done");
    agent.into_log()
}

/// Where the logs are kept: `BRIDLE_BENCH_LOG_DIR`, else /dev/shm.
fn log_dir() -> std::path::PathBuf {
    std::env::var_os("BRIDLE_BENCH_LOG_DIR").map_or_else(|| "/dev/shm".into(), Into::into)
}

/// The load average, as /proc/loadavg says it.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn per_step(c: &mut Criterion, name: &str, prefill: usize) {
    let script = script();
    let responses = ScriptModel::parse("bench", &script).unwrap();
    let root = tempfile::tempdir_in(log_dir()).unwrap();
    let mut log = Some(session(root.path(), prefill));
    c.bench_function(&format!("loop per step ({name})"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                log = Some(turn(log.take().unwrap(), &responses));
                total += start.elapsed();
            }
            // Per step: the turn's time divided by its steps.
            total / u32::try_from(STEPS).unwrap()
        })
    });
}

/// User + system time of this process so far (all threads).
fn cpu_time() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_SELF).unwrap();
    let of = |t: nix::sys::time::TimeVal| {
        Duration::new(
            u64::try_from(t.tv_sec()).unwrap(),
            u32::try_from(t.tv_usec()).unwrap() * 1000,
        )
    };
    of(usage.user_time()) + of(usage.system_time())
}

/// The CPU time per step of each session, median over `CPU_TURNS` turns (with the wall
/// time beside it).
fn cpu_per_step() {
    let responses = ScriptModel::parse("bench", &script()).unwrap();
    println!(
        "CPU per step: logs in {}, load average {}",
        log_dir().display(),
        load()
    );
    for (name, prefill) in SESSIONS {
        let root = tempfile::tempdir_in(log_dir()).unwrap();
        let mut log = session(root.path(), prefill);
        log = turn(log, &responses);
        let mut cpu = Vec::new();
        let mut wall = Vec::new();
        for _ in 0..CPU_TURNS {
            let (c0, w0) = (cpu_time(), Instant::now());
            log = turn(log, &responses);
            cpu.push((cpu_time() - c0) / u32::try_from(STEPS).unwrap());
            wall.push(w0.elapsed() / u32::try_from(STEPS).unwrap());
        }
        cpu.sort();
        wall.sort();
        println!(
            "loop per step ({name}, {} events at the end): CPU median {:.3} ms (min {:.3}, \
             max {:.3}), wall median {:.3} ms",
            log.next_seq(),
            cpu[CPU_TURNS / 2].as_secs_f64() * 1e3,
            cpu[0].as_secs_f64() * 1e3,
            cpu[CPU_TURNS - 1].as_secs_f64() * 1e3,
            wall[CPU_TURNS / 2].as_secs_f64() * 1e3,
        );
    }
    println!("load average after: {}", load());
}

fn loop_overhead(c: &mut Criterion) {
    for (name, prefill) in SESSIONS {
        per_step(c, name, prefill);
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(5));
    targets = loop_overhead
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    cpu_per_step();
}
