//! The pipeline with the recording file system and spawner: what a remote implementation
//! would see, and that guards, rules and approvals combine as agent.md orders them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bridle_policy::{FsProfileSource, LoadRequest, Overrides, Plan, PlanContext, SandboxMode};

use super::*;
use crate::approvals::{Answerer, ApprovalOutcome, ApprovalRequest};
use crate::backend::{Recorded, RecordingFs, RecordingSpawner};

fn plan(root: &Path, profile: &str, mode: Option<SandboxMode>) -> Plan {
    plan_from(root, profile, mode, None)
}

/// Like [`plan`], for one call escalated from a session in mode `from`.
fn plan_from(
    root: &Path,
    profile: &str,
    mode: Option<SandboxMode>,
    escalated_from: Option<SandboxMode>,
) -> Plan {
    let workspace = root.join("home/project");
    std::fs::create_dir_all(&workspace).unwrap();
    let workspace = std::fs::canonicalize(workspace).unwrap();
    let home = std::fs::canonicalize(root.join("home")).unwrap();
    let policy = bridle_policy::load(
        &FsProfileSource,
        &LoadRequest {
            profile: profile.into(),
            overrides: Overrides {
                mode,
                ..Overrides::default()
            },
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
        temp_dir: root.join("tmp"),
        cache_root: None,
        temp_base: None,
        host_env: [("PATH".to_owned(), "/usr/bin:/bin".to_owned())].into(),
        found: Vec::new(),
        masks: Vec::new(),
        masks_may_vanish: Vec::new(),
        escalated_from,
    };
    bridle_policy::plan(&policy, &ctx).unwrap()
}

/// Approves everything, and keeps the questions it was asked.
#[derive(Default)]
struct Yes {
    asked: Arc<Mutex<Vec<String>>>,
}

impl Answerer for Yes {
    fn answer(&self, request: &ApprovalRequest) -> ApprovalOutcome {
        self.asked.lock().unwrap().push(request.reason.clone());
        ApprovalOutcome::AllowedOnce
    }
}

/// A guard a later plugin registers: it never denies (and cannot allow anything).
struct Lenient(Arc<AtomicUsize>);

impl Guard for Lenient {
    fn name(&self) -> &str {
        "lenient"
    }

    fn check(&self, _call: &DeclaredCall<'_>) -> Option<Denial> {
        self.0.fetch_add(1, Ordering::SeqCst);
        None
    }
}

struct Setup {
    _root: tempfile::TempDir,
    pipeline: Pipeline,
    fs: Arc<RecordingFs>,
    spawner: Arc<RecordingSpawner>,
    asked: Arc<Mutex<Vec<String>>>,
    workspace: std::path::PathBuf,
}

/// Shares a recording backend between the test and the pipeline.
struct Shared<T>(Arc<T>);

impl<T: FileSystem> FileSystem for Shared<T> {
    fn read(
        &self,
        p: &Path,
        l: usize,
    ) -> Result<(Vec<u8>, u64), bridle_sandbox::confined_fs::FsDenied> {
        self.0.read(p, l)
    }
    fn write(
        &self,
        p: &Path,
        c: Vec<u8>,
        h: HardLinks,
    ) -> Result<(), bridle_sandbox::confined_fs::FsDenied> {
        self.0.write(p, c, h)
    }
    fn list_dir(
        &self,
        p: &Path,
    ) -> Result<Vec<(String, bool)>, bridle_sandbox::confined_fs::FsDenied> {
        self.0.list_dir(p)
    }
    fn walk(
        &self,
        b: &Path,
        m: usize,
    ) -> Result<(Vec<(std::path::PathBuf, bool)>, bool), bridle_sandbox::confined_fs::FsDenied>
    {
        self.0.walk(b, m)
    }
    fn confined_by(
        &self,
        spec: &bridle_policy::SandboxSpec,
    ) -> Result<Box<dyn FileSystem>, String> {
        self.0.confined_by(spec)
    }
}

struct SharedSpawner(Arc<RecordingSpawner>);

impl Spawner for SharedSpawner {
    fn run(&self, r: &crate::run::RunRequest) -> Result<crate::run::RunResult, crate::ExecError> {
        self.0.run(r)
    }
    fn start_terminal(
        &self,
        spec: &bridle_policy::SandboxSpec,
        cwd: &Path,
    ) -> Result<crate::terminal::Terminal, String> {
        self.0.start_terminal(spec, cwd)
    }
}

fn setup(profile: &str) -> Setup {
    let root = tempfile::tempdir().unwrap();
    let session = plan(root.path(), profile, None);
    let from = session.spec.mode;
    let workspace = session.spec.workspace.clone();
    let fs = Arc::new(RecordingFs::new());
    let spawner = Arc::new(RecordingSpawner::new(0));
    let yes = Yes::default();
    let asked = Arc::clone(&yes.asked);
    let registry = crate::schemas::registry(crate::schemas::TOOLS, false);
    registry.add_guard(
        None,
        Arc::new(ProtectedPaths::new(&session.spec, vec![], vec![])),
    );
    let root_path = root.path().to_path_buf();
    let profile = profile.to_owned();
    let pipeline = Pipeline::new(
        session.clone(),
        registry,
        Approvals::new(session.approval, Box::new(yes)),
        Box::new(Shared(Arc::clone(&fs))),
        Box::new(SharedSpawner(Arc::clone(&spawner))),
    )
    .with_replan(Box::new(move |mode| {
        Ok(plan_from(&root_path, &profile, Some(mode), Some(from)))
    }));
    Setup {
        _root: root,
        pipeline,
        fs,
        spawner,
        asked,
        workspace,
    }
}

fn notes_of(
    pipeline: &Pipeline,
    tool: &str,
    args: &serde_json::Value,
) -> (ToolResult, Vec<PipelineNote>) {
    let notes = Mutex::new(Vec::new());
    let observer = |n: PipelineNote| -> Result<(), String> {
        notes.lock().unwrap().push(n);
        Ok(())
    };
    let result = pipeline.call_observed(tool, &args.to_string(), Some(&observer));
    (result, notes.into_inner().unwrap())
}

#[test]
fn a_recording_backend_replaces_the_machine_and_nothing_else() {
    let s = setup("workspace-write");
    let file = s.workspace.join("notes.txt");
    let w = s.pipeline.call(
        "write_file",
        &serde_json::json!({"path": "notes.txt", "content": "hi\n"}).to_string(),
    );
    assert!(w.ok, "{w:?}");
    let r = s.pipeline.call(
        "read_file",
        &serde_json::json!({"path": "notes.txt"}).to_string(),
    );
    assert!(r.ok && r.content.contains("hi"), "{r:?}");
    let b = s.pipeline.call(
        "bash",
        &serde_json::json!({"command": "make test"}).to_string(),
    );
    assert!(b.ok, "{b:?}");
    assert_eq!(
        s.fs.calls(),
        vec![
            Recorded::Write(file.clone(), b"hi\n".to_vec()),
            Recorded::Read(file)
        ]
    );
    assert_eq!(
        s.spawner.calls(),
        vec![Recorded::Run(
            vec!["bash".into(), "-c".into(), "make test".into()],
            SandboxMode::WorkspaceWrite
        )]
    );
}

#[test]
fn a_denied_call_reaches_no_backend_and_its_decision_is_recorded_once() {
    let s = setup("workspace-write");
    let (result, notes) = notes_of(
        &s.pipeline,
        "write_file",
        &serde_json::json!({"path": "/etc/passwd", "content": "x"}),
    );
    assert_eq!(result.denied_by, Some(DeniedBy::Policy), "{result:?}");
    assert!(s.fs.calls().is_empty());
    let decided: Vec<_> = notes
        .iter()
        .filter(|n| matches!(n, PipelineNote::Decided { .. }))
        .collect();
    assert_eq!(decided.len(), 1, "{notes:?}");
}

#[test]
fn a_guard_denial_is_final_whatever_the_approval_rules_and_later_plugins_say() {
    let s = setup("workspace-write");
    let later = Arc::new(AtomicUsize::new(0));
    s.pipeline
        .registry()
        .add_guard(Some("later-plugin"), Arc::new(Lenient(Arc::clone(&later))));
    // The mode's rules allow writes in the workspace; the person approves the escalation; a
    // later plugin's guard has no objection: the shipped guard still denies. (A protected path
    // such as `.git/hooks` the escalated plan denies itself, before anyone is asked; other git
    // metadata only the guard keeps.)
    let hook = ".git/info/attributes";
    let args = serde_json::json!({"path": hook, "content": "* filter=evil", "sandbox_permissions": "danger-full-access", "justification": "install the filter"});
    let (result, notes) = notes_of(&s.pipeline, "write_file", &args);
    assert_eq!(result.denied_by, Some(DeniedBy::Guard), "{result:?}");
    assert!(
        result.content.contains(guard::PROTECTED_PATHS),
        "{result:?}"
    );
    // The question said so before the person answered.
    let asked = s.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains("denies this call whatever the answer"),
        "{asked:?}"
    );
    assert!(
        matches!(
            notes.last(),
            Some(PipelineNote::Decided { decision: Decision::Deny, by }) if by.starts_with("guard protected-paths")
        ),
        "{notes:?}"
    );
    assert!(
        !s.fs
            .calls()
            .iter()
            .any(|c| matches!(c, Recorded::Write(..))),
        "{:?}",
        s.fs.calls()
    );
    // Without escalation too: git metadata of any repository is never written by a file tool.
    let nested = serde_json::json!({"path": "vendor/lib/.git/config", "content": "[core]"});
    let (result, _) = notes_of(&s.pipeline, "write_file", &nested);
    assert_eq!(result.denied_by, Some(DeniedBy::Guard), "{result:?}");
    // Unloading the later plugin removes its guard; the shipped one stays.
    s.pipeline.registry().unload("later-plugin");
    assert_eq!(s.pipeline.registry().guards().len(), 1);
    // A call no guard denies passes the later plugin's guard too, which allows nothing itself.
    s.pipeline
        .registry()
        .add_guard(Some("later-plugin"), Arc::new(Lenient(Arc::clone(&later))));
    let ok = s.pipeline.call(
        "write_file",
        &serde_json::json!({"path": "a.txt", "content": ""}).to_string(),
    );
    assert!(ok.ok, "{ok:?}");
    assert_eq!(later.load(Ordering::SeqCst), 1);
}

#[test]
fn an_approved_escalation_runs_under_a_plan_made_anew() {
    let s = setup("read-only");
    let args = serde_json::json!({"command": "make install", "sandbox_permissions": "workspace-write", "justification": "build"});
    let (result, _) = notes_of(&s.pipeline, "bash", &args);
    assert!(result.ok && result.sandbox.escalated, "{result:?}");
    assert_eq!(
        s.spawner.calls(),
        vec![Recorded::Run(
            vec!["bash".into(), "-c".into(), "make install".into()],
            SandboxMode::WorkspaceWrite
        )]
    );
    // The session's own plan did not change.
    assert_eq!(s.pipeline.plan().spec.mode, SandboxMode::ReadOnly);
}

/// What the command line hides from the rules runs in a supervised sandbox (its execs are
/// decided there); escalated to `danger-full-access`, where the supervisor is a best effort,
/// the same text asks, in the one question with the escalation.
#[test]
fn hidden_parts_are_decided_by_the_plan_the_call_runs_under() {
    let s = setup("workstation");
    let plain = serde_json::json!({"command": "source env.sh && make"});
    let (result, _) = notes_of(&s.pipeline, "bash", &plain);
    assert!(result.ok, "{result:?}");
    assert!(s.asked.lock().unwrap().is_empty());
    let full = serde_json::json!({"command": "source env.sh && make", "sandbox_permissions": "danger-full-access", "justification": "install"});
    let (result, _) = notes_of(&s.pipeline, "bash", &full);
    assert!(result.ok, "{result:?}");
    let asked = s.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains("the rules cannot see the file `env.sh` that `source` runs"),
        "{}",
        asked[0]
    );
}

/// Said before the answer: an escalation of a command to `danger-full-access` runs with full
/// access except the protected paths and bridle's session directory, and the question names
/// both; a smaller escalation does not need to.
#[test]
fn a_question_about_a_full_access_command_says_what_it_can_and_cannot_do() {
    let s = setup("read-only");
    let full = serde_json::json!({"command": "make install", "sandbox_permissions": "danger-full-access", "justification": "install"});
    let (result, _) = notes_of(&s.pipeline, "bash", &full);
    assert!(result.ok, "{result:?}");
    let smaller = serde_json::json!({"command": "make", "sandbox_permissions": "workspace-write", "justification": "build"});
    notes_of(&s.pipeline, "bash", &smaller);
    let asked = s.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(
        asked[0].contains("if approved, the command runs with full access")
            && asked[0].contains("the protected paths stay read-only (`")
            && asked[0].contains(".git/hooks")
            && asked[0]
                .contains("session directory and the disks' and memory's device nodes are hidden")
            && !asked[0].contains("note: the guard"),
        "{}",
        asked[0]
    );
    assert!(!asked[1].contains("full access"), "{}", asked[1]);
}

/// A full-access spec that keeps nothing (planned as if the user had chosen the mode) is not
/// what an escalated command may run under: the guard denies it, finally, and the question said
/// so before the answer.
#[test]
fn an_escalated_command_under_a_spec_that_keeps_nothing_is_denied_by_the_guard() {
    let root = tempfile::tempdir().unwrap();
    let session = plan(root.path(), "workspace-write", None);
    let registry = crate::schemas::registry(crate::schemas::TOOLS, false);
    registry.add_guard(
        None,
        Arc::new(ProtectedPaths::new(&session.spec, vec![], vec![])),
    );
    let spawner = Arc::new(RecordingSpawner::new(0));
    let yes = Yes::default();
    let asked = Arc::clone(&yes.asked);
    let root_path = root.path().to_path_buf();
    let pipeline = Pipeline::new(
        session.clone(),
        registry,
        Approvals::new(session.approval, Box::new(yes)),
        Box::new(Shared(Arc::new(RecordingFs::new()))),
        Box::new(SharedSpawner(Arc::clone(&spawner))),
    )
    .with_replan(Box::new(move |mode| {
        Ok(plan(&root_path, "workspace-write", Some(mode)))
    }));
    let full = serde_json::json!({"command": "make install", "sandbox_permissions": "danger-full-access", "justification": "install"});
    let (result, _) = notes_of(&pipeline, "bash", &full);
    assert!(!result.ok, "{result:?}");
    assert_eq!(result.denied_by, Some(DeniedBy::Guard), "{result:?}");
    assert!(spawner.calls().is_empty(), "it ran: {:?}", spawner.calls());
    let asked = asked.lock().unwrap().clone();
    assert!(
        asked[0].contains("denies this call whatever the answer"),
        "{asked:?}"
    );
}

/// Every tool's schema describes exactly what its argument type accepts: each required key is
/// required by the parser, every listed property is accepted, an unlisted one is rejected.
#[test]
fn every_schema_matches_what_its_argument_type_accepts_and_rejects() {
    let s = setup("workspace-write");
    let plan = s.pipeline.plan();
    let sample = |schema: &serde_json::Value| -> serde_json::Value {
        match schema["type"].as_str() {
            Some("string") => match schema["enum"].as_array() {
                Some(values) => values[values.len() - 1].clone(),
                None => serde_json::json!("x"),
            },
            Some("integer") => serde_json::json!(1),
            Some("boolean") => serde_json::json!(false),
            Some("array") => serde_json::json!([1, 2]),
            other => panic!("no sample for {other:?}: {schema}"),
        }
    };
    for tool in s.pipeline.registry().tools() {
        let schema = tool.schema();
        let params = &schema["parameters"];
        let props = params["properties"].as_object().unwrap();
        let required: Vec<&str> = params["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        let parses = |v: &serde_json::Value| match tool.prepare(&v.to_string(), plan) {
            Ok(_) => true,
            Err(e) => {
                !e.contains("unknown field")
                    && !e.contains("missing field")
                    && !e.contains("invalid type")
            }
        };
        let minimal: serde_json::Map<_, _> = required
            .iter()
            .map(|k| ((*k).to_owned(), sample(&props[*k])))
            .collect();
        assert!(
            parses(&serde_json::Value::Object(minimal.clone())),
            "{}: {minimal:?}",
            tool.name()
        );
        for key in &required {
            let mut missing = minimal.clone();
            missing.remove(*key);
            assert!(
                !parses(&serde_json::Value::Object(missing)),
                "{}: `{key}` is required",
                tool.name()
            );
        }
        for (key, prop) in props {
            let mut with = minimal.clone();
            with.insert(key.clone(), sample(prop));
            if key == "sandbox_permissions" {
                with.insert("justification".into(), serde_json::json!("why"));
            }
            assert!(
                parses(&serde_json::Value::Object(with)),
                "{}: `{key}` is listed",
                tool.name()
            );
        }
        let mut unknown = minimal.clone();
        unknown.insert("no_such_argument".into(), serde_json::json!(1));
        assert!(
            !parses(&serde_json::Value::Object(unknown)),
            "{}",
            tool.name()
        );
    }
}

#[test]
fn str_replace_editor_views_creates_replaces_inserts_and_undoes_through_the_pipeline() {
    let s = setup("workspace-write");
    let call = |args: serde_json::Value| s.pipeline.call("str_replace_editor", &args.to_string());
    let created = call(
        serde_json::json!({"command": "create", "path": "a.txt", "file_text": "one\ntwo\nthree\n"}),
    );
    assert!(created.ok, "{created:?}");
    let viewed =
        call(serde_json::json!({"command": "view", "path": "a.txt", "view_range": [2, -1]}));
    assert_eq!(viewed.content, "     2\ttwo\n     3\tthree\n", "{viewed:?}");
    let twice =
        call(serde_json::json!({"command": "create", "path": "b.txt", "file_text": "x x\n"}));
    assert!(twice.ok);
    let ambiguous = call(
        serde_json::json!({"command": "str_replace", "path": "b.txt", "old_str": "x", "new_str": "y"}),
    );
    assert!(
        !ambiguous.ok && ambiguous.content.contains("2 times"),
        "{ambiguous:?}"
    );
    let replaced = call(
        serde_json::json!({"command": "str_replace", "path": "a.txt", "old_str": "two", "new_str": "2"}),
    );
    assert!(replaced.ok, "{replaced:?}");
    let inserted = call(
        serde_json::json!({"command": "insert", "path": "a.txt", "insert_line": 1, "new_str": "one and a half"}),
    );
    assert!(inserted.ok, "{inserted:?}");
    let file = s.workspace.join("a.txt");
    assert_eq!(
        s.fs.content(&file).unwrap(),
        b"one\none and a half\n2\nthree\n"
    );
    let undone = call(serde_json::json!({"command": "undo_edit", "path": "a.txt"}));
    assert!(undone.ok, "{undone:?}");
    assert_eq!(s.fs.content(&file).unwrap(), b"one\n2\nthree\n");
    let listed = call(serde_json::json!({"command": "view", "path": "."}));
    assert!(
        listed.content.contains("a.txt") && listed.content.contains("b.txt"),
        "{listed:?}"
    );
    // The same policy and guard as the other file tools.
    let outside = call(serde_json::json!({"command": "create", "path": "/etc/x", "file_text": ""}));
    assert_eq!(outside.denied_by, Some(DeniedBy::Policy), "{outside:?}");
    let hook = call(
        serde_json::json!({"command": "create", "path": ".git/hooks/post-checkout", "file_text": ""}),
    );
    assert!(
        matches!(hook.denied_by, Some(DeniedBy::Policy | DeniedBy::Guard)),
        "{hook:?}"
    );
    let missing = call(serde_json::json!({"command": "insert", "path": "a.txt", "new_str": "x"}));
    assert!(missing.content.contains("insert_line"), "{missing:?}");
}

#[test]
fn every_tool_refuses_arguments_that_are_not_an_object_naming_itself() {
    let s = setup("workspace-write");
    for tool in s.pipeline.registry().tools() {
        for raw in [r#"["a.txt",null,null]"#, "[]", r#""a.txt""#, "7", "null"] {
            let result = s.pipeline.call(tool.name(), raw);
            assert!(!result.ok, "{}: {raw} was accepted", tool.name());
            assert!(
                result.content.starts_with(&format!(
                    "invalid arguments for `{}`: expected a JSON object of named arguments",
                    tool.name()
                )),
                "{}: {raw}: {}",
                tool.name(),
                result.content
            );
        }
    }
    assert_eq!(
        s.fs.calls().len(),
        0,
        "a refused call touched the file system"
    );
}

#[test]
fn audit_texts_say_what_a_call_does() {
    let s = setup("workspace-write");
    let call = |args: serde_json::Value| s.pipeline.call("str_replace_editor", &args.to_string());
    let first = call(serde_json::json!({"command": "create", "path": "p.txt", "file_text": "old"}));
    assert!(first.content.starts_with("created "), "{first:?}");
    // Creating over an existing file says it replaced it, and what was there.
    let again =
        call(serde_json::json!({"command": "create", "path": "p.txt", "file_text": "new text\n"}));
    assert!(again.ok, "{again:?}");
    assert!(
        again.content.contains("replaced the existing")
            && again.content.contains("3 bytes before, 9 bytes now"),
        "{again:?}"
    );
    // Undoing a creation names a way every preset offers (`minimal` has no `bash`).
    let undo_new = {
        call(serde_json::json!({"command": "undo_edit", "path": "p.txt"}));
        call(serde_json::json!({"command": "undo_edit", "path": "p.txt"}))
    };
    assert!(
        undo_new.content.contains("`rm`") && undo_new.content.contains("`terminal`"),
        "{undo_new:?}"
    );
    let terminal = s.pipeline.registry().tool("terminal").unwrap();
    let plan = s.pipeline.plan();
    let effect = |raw: &str| match terminal.prepare(raw, plan).unwrap().declaration.effects[..] {
        [Effect::Confined(ref text)] => text.clone(),
        ref other => panic!("{other:?}"),
    };
    assert!(effect(r#"{"close": true}"#).starts_with("closing"));
    assert!(effect("{}").starts_with("opening"));
}
