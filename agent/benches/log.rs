//! Session-log scaling (issue 11): builds sessions of realistic shape (runs of file reads with
//! their outputs, model answers and streamed chunks, tool calls with decisions, a request header
//! per resumed run) with the real writer, then measures, each in a fresh process so its peak
//! resident memory is its own: `SessionDir::verify` (what `bridle log verify` does) and
//! `SessionDir::resume` (what `bridle run --resume` loads before its first request).
//!
//! Run: `cargo bench -p bridle-agent --bench log` (sizes 100k and 1M events);
//! `BRIDLE_LOG_BENCH_SIZES=100000 cargo bench -p bridle-agent --bench log` for one size.
//! Each line printed is one measurement: the median of `RUNS` processes and the largest peak
//! resident set (VmHWM) among them. `BRIDLE_LOG_BENCH_KEEP=DIR` builds the sessions in `DIR`
//! and keeps them (to measure another build on the same logs: `log-* --measure verify|resume
//! DIR ID EVENTS` prints milliseconds and peak RSS in KiB); with `BRIDLE_LOG_BENCH_BUILD_ONLY=1`
//! it only builds them. `bench/log_scaling.sh` runs all of it, old build against new.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    missing_docs
)]

use std::path::Path;
use std::time::Instant;

use bridle_agent::log::{
    Backend, Event, NewSession, PromptSection, Reply, RequestHeader, SessionDir, ToolCall, Usage,
};
use bridle_policy::Decision;

/// Processes per measurement.
const RUNS: usize = 3;
/// File reads per run of the agent, as in the session measured on main.
const READS_PER_RUN: usize = 460;
/// Reads the model asks for in one answer.
const READS_PER_STEP: usize = 4;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--measure") {
        measure(
            &args[2],
            Path::new(&args[3]),
            &args[4],
            args[5].parse().unwrap(),
        );
        return;
    }
    let sizes =
        std::env::var("BRIDLE_LOG_BENCH_SIZES").unwrap_or_else(|_| "100000,1000000".to_owned());
    let backend = match std::env::var("BRIDLE_LOG_BENCH_STORE").as_deref() {
        Ok("sqlite") => Backend::Sqlite,
        _ => Backend::Jsonl,
    };
    for size in sizes.split(',').map(|s| s.trim().parse::<u64>().unwrap()) {
        let root = tempfile::tempdir().unwrap();
        let dir_path = match std::env::var_os("BRIDLE_LOG_BENCH_KEEP") {
            Some(keep) => Path::new(&keep).join(size.to_string()),
            None => root.path().join("sessions"),
        };
        let started = Instant::now();
        let (id, events) = build(&dir_path, backend, size);
        let (_, file) = SessionDir::existing(&dir_path)
            .unwrap()
            .locate(&id)
            .unwrap();
        let bytes = std::fs::metadata(&file).unwrap().len();
        println!(
            "log/{}/{events}: session {id}, built in {:.1} s, {:.1} MB on disk",
            backend.name(),
            started.elapsed().as_secs_f64(),
            mb(bytes)
        );
        if std::env::var_os("BRIDLE_LOG_BENCH_BUILD_ONLY").is_some() {
            continue;
        }
        for op in ["verify", "resume"] {
            let mut times = Vec::new();
            let mut peak = 0u64;
            for _ in 0..RUNS {
                let (ms, rss_kb) = child(op, &dir_path, &id, events);
                times.push(ms);
                peak = peak.max(rss_kb);
            }
            times.sort_by(f64::total_cmp);
            println!(
                "log/{}/{events}/{op}: median {:.0} ms (min {:.0}, max {:.0}), peak RSS {:.1} MB",
                backend.name(),
                times[RUNS / 2],
                times[0],
                times[RUNS - 1],
                mb(rss_kb_to_bytes(peak))
            );
        }
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_000_000.0
}

fn rss_kb_to_bytes(kb: u64) -> u64 {
    kb * 1024
}

/// Runs one measurement in a fresh process; returns (milliseconds, peak RSS in KiB).
fn child(op: &str, dir: &Path, id: &str, events: u64) -> (f64, u64) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--measure", op])
        .arg(dir)
        .args([id, &events.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{op}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut fields = text.split_whitespace();
    let ms = fields.next().unwrap().parse().unwrap();
    let rss = fields.next().unwrap().parse().unwrap();
    (ms, rss)
}

/// In the child: the operation, then its time and this process's peak resident set.
fn measure(op: &str, dir: &Path, id: &str, events: u64) {
    let started = Instant::now();
    match op {
        "verify" => {
            let v = SessionDir::existing(dir).unwrap().verify(id).unwrap();
            assert_eq!((v.problem, v.intact), (None, events));
        }
        "resume" => {
            let (log, repairs) = SessionDir::open(dir).unwrap().resume(id).unwrap();
            assert!(repairs.is_empty(), "{repairs:?}");
            assert_eq!(log.next_seq(), events);
            // What the first request of the resumed run needs was derived; the log stays open.
            std::hint::black_box(&log);
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            println!("{ms} {}", peak_rss_kb());
            // Dropping it writes nothing (nothing was appended); not part of the load.
            drop(log);
            return;
        }
        other => panic!("unknown measurement {other}"),
    }
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    println!("{ms} {}", peak_rss_kb());
}

fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A session of about `size` events: runs of the agent (each a turn of `READS_PER_RUN` file
/// reads, `READS_PER_STEP` per step, then an answer), each run after the first as a resume
/// would log it (a new request header). Returns the id and the exact number of events.
fn build(dir: &Path, backend: Backend, size: u64) -> (String, u64) {
    let sessions = SessionDir::open(dir).unwrap();
    let mut log = sessions
        .create(
            backend,
            &NewSession {
                workspace: "/home/user/project".into(),
                profile: "workspace-write".into(),
                policy_digest: "0".repeat(64),
            },
        )
        .unwrap();
    let mut turn = 0u64;
    let mut read = 0usize;
    while log.next_seq() < size {
        log.append(Event::RequestHeader(RequestHeader {
            sections: vec![PromptSection {
                name: "base".into(),
                order: 0,
                text: "You are a coding agent. ".repeat(20),
            }],
            tools: vec![serde_json::json!({"name": "read_file", "parameters": {"type": "object"}})],
            model: format!("openai:model-{turn}"),
        }))
        .unwrap();
        log.append(Event::TurnStart { turn }).unwrap();
        log.append(Event::UserMessage {
            id: None,
            text: format!("run {turn}: read the sources and summarise what each module does"),
        })
        .unwrap();
        let mut step = 0u64;
        for _ in 0..READS_PER_RUN / READS_PER_STEP {
            if log.next_seq() >= size {
                break;
            }
            log.append(Event::StepStart { turn, step }).unwrap();
            let calls: Vec<ToolCall> = (0..READS_PER_STEP)
                .map(|i| ToolCall {
                    call_id: format!("call_{turn}_{step}_{i}"),
                    name: "read_file".into(),
                    arguments: format!("{{\"path\":\"src/module_{}.rs\"}}", read + i),
                })
                .collect();
            log.append(Event::AssistantChunk {
                text: "Reading the next files.".into(),
                reasoning: false,
            })
            .unwrap();
            log.append(Event::AssistantMessage {
                text: "Reading the next files.".into(),
                tool_calls: calls.clone(),
                reasoning: String::new(),
                reply: Some(Reply {
                    model: Some("model".into()),
                    finish: Some("tool_calls".into()),
                    usage: Some(Usage {
                        prompt_tokens: 1000 + step * 600,
                        completion_tokens: 80,
                    }),
                }),
            })
            .unwrap();
            for call in calls {
                log.append(Event::ToolCall(call.clone())).unwrap();
                log.append(Event::ToolDecision {
                    call_id: call.call_id.clone(),
                    decision: Decision::Allow,
                    by: "mode workspace-write allows reads".into(),
                })
                .unwrap();
                log.append(Event::ToolResult {
                    call_id: call.call_id,
                    ok: true,
                    content: file_output(read),
                    sandbox: None,
                })
                .unwrap();
                read += 1;
            }
            log.append(Event::StepEnd { turn, step }).unwrap();
            step += 1;
        }
        log.append(Event::StepStart { turn, step }).unwrap();
        log.append(Event::AssistantMessage {
            text: "Each module does one thing; the summary follows. ".repeat(8),
            tool_calls: Vec::new(),
            reasoning: String::new(),
            reply: None,
        })
        .unwrap();
        log.append(Event::StepEnd { turn, step }).unwrap();
        log.append(Event::TurnEnd {
            turn,
            reason: bridle_agent::log::TurnEndReason::Completed,
            detail: None,
            cancelled_by: None,
        })
        .unwrap();
        turn += 1;
    }
    log.barrier().unwrap();
    (log.id().to_owned(), log.next_seq())
}

/// What `read_file` returns for file `n`: numbered lines, from 10 to 70 of them.
fn file_output(n: usize) -> String {
    let lines = 10 + n * 7 % 61;
    let mut out = String::new();
    for i in 1..=lines {
        out.push_str(&format!(
            "{i:6}\tlet value_{i} = compute(\"module {n}\", {i}); // what line {i} does\n"
        ));
    }
    out
}
