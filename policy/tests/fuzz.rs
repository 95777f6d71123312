//! Property tests: no input makes the loader, the merger, the planner or the decision functions
//! panic, and what does load keeps the spec's invariants.

#![cfg(test)]

mod support;

use std::path::{Path, PathBuf};

use bridle_policy::{
    Decision, Guarantee, LoadRequest, Policy, SHIPPED, ShippedOnly, SourceFile,
    check_workspace_layer, load, plan,
};
use proptest::prelude::*;

use support::{MemSource, TEMP, ctx, request, shipped};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Everything that can be asked of a loaded policy; none of it may panic.
fn exercise(policy: &Policy) {
    let _ = policy.entries();
    let Ok(plan) = plan(policy, &ctx()) else {
        return;
    };
    let spec = &plan.spec;
    for path in spec
        .readable_roots
        .iter()
        .chain(&spec.writable_roots)
        .chain(&spec.protected_paths)
        .chain(&spec.masked_paths)
    {
        assert!(path.is_absolute(), "{path:?}");
    }
    assert_eq!(spec.env.get("TMPDIR").map(String::as_str), Some(TEMP));
    for g in [Guarantee::Tree, Guarantee::Fd, Guarantee::Env] {
        assert!(spec.guarantees.contains(&g));
    }
    for path in [
        "/home/dev/project/.git/hooks/x",
        "/etc/passwd",
        ".env",
        "/home/dev/.ssh/id_rsa",
    ] {
        let _ = plan.decide_write(Path::new(path));
    }
    for cmd in [
        &["git", "push"][..],
        &["sudo", "env", "X=1"],
        &["env"],
        &["timeout"],
    ] {
        let argv: Vec<String> = cmd.iter().map(|s| (*s).to_owned()).collect();
        let _ = plan.decide_exec(&argv);
    }
}

fn load_bytes(bytes: Vec<u8>) {
    let source = MemSource::new().with("p.yaml", bytes.clone());
    if let Ok(policy) = load(&source, &request("p.yaml")) {
        exercise(&policy);
    }
    let as_workspace = load(
        &ShippedOnly,
        &LoadRequest {
            workspace_layer: Some(SourceFile::from_text("ws.yaml", bytes.clone())),
            ..request("ci-locked")
        },
    );
    if let Ok(policy) = as_workspace {
        exercise(&policy);
    }
    let _ = check_workspace_layer(
        &shipped("workstation"),
        &SourceFile::from_text("ws.yaml", bytes),
    );
}

// --- YAML-ish trees ----------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Node {
    Scalar(String),
    List(Vec<Node>),
    Map(Vec<(String, Node)>),
}

const KEYS: &[&str] = &[
    "description",
    "extends",
    "tested_kernel_abi",
    "mode",
    "approval",
    "network",
    "readable_roots",
    "writable_roots",
    "protected_paths",
    "masked_paths",
    "limits",
    "environment",
    "accept_missing",
    "allow_dangerous_workspace_root",
    "rules",
    "processes",
    "memory",
    "file_size",
    "open_files",
    "cpu_time",
    "wall_time",
    "command_timeout",
    "command_timeout_max",
    "spill_size",
    "inherit",
    "allow",
    "scrub",
    "set",
    "commands",
    "paths",
    "id",
    "prefix",
    "pattern",
    "decision",
    "justification",
    "examples",
    "counter_examples",
    "append",
    "remove",
    "replace",
    "<<",
];

const SCALARS: &[&str] = &[
    "read-only",
    "workspace-write",
    "danger-full-access",
    "ask",
    "never",
    "on",
    "off",
    "allow",
    "deny",
    "true",
    "false",
    "yes",
    "~",
    "null",
    "0",
    "1",
    "-1",
    "512",
    "18446744073709551616",
    "1.5",
    "8GiB",
    "10m",
    "unlimited",
    "~/.ssh",
    "/",
    ".",
    "..",
    "../x",
    "**/.env*",
    "[abc",
    "G-NET",
    "G-FS-PROTECT",
    "G-NOPE",
    "git",
    "git push",
    "ci-locked",
    "workstation",
    "p.yaml",
    "x.yaml",
    "all",
    "allow-list",
    "LC_*",
    "*TOKEN*",
    "",
    "'",
    "\"",
    "&a",
    "*a",
    "!!str",
    "|",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => "[a-z_]{1,12}",
    ]
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(SCALARS).prop_map(str::to_owned),
        1 => any::<String>().prop_map(|s| s.chars().take(20).collect()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
    ]
}

fn tree() -> impl Strategy<Value = Node> {
    scalar()
        .prop_map(Node::Scalar)
        .prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Node::List),
                prop::collection::vec((key(), inner), 0..6).prop_map(Node::Map),
            ]
        })
}

/// A top-level mapping, mostly with real keys.
fn profile_tree() -> impl Strategy<Value = Vec<(String, Node)>> {
    prop::collection::vec((key(), tree()), 0..8)
}

/// Renders a scalar plainly when that is safe-ish, quoted otherwise; sometimes raw on purpose.
fn render_scalar(s: &str, raw: bool) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./~*+".contains(c))
        && !s.starts_with(['*', '-', '.']);
    if raw || plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

fn render_flow(node: &Node, raw: bool) -> String {
    match node {
        Node::Scalar(s) => render_scalar(s, raw),
        Node::List(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|n| render_flow(n, raw))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Node::Map(entries) => format!(
            "{{{}}}",
            entries
                .iter()
                .map(|(k, v)| format!("{}: {}", render_scalar(k, false), render_flow(v, raw)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn render_block(node: &Node, indent: usize, out: &mut String, raw: bool) {
    let pad = " ".repeat(indent);
    match node {
        Node::Map(entries) if !entries.is_empty() => {
            for (k, v) in entries {
                match v {
                    Node::Scalar(_) => {
                        out.push_str(&format!(
                            "{pad}{}: {}\n",
                            render_scalar(k, false),
                            render_flow(v, raw)
                        ));
                    }
                    _ => {
                        out.push_str(&format!("{pad}{}:\n", render_scalar(k, false)));
                        render_block(v, indent + 2, out, raw);
                    }
                }
            }
        }
        Node::List(items) if !items.is_empty() => {
            for item in items {
                match item {
                    Node::Map(_) | Node::List(_) => {
                        out.push_str(&format!("{pad}- {}\n", render_flow(item, raw)));
                    }
                    Node::Scalar(_) => {
                        out.push_str(&format!("{pad}- {}\n", render_flow(item, raw)))
                    }
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", render_flow(other, raw))),
    }
}

fn render(entries: &[(String, Node)], block: bool, raw: bool) -> String {
    let root = Node::Map(entries.to_vec());
    if block {
        let mut out = String::new();
        render_block(&root, 0, &mut out, raw);
        out
    } else {
        render_flow(&root, raw)
    }
}

// --- schema-shaped profiles ----------------------------------------------------------------

fn s(text: &str) -> Node {
    Node::Scalar(text.to_owned())
}

fn pick(items: &'static [&'static str]) -> BoxedStrategy<Node> {
    prop::sample::select(items).prop_map(s).boxed()
}

/// A list value in one of the three list-operation shapes.
fn list_op(item: BoxedStrategy<Node>) -> impl Strategy<Value = Node> {
    let items = prop::collection::vec(item, 0..4);
    prop_oneof![
        3 => items.clone().prop_map(Node::List),
        1 => (items.clone(), items.clone()).prop_map(|(a, r)| Node::Map(vec![
            ("append".into(), Node::List(a)),
            ("remove".into(), Node::List(r)),
        ])),
        1 => items.prop_map(|r| Node::Map(vec![("replace".into(), Node::List(r))])),
    ]
}

const PATHS: &[&str] = &[
    "~/.ssh",
    "~/.aws",
    "~/.cache",
    "/opt/cache",
    "/",
    "~",
    "build",
    ".git/hooks",
    ".git/config",
    ".bridle",
    "/home/dev/project/ci",
    "/tmp/x",
    "target",
    "/home/dev/.config/bridle",
];
const LIMIT_KEYS: &[&str] = &[
    "processes",
    "memory",
    "file_size",
    "open_files",
    "cpu_time",
    "wall_time",
    "command_timeout",
    "command_timeout_max",
    "spill_size",
];
const LIMITS: &[&str] = &[
    "0",
    "1",
    "64",
    "512",
    "8GiB",
    "512MiB",
    "10m",
    "30s",
    "1h",
    "unlimited",
];
const NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "MY_*",
    "*TOKEN*",
    "EDITOR",
    "GITHUB_TOKEN",
    "LC_*",
    "X",
];
const GUARANTEES: &[&str] = &[
    "G-FS-WRITE",
    "G-FS-PROTECT",
    "G-FS-MASK",
    "G-NET",
    "G-IPC",
    "G-RES",
];
const DECISIONS: &[&str] = &["allow", "ask", "deny"];
const WORDS: &[&str] = &[
    "git", "push", "sudo", "curl", "make", "npm", "publish", "rm",
];
const IDS: &[&str] = &[
    "deny-sudo",
    "ask-git-push",
    "deny-git-push",
    "r1",
    "r2",
    "ask-env-files",
];
const GLOBS: &[&str] = &[
    "**/.env*",
    "src/**",
    "/etc/**",
    "*.lock",
    "db/migrations/**",
    ".git/**",
];

fn field(name: &'static str) -> impl Strategy<Value = (String, Node)> {
    let value: BoxedStrategy<Node> = match name {
        "mode" => pick(&["read-only", "workspace-write", "danger-full-access"]).boxed(),
        "approval" => pick(&["ask", "never"]).boxed(),
        "network" => pick(&["on", "off"]).boxed(),
        "allow_dangerous_workspace_root" => pick(&["true", "false"]).boxed(),
        "accept_missing" => list_op(pick(GUARANTEES)).boxed(),
        "limits" => prop::sample::subsequence(LIMIT_KEYS, 0..4)
            .prop_flat_map(|keys| {
                keys.into_iter()
                    .map(|k| pick(LIMITS).prop_map(move |v| (k.to_owned(), v)))
                    .collect::<Vec<_>>()
            })
            .prop_map(Node::Map)
            .boxed(),
        "environment" => (
            pick(&["all", "allow-list"]),
            list_op(pick(NAMES)),
            list_op(pick(NAMES)),
            prop::collection::vec(("[A-Z]{1,3}", pick(PATHS)), 0..2),
            0u8..16,
        )
            .prop_map(|(inherit, allow, scrub, set, mask)| {
                let all = [
                    ("inherit", inherit),
                    ("allow", allow),
                    ("scrub", scrub),
                    ("set", Node::Map(set)),
                ];
                Node::Map(
                    all.into_iter()
                        .enumerate()
                        .filter(|(i, _)| mask & (1 << i) != 0)
                        .map(|(_, (k, v))| (k.to_owned(), v))
                        .collect(),
                )
            })
            .boxed(),
        "rules" => {
            let command = (
                pick(IDS),
                prop::collection::vec(pick(WORDS), 1..3),
                pick(DECISIONS),
            )
                .prop_map(|(id, prefix, decision)| {
                    Node::Map(vec![
                        ("id".into(), id),
                        ("prefix".into(), Node::List(prefix)),
                        ("decision".into(), decision),
                    ])
                })
                .boxed();
            let path = (pick(IDS), pick(GLOBS), pick(DECISIONS))
                .prop_map(|(id, pattern, decision)| {
                    Node::Map(vec![
                        ("id".into(), id),
                        ("pattern".into(), pattern),
                        ("decision".into(), decision),
                    ])
                })
                .boxed();
            (list_op(command), list_op(path))
                .prop_map(|(c, p)| Node::Map(vec![("commands".into(), c), ("paths".into(), p)]))
                .boxed()
        }
        _ => list_op(pick(PATHS)).boxed(),
    };
    value.prop_map(move |v| (name.to_owned(), v))
}

/// A profile whose keys and value shapes mostly fit the schema.
fn shaped_profile() -> impl Strategy<Value = Vec<(String, Node)>> {
    let fields = [
        "mode",
        "approval",
        "network",
        "allow_dangerous_workspace_root",
        "accept_missing",
        "limits",
        "environment",
        "rules",
        "readable_roots",
        "writable_roots",
        "protected_paths",
        "masked_paths",
    ];
    prop::sample::subsequence(fields.to_vec(), 0..6)
        .prop_flat_map(|names| names.into_iter().map(field).collect::<Vec<_>>())
}

/// Random edits of a shipped profile's text.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Duplicate(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (
            any::<usize>(),
            prop::sample::select(&b" :-[]{}#&*!|>'\"\n\t~"[..])
        )
            .prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Delete),
        (any::<usize>(), 1usize..40).prop_map(|(i, n)| Edit::Duplicate(i, n)),
    ]
}

fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let len = bytes.len().max(1);
        match *e {
            Edit::Flip(i, b) if !bytes.is_empty() => bytes[i % len] ^= b,
            Edit::Insert(i, b) => bytes.insert(i % (bytes.len() + 1), b),
            Edit::Delete(i) if !bytes.is_empty() => {
                bytes.remove(i % len);
            }
            Edit::Duplicate(i, n) if !bytes.is_empty() => {
                let start = i % len;
                let end = (start + n).min(bytes.len());
                let chunk = bytes[start..end].to_vec();
                bytes.splice(start..start, chunk);
            }
            _ => {}
        }
    }
    bytes
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic_the_loader(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        load_bytes(bytes);
    }

    #[test]
    fn arbitrary_text_never_panics_the_loader(text in "(?s).{0,300}") {
        load_bytes(text.into_bytes());
    }

    #[test]
    fn yaml_trees_with_real_keys_never_panic(entries in profile_tree(), block in any::<bool>(), raw in any::<bool>()) {
        let text = render(&entries, block, raw);
        load_bytes(text.clone().into_bytes());
        // With a mode, more of the tree gets past the first checks.
        load_bytes(format!("mode: workspace-write\n{text}").into_bytes());
        load_bytes(format!("extends: workstation\n{text}").into_bytes());
    }

    #[test]
    fn mutated_shipped_profiles_never_panic(which in 0..SHIPPED.len(), edits in prop::collection::vec(edit(), 1..8)) {
        let bytes = apply(SHIPPED[which].1.as_bytes().to_vec(), &edits);
        load_bytes(bytes);
    }

    #[test]
    fn writes_are_only_allowed_inside_writable_roots(
        segments in prop::collection::vec(prop_oneof![
            Just("..".to_owned()), Just(".".to_owned()), Just(".git".to_owned()),
            Just("hooks".to_owned()), Just(".ssh".to_owned()), Just("project".to_owned()),
            Just("dev".to_owned()), Just("home".to_owned()), Just("tmp".to_owned()),
            "[a-z]{1,6}",
        ], 0..10),
        absolute in any::<bool>(),
        profile in prop::sample::select(vec!["read-only", "workspace-write", "workstation", "ci-locked"]),
    ) {
        let plan = support::shipped_plan(profile);
        let joined = segments.join("/");
        let path = if absolute { PathBuf::from(format!("/{joined}")) } else { PathBuf::from(joined) };
        let verdict = plan.decide_write(&path);
        let full = bridle_policy::normalize(&if path.is_absolute() { path.clone() } else { plan.spec.workspace.join(&path) });
        if verdict.decision == Decision::Allow {
            prop_assert!(plan.spec.writable_roots.iter().any(|r| full.starts_with(r)), "{full:?}");
            prop_assert!(!plan.spec.protected_paths.iter().any(|p| full.starts_with(p)), "{full:?}");
            prop_assert!(!plan.spec.masked_paths.iter().any(|m| full.starts_with(m)), "{full:?}");
        }
        prop_assert!(!full.components().any(|c| matches!(c, std::path::Component::ParentDir)));
    }

    #[test]
    fn schema_shaped_profiles_never_panic(entries in shaped_profile(), base in prop::sample::select(vec!["", "extends: workstation\n", "extends: ci-locked\n", "mode: workspace-write\n"])) {
        let text = format!("{base}{}", render(&entries, true, false));
        load_bytes(text.into_bytes());
    }

    #[test]
    fn workspace_layers_never_widen(entries in prop_oneof![profile_tree(), shaped_profile(), shaped_profile()]) {
        let text = render(&entries, true, false);
        let base = shipped("ci-locked");
        if let Ok(tight) = check_workspace_layer(&base, &SourceFile::from_text("ws.yaml", text.clone())) {
            prop_assert!(tight.mode.value <= base.mode.value, "{text}");
            prop_assert!(tight.approval.value <= base.approval.value, "{text}");
            prop_assert!(tight.network.value <= base.network.value, "{text}");
            prop_assert!(tight.writable_roots.len() <= base.writable_roots.len(), "{text}");
            prop_assert!(tight.accept_missing.len() <= base.accept_missing.len(), "{text}");
            prop_assert!(tight.environment.set == base.environment.set, "{text}");
            prop_assert!(tight.environment.inherit.value <= base.environment.inherit.value, "{text}");
            prop_assert!(!tight.allow_dangerous_workspace_root.value, "{text}");
            for (mine, theirs) in [
                (&tight.limits.processes, &base.limits.processes),
                (&tight.limits.memory, &base.limits.memory),
                (&tight.limits.wall_time, &base.limits.wall_time),
                (&tight.limits.command_timeout_max, &base.limits.command_timeout_max),
                (&tight.limits.spill_size, &base.limits.spill_size),
            ] {
                prop_assert!(mine.value.is_some() && mine.value <= theirs.value, "{text}");
            }
            for rule in &base.command_rules {
                prop_assert!(tight.command_rules.iter().any(|r| r.id == rule.id), "{text}");
            }
            for masked in &base.masked_paths {
                prop_assert!(tight.masked_paths.contains(masked), "{text}");
            }
            for rule in &tight.command_rules {
                prop_assert!(rule.decision != Decision::Allow, "{text}");
            }
        }
    }
}
