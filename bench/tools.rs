//! Tool-pipeline benchmarks (issue 4): `write_file` + `read_file` of 4 KiB through the full
//! file-tool pipeline (argument parsing, policy decision, approvals seam, the Landlock-confined
//! worker with `openat2`), and the terminal's echo round trip and throughput. The rule engine
//! (issue 8): `Plan::decide_bash` on a typical command line and on a 4 KiB script, and
//! `Plan::decide_exec` on one argv, under ci-locked.
//!
//! Run: `cargo bench --bench tools` (builds the bridle binary the terminal launches);
//! `cargo bench --bench tools -- "rule engine"` for the rule engine alone.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use bridle_exec::approvals::{Approvals, NoAnswerer};
use bridle_exec::backend::{LocalFs, LocalSpawner};
use bridle_exec::pipeline::Pipeline;
use bridle_exec::terminal::Terminal;
use bridle_policy::{FsProfileSource, LoadRequest, Overrides, PlanContext};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn plan_for(root: &std::path::Path) -> bridle_policy::Plan {
    plan_with(root, "workspace-write")
}

fn plan_with(root: &std::path::Path, profile: &str) -> bridle_policy::Plan {
    let workspace = root.join("home/project");
    std::fs::create_dir_all(&workspace).unwrap();
    let workspace = std::fs::canonicalize(workspace).unwrap();
    let home = std::fs::canonicalize(root.join("home")).unwrap();
    let policy = bridle_policy::load(
        &FsProfileSource,
        &LoadRequest {
            profile: profile.into(),
            overrides: Overrides::default(),
            workspace_layer: None,
        },
    )
    .unwrap();
    let ctx = PlanContext {
        workspace,
        home: home.clone(),
        account_home: None,
        state_dir: home.join(".local/state/bridle"),
        config_dir: home.join(".config/bridle"),
        temp_dir: std::path::PathBuf::from("/var/tmp")
            .join(format!("bridle-bench-{}", std::process::id())),
        cache_root: None,
        temp_base: None,
        host_env: [("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned())].into(),
        found: Vec::new(),
        masks: Vec::new(),
        masks_may_vanish: Vec::new(),
        escalated_from: None,
    };
    bridle_policy::plan(&policy, &ctx).unwrap()
}

fn pipeline(plan: &bridle_policy::Plan) -> Pipeline {
    let launcher = std::path::PathBuf::from(env!("CARGO_BIN_EXE_bridle"));
    Pipeline::new(
        plan.clone(),
        bridle_exec::schemas::registry(bridle_exec::schemas::TOOLS, false),
        Approvals::new(plan.approval, Box::new(NoAnswerer)),
        Box::new(LocalFs::new(&plan.spec)),
        Box::new(LocalSpawner::new(
            launcher.clone(),
            bridle_exec::run::SandboxRunner::new(launcher),
        )),
    )
}

fn file_tools(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let plan = plan_for(root.path());
    let pipeline = pipeline(&plan);
    let content = "x".repeat(4095) + "\n";
    let write = serde_json::json!({"path": "bench.txt", "content": content}).to_string();
    let read = serde_json::json!({"path": "bench.txt"}).to_string();
    let mut group = c.benchmark_group("file_tools");
    group.throughput(Throughput::Bytes(4096));
    group.bench_function("write_file+read_file 4KiB", |b| {
        b.iter(|| {
            let w = pipeline.call("write_file", &write);
            let r = pipeline.call("read_file", &read);
            assert!(w.ok && r.ok);
        })
    });
    group.finish();
}

/// The pipeline's own overhead (issue 11: at most 50 µs): a call the rules deny never reaches
/// the sandbox, so what it costs is parsing, declaring, deciding and recording.
fn denied_call(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let plan = plan_with(root.path(), "ci-locked");
    let pipeline = pipeline(&plan);
    let noted = std::sync::atomic::AtomicUsize::new(0);
    let observer = |_: bridle_exec::approvals::PipelineNote| -> Result<(), String> {
        noted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    };
    let write = serde_json::json!({"path": "/etc/bridle-bench", "content": "x"}).to_string();
    let bash = serde_json::json!({"command": "git push origin main"}).to_string();
    let mut group = c.benchmark_group("pipeline");
    group.bench_function("denied write_file", |b| {
        b.iter(|| {
            let r = pipeline.call_observed("write_file", &write, Some(&observer));
            assert!(!r.ok && r.denied_by.is_some(), "{r:?}");
        })
    });
    group.bench_function("denied bash (rule)", |b| {
        b.iter(|| {
            let r = pipeline.call_observed("bash", &bash, Some(&observer));
            assert!(!r.ok && r.denied_by.is_some(), "{r:?}");
        })
    });
    // A command text never seen before each time: what a first call costs (the parse of a
    // script seen lately on the thread is remembered).
    let mut n = 0u64;
    group.bench_function("denied bash (rule), new text", |b| {
        b.iter(|| {
            n += 1;
            let bash = serde_json::json!({"command": format!("git push origin b{n}")}).to_string();
            let r = pipeline.call_observed("bash", &bash, Some(&observer));
            assert!(!r.ok && r.denied_by.is_some(), "{r:?}");
        })
    });
    group.finish();
}

fn terminal(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let plan = plan_for(root.path());
    let launcher = std::path::PathBuf::from(env!("CARGO_BIN_EXE_bridle"));
    let mut term =
        Terminal::start(&plan.spec, launcher.clone(), &plan.spec.workspace, 40, 200).unwrap();
    c.bench_function("terminal echo round trip", |b| {
        b.iter(|| {
            term.input("echo x\n").unwrap();
            let out = term.read(Duration::from_secs(5), Duration::from_secs(5));
            assert!(out.ends_with("$ "), "{out:?}");
        })
    });
    term.close();

    // Throughput: 50 MB through the pty per sample.
    let mut group = c.benchmark_group("terminal throughput");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(50_000_000));
    let mut term = Terminal::start(&plan.spec, launcher, &plan.spec.workspace, 40, 200).unwrap();
    group.bench_function("50MB through the pty", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                term.input("head -c 50000000 /dev/zero | tr '\\0' a; echo\n")
                    .unwrap();
                let out = term.read(Duration::from_secs(60), Duration::from_secs(60));
                assert!(
                    out.ends_with("$ "),
                    "{}",
                    &out[out.len().saturating_sub(200)..]
                );
            }
            start.elapsed()
        })
    });
    group.finish();
    term.close();
}

/// A script of about 4 KiB in the style of a CI step: functions, loops, conditionals,
/// substitutions, pipelines, a here document and wrappers.
fn four_kib_script() -> String {
    let block = r#"set -euo pipefail
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
for crate in policy sandbox exec agent; do
  if [ -d "$crate" ]; then
    log "testing $crate"
    ( cd "$crate" && timeout 600 cargo test --locked -q 2>&1 | tail -n 20 )
  else
    echo "missing $crate" | tee -a missing.txt
  fi
done
version="$(git describe --tags --always 2>/dev/null || echo dev)"
find . -name '*.rs' -newer Cargo.lock -print0 | xargs -0 -n 50 rustfmt --check
cat > summary.md <<'EOF'
# Summary for $version
EOF
case "${CI:-}" in true) env RUST_LOG=info nice -n 5 ./scripts/report.sh "$version" ;; *) : ;; esac
"#;
    let mut script = String::new();
    while script.len() + block.len() <= 4096 {
        script.push_str(block);
    }
    while script.len() + 24 <= 4096 {
        script.push_str("ls -la target | wc -l\n");
    }
    script.push_str(&"#".repeat(4095 - script.len()));
    script.push('\n');
    script
}

fn rule_engine(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let plan = plan_with(root.path(), "ci-locked");
    let line = "cd exec && cargo test --workspace 2>&1 | tail -20";
    let script = four_kib_script();
    assert_eq!(script.len(), 4096);
    assert_eq!(
        plan.decide_bash(&script).decision,
        bridle_policy::Decision::Allow
    );
    let argv: Vec<String> = ["git", "-C", ".", "push", "origin", "main"]
        .map(String::from)
        .to_vec();
    let mut group = c.benchmark_group("rule engine");
    group.bench_function("decide_bash typical line", |b| {
        b.iter(|| plan.decide_bash(std::hint::black_box(line)))
    });
    group.throughput(Throughput::Bytes(script.len() as u64));
    group.bench_function("decide_bash 4 KiB script", |b| {
        b.iter(|| plan.decide_bash(std::hint::black_box(&script)))
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("decide_exec argv", |b| {
        b.iter(|| plan.decide_exec(std::hint::black_box(&argv)))
    });
    group.finish();
}

criterion_group!(benches, file_tools, denied_call, terminal, rule_engine);
criterion_main!(benches);
