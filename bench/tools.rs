//! Tool-pipeline benchmarks (issue 4): `write_file` + `read_file` of 4 KiB through the full
//! file-tool pipeline (argument parsing, policy decision, approvals seam, the Landlock-confined
//! worker with `openat2`), and the terminal's echo round trip and throughput.
//!
//! Run: `cargo bench --bench tools` (builds the bridle binary the terminal launches).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use bridle_exec::approvals::{Approvals, NoAnswerer};
use bridle_exec::fs_tools::{self, FsContext};
use bridle_exec::terminal::Terminal;
use bridle_policy::{FsProfileSource, LoadRequest, Overrides, PlanContext};
use bridle_sandbox::confined_fs::ConfinedFs;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn plan_for(root: &std::path::Path) -> bridle_policy::Plan {
    let workspace = root.join("home/project");
    std::fs::create_dir_all(&workspace).unwrap();
    let workspace = std::fs::canonicalize(workspace).unwrap();
    let home = std::fs::canonicalize(root.join("home")).unwrap();
    let policy = bridle_policy::load(
        &FsProfileSource,
        &LoadRequest {
            profile: "workspace-write".into(),
            overrides: Overrides::default(),
            workspace_layer: None,
        },
    )
    .unwrap();
    let ctx = PlanContext {
        workspace,
        home: home.clone(),
        state_dir: home.join(".local/state/bridle"),
        config_dir: home.join(".config/bridle"),
        temp_dir: std::path::PathBuf::from("/var/tmp")
            .join(format!("bridle-bench-{}", std::process::id())),
        cache_root: None,
        host_env: [("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned())].into(),
    };
    bridle_policy::plan(&policy, &ctx).unwrap()
}

fn file_tools(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let plan = plan_for(root.path());
    let approvals = Approvals::new(plan.approval, Box::new(NoAnswerer));
    let fs = ConfinedFs::start(&plan.spec).unwrap();
    let ctx = FsContext {
        plan: &plan,
        approvals: &approvals,
        fs: &fs,
        replan: None,
    };
    let content = "x".repeat(4095) + "\n";
    let write = serde_json::json!({"path": "bench.txt", "content": content}).to_string();
    let read = serde_json::json!({"path": "bench.txt"}).to_string();
    let mut group = c.benchmark_group("file_tools");
    group.throughput(Throughput::Bytes(4096));
    group.bench_function("write_file+read_file 4KiB", |b| {
        b.iter(|| {
            let w = fs_tools::write_file(&ctx, &write);
            let r = fs_tools::read_file(&ctx, &read);
            assert!(w.ok && r.ok);
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

criterion_group!(benches, file_tools, terminal);
criterion_main!(benches);
