//! The subprocess manager: confined jobs from tokio, output read later, graceful and forced
//! cancel of the whole tree, nothing outliving the manager.

use std::time::{Duration, Instant};

use bridle_exec::process::{JobState, ProcessManager, SpawnRequest};

use super::support::{ExecEnv, assert_no_survivor, processes_with, spec_for, token};

fn request(env: &ExecEnv, script: &str) -> SpawnRequest {
    let spec = spec_for(env);
    SpawnRequest {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: env.workspace.clone(),
        spill_dir: spec.temp_dir.clone(),
        spec,
        stdin: Vec::new(),
        output_cap: 4096,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn background_jobs_run_concurrently_and_their_output_is_read_later() {
    let env = ExecEnv::new();
    let manager = ProcessManager::new(env!("CARGO_BIN_EXE_bridle").into());
    runtime().block_on(async {
        let a = manager
            .spawn(request(&env, "echo a-start; sleep 0.3; echo a-end; exit 4"))
            .await
            .unwrap();
        let b = manager
            .spawn(request(&env, "echo b-out; echo b-err >&2; touch from-job"))
            .await
            .unwrap();
        assert_ne!(a, b);
        assert_eq!(manager.wait(b).await, Some(JobState::Exited(0)));
        assert_eq!(manager.wait(a).await, Some(JobState::Exited(4)));
        let out = manager.output(a).unwrap();
        assert!(out.contains("a-start") && out.contains("a-end"), "{out}");
        let out = manager.output(b).unwrap();
        assert!(out.contains("b-out") && out.contains("b-err"), "{out}");
        assert_eq!(manager.jobs().len(), 2);
    });
    assert!(env.workspace.join("from-job").exists());
}

#[test]
fn long_output_is_capped_in_memory_and_spilled_whole() {
    let env = ExecEnv::new();
    let manager = ProcessManager::new(env!("CARGO_BIN_EXE_bridle").into());
    runtime().block_on(async {
        let id = manager.spawn(request(&env, "seq 1 200000")).await.unwrap();
        assert_eq!(manager.wait(id).await, Some(JobState::Exited(0)));
        let out = manager.output(id).unwrap();
        assert!(out.len() < 20_000, "{} bytes kept", out.len());
        assert!(
            out.starts_with("1\n2\n") && out.trim_end().ends_with("200000"),
            "{}",
            &out[..100]
        );
        let spill = out
            .split_whitespace()
            .find(|w| w.ends_with(".out"))
            .expect("spill path named");
        let whole = std::fs::read_to_string(spill).unwrap();
        assert_eq!(whole.lines().count(), 200_000);
    });
}

#[test]
fn graceful_cancel_lets_the_command_clean_up() {
    let env = ExecEnv::new();
    let manager = ProcessManager::new(env!("CARGO_BIN_EXE_bridle").into());
    runtime().block_on(async {
        let id = manager
            .spawn(request(
                &env,
                "trap 'echo got-term; exit 5' TERM; echo ready; sleep 30 & wait",
            ))
            .await
            .unwrap();
        while !manager.output(id).unwrap().contains("ready") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let state = manager.cancel(id, Duration::from_secs(5)).await;
        assert_eq!(
            state,
            Some(JobState::Exited(5)),
            "{}",
            manager.output(id).unwrap()
        );
        assert!(manager.output(id).unwrap().contains("got-term"));
    });
}

#[test]
fn forced_cancel_kills_the_whole_tree_after_the_grace_period() {
    let env = ExecEnv::new();
    let tok = token("cancel");
    let manager = ProcessManager::new(env!("CARGO_BIN_EXE_bridle").into());
    runtime().block_on(async {
        let script = format!("trap '' TERM; setsid sleep 300 & sleep 300; : {tok}");
        let id = manager.spawn(request(&env, &script)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let start = Instant::now();
        let state = manager.cancel(id, Duration::from_millis(300)).await;
        assert!(matches!(state, Some(JobState::Exited(_))), "{state:?}");
        assert!(start.elapsed() < Duration::from_secs(5));
    });
    assert_no_survivor(&tok, "forced cancel");
}

#[test]
fn dropping_the_manager_kills_every_running_tree() {
    let env = ExecEnv::new();
    let tok = token("manager-drop");
    let manager = ProcessManager::new(env!("CARGO_BIN_EXE_bridle").into());
    runtime().block_on(async {
        manager
            .spawn(request(&env, &format!("sleep 300; : {tok}")))
            .await
            .unwrap();
    });
    assert!(!processes_with(&tok).is_empty(), "the job did not start");
    drop(manager);
    let gone =
        super::support::wait_until(Duration::from_secs(5), || processes_with(&tok).is_empty());
    assert!(gone, "a job outlived its manager");
}
