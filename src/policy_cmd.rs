//! `bridle policy show|check|explain`. `explain` exits 0 allow, 1 deny, 3 ask.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use bridle_policy::{
    ApprovalPolicy, Decision, FsProfileSource, LoadRequest, Overrides, Plan, Policy, SandboxMode,
    SourceFile, Verdict,
};
use serde_json::json;

use crate::cli::{ExplainCommand, GlobalArgs, PolicyCommand};
use crate::session_facts::{Facts, WORKSPACE_LAYER};

pub fn run(global: &GlobalArgs, command: &PolicyCommand) -> Result<u8> {
    match command {
        PolicyCommand::Show { json } => show(global, *json),
        PolicyCommand::Check { file } => check(global, file),
        PolicyCommand::Explain(ExplainCommand::Write { path, json }) => {
            explain_write(global, path, *json)
        }
        PolicyCommand::Explain(ExplainCommand::Exec { argv, json }) => {
            explain_exec(global, argv, *json)
        }
        PolicyCommand::Explain(ExplainCommand::Bash { command, json }) => {
            explain_bash(global, command, *json)
        }
        PolicyCommand::Explain(ExplainCommand::Connect { target, json }) => {
            explain_connect(global, target, *json)
        }
    }
}

fn show(global: &GlobalArgs, as_json: bool) -> Result<u8> {
    let facts = Facts::gather(global)?;
    let policy = facts.load_policy(global, Overrides::default())?;
    let plan = facts.plan(&policy, facts.preview_temp_dir(), &[])?;
    let mut out = std::io::stdout().lock();
    if as_json {
        let masked: Vec<_> = plan
            .spec
            .masked_paths
            .iter()
            .map(|p| json!({"path": p, "origin": plan.origin_of(p)}))
            .collect();
        let value = json!({
            "profile": policy.profile,
            "layers": policy.layers,
            "entries": policy.entries(),
            "spec": plan.spec,
            "masked": masked,
        });
        writeln!(out, "{}", serde_json::to_string(&value)?)?;
        return Ok(0);
    }
    write_policy_table(&mut out, &policy)?;
    builtin_notes(&mut out, &policy)?;
    writeln!(out)?;
    write_spec(&mut out, &plan)?;
    Ok(0)
}

fn write_policy_table(out: &mut impl Write, policy: &Policy) -> Result<()> {
    writeln!(out, "profile: {}", policy.profile)?;
    let layers: Vec<String> = policy.layers.iter().map(|l| l.name.clone()).collect();
    writeln!(
        out,
        "layers (applied in order): built-in defaults -> {}",
        layers.join(" -> ")
    )?;
    writeln!(out)?;
    // Consecutive values of one list set at one place share a row; each row names its origin.
    let mut rows: Vec<(String, String, String)> = Vec::new();
    for e in policy.entries() {
        let origin = e.origin.to_string();
        match rows.last_mut() {
            Some((key, value, at))
                if *key == e.key && *at == origin && value.len() + e.value.len() < 60 =>
            {
                value.push_str(", ");
                value.push_str(&e.value);
            }
            _ => rows.push((e.key, e.value, origin)),
        }
    }
    let key_width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let value_width = rows
        .iter()
        .map(|r| r.1.chars().count())
        .max()
        .unwrap_or(0)
        .min(60);
    writeln!(
        out,
        "{:key_width$}  {:value_width$}  SET BY",
        "KEY", "VALUE"
    )?;
    for (key, value, origin) in rows {
        writeln!(out, "{key:key_width$}  {value:value_width$}  {origin}")?;
    }
    Ok(())
}

fn write_spec(out: &mut impl Write, plan: &Plan) -> Result<()> {
    let spec = &plan.spec;
    let paths = |list: &[PathBuf]| -> String {
        if list.is_empty() {
            "(none)".to_owned()
        } else {
            list.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let codes = |list: &[bridle_policy::Guarantee]| -> String {
        if list.is_empty() {
            "(none)".to_owned()
        } else {
            list.iter().map(|g| g.code()).collect::<Vec<_>>().join(" ")
        }
    };
    let limit = |v: Option<u64>| v.map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
    let seconds = |v: Option<u64>| v.map_or_else(|| "unlimited".to_owned(), |n| format!("{n}s"));
    writeln!(
        out,
        "sandbox spec for workspace {}",
        spec.workspace.display()
    )?;
    writeln!(out, "  mode:            {}", spec.mode)?;
    writeln!(out, "  guarantees:      {}", codes(&spec.guarantees))?;
    writeln!(out, "  accept missing:  {}", codes(&spec.accept_missing))?;
    writeln!(out, "  readable:        {}", paths(&spec.readable_roots))?;
    writeln!(out, "  writable:        {}", paths(&spec.writable_roots))?;
    writeln!(out, "  protected:       {}", paths(&spec.protected_paths))?;
    if !spec.must_stay_absent.is_empty() {
        writeln!(out, "  must not appear: {}", paths(&spec.must_stay_absent))?;
    }
    // One resolved path a line, with the entry (or what was found) that masks it.
    let mut label = "  masked:          ";
    if spec.masked_paths.is_empty() {
        writeln!(out, "{label}(none)")?;
    }
    for path in &spec.masked_paths {
        writeln!(out, "{label}{} ({})", path.display(), plan.origin_of(path))?;
        label = "                   ";
    }
    writeln!(out, "  network:         {}", spec.network)?;
    if let Some(list) = &spec.allow_list {
        let entries = |l: &[bridle_policy::network::NetEntry]| -> String {
            if l.is_empty() {
                "(none)".to_owned()
            } else {
                l.iter()
                    .map(|e| e.entry.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        writeln!(out, "  allowed hosts:   {}", entries(&list.allow))?;
        writeln!(out, "  denied hosts:    {}", entries(&list.deny))?;
        for pin in &list.resolve {
            writeln!(out, "  resolve:         {} -> {}", pin.host, pin.address)?;
        }
        writeln!(
            out,
            "  proxy:           relay on the sandbox's 127.0.0.1:{} (HTTP CONNECT, plain HTTP, SOCKS5); no DNS inside",
            list.relay_port
        )?;
    }
    writeln!(
        out,
        "  seccomp:         {}",
        serde_json::to_value(spec.seccomp)?.as_str().unwrap_or("?")
    )?;
    let l = &spec.limits;
    writeln!(
        out,
        "  limits:          processes={} memory={} file_size={} open_files={} cpu={} wall={}",
        limit(l.processes),
        limit(l.memory_bytes),
        limit(l.file_size_bytes),
        limit(l.open_files),
        seconds(l.cpu_time_secs),
        seconds(l.wall_time_secs),
    )?;
    writeln!(
        out,
        "  environment:     {}",
        spec.env.keys().cloned().collect::<Vec<_>>().join(" ")
    )?;
    writeln!(out, "  temp dir:        {}", spec.temp_dir.display())?;
    if spec.private_tmp {
        writeln!(
            out,
            "  /tmp:            private (the temp dir; the host's /tmp is not visible inside, except a workspace or writable root there)"
        )?;
    }
    match &spec.cache_home {
        Some(cache) => writeln!(
            out,
            "  cache home:      {} (writable, kept per workspace; the host's copies stay read-only beneath) for {}",
            paths(&cache.paths),
            cache.dir.display()
        )?,
        None => writeln!(out, "  cache home:      (none)")?,
    }
    Ok(())
}

/// A note for each command rule naming a shell builtin: the exec supervisor never sees those.
fn builtin_notes(out: &mut impl Write, policy: &Policy) -> Result<()> {
    for rule in &policy.command_rules {
        let names = rule.shell_builtins();
        if names.is_empty() {
            continue;
        }
        let named: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        writeln!(
            out,
            "note: rule `{}` ({}) names {}, which bash runs as a builtin without an exec: it is \
             decided on command-line text only, a best effort (a script file `bash FILE` runs \
             is not read)",
            rule.id,
            rule.origin,
            named.join(", ")
        )?;
    }
    Ok(())
}

fn check(global: &GlobalArgs, file: &Path) -> Result<u8> {
    let source = SourceFile::read(file)?;
    let mut out = std::io::stdout().lock();
    if file.ends_with(WORKSPACE_LAYER) {
        let base = bridle_policy::load(
            &FsProfileSource,
            &LoadRequest {
                profile: global.profile.clone(),
                overrides: Overrides::default(),
                workspace_layer: None,
            },
        )?;
        let policy = bridle_policy::check_workspace_layer(&base, &source)?;
        writeln!(
            out,
            "{}: ok (workspace configuration, tightens `{}`: mode {}, network {}, {} command rules, {} path rules)",
            file.display(),
            global.profile,
            policy.mode.value,
            policy.network.value,
            policy.command_rules.len(),
            policy.path_rules.len()
        )?;
        builtin_notes(&mut out, &policy)?;
        return Ok(0);
    }
    let reference = file.to_str().context("profile path is not valid UTF-8")?;
    let reference = if bridle_policy::source::is_path_reference(reference) {
        reference.to_owned()
    } else {
        format!("./{reference}")
    };
    let policy = bridle_policy::load(
        &FsProfileSource,
        &LoadRequest {
            profile: reference,
            overrides: Overrides::default(),
            workspace_layer: None,
        },
    )?;
    writeln!(
        out,
        "{}: ok (mode {}, approval {}, network {}, {} command rules, {} path rules, {} layers)",
        file.display(),
        policy.mode.value,
        policy.approval.value,
        policy.network.value,
        policy.command_rules.len(),
        policy.path_rules.len(),
        policy.layers.len()
    )?;
    builtin_notes(&mut out, &policy)?;
    Ok(0)
}

fn explain_write(global: &GlobalArgs, path: &Path, as_json: bool) -> Result<u8> {
    let facts = Facts::gather(global)?;
    let policy = facts.load_policy(global, Overrides::default())?;
    let plan = facts.plan(&policy, facts.preview_temp_dir(), &[])?;
    let resolved = bridle_exec::fs_tools::resolve(&plan.spec, &path.to_string_lossy());
    let verdict = plan.decide_write(&resolved);
    // A path rule matches names, which the kernel cannot: it decides the file tools' writes.
    let commands = matches!(verdict.by, bridle_policy::DecidedBy::Rule { .. }).then(|| {
        format!(
            "a path rule decides the file tools' writes (`write_file`, `edit_file`); a \
                 command (`bash`, the terminal, `bridle exec`) writes `{}` as mode {} allows \
                 (inside a writable root), since the kernel confines writes by directory, not \
                 by name",
            resolved.display(),
            plan.spec.mode
        )
    });
    print_verdict(
        &verdict,
        plan.approval,
        as_json,
        json!({"write": resolved}),
        ("commands", commands),
    )
}

fn explain_exec(global: &GlobalArgs, argv: &[String], as_json: bool) -> Result<u8> {
    explain_command(global, as_json, json!({"exec": argv}), |plan| {
        plan.decide_exec(argv)
    })
}

fn explain_bash(global: &GlobalArgs, command: &str, as_json: bool) -> Result<u8> {
    explain_command(global, as_json, json!({"bash": command}), |plan| {
        plan.decide_bash(command)
    })
}

/// `explain exec` and `explain bash`: the decision, and what the exec supervisor still
/// decides when the command runs.
fn explain_command(
    global: &GlobalArgs,
    as_json: bool,
    subject: serde_json::Value,
    decide: impl FnOnce(&Plan) -> Verdict,
) -> Result<u8> {
    let facts = Facts::gather(global)?;
    let policy = facts.load_policy(global, Overrides::default())?;
    let plan = facts.plan(&policy, facts.preview_temp_dir(), &[])?;
    let verdict = decide(&plan);
    let at_exec = (
        "at_exec",
        at_exec_note(&plan, verdict.decision).map(str::to_owned),
    );
    print_verdict(&verdict, plan.approval, as_json, subject, at_exec)
}

/// The exit status of `explain`: 0 allow, 1 deny, 3 ask (cli.md).
fn explain_status(decision: Decision) -> u8 {
    match decision {
        Decision::Allow => 0,
        Decision::Deny => 1,
        Decision::Ask => 3,
    }
}

/// `policy explain connect HOST[:PORT]`: exit 0 allow, 1 deny, 3 ask; 2 for a target that is
/// not a host.
fn explain_connect(global: &GlobalArgs, target: &str, as_json: bool) -> Result<u8> {
    let (host, port) = match bridle_policy::network::split_host_port(target, 443) {
        Ok(parsed) => parsed,
        Err(e) => {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "bridle: {}", bridle_exec::printable::printable(&e));
            return Ok(2);
        }
    };
    let facts = Facts::gather(global)?;
    let policy = facts.load_policy(global, Overrides::default())?;
    let plan = facts.plan(&policy, facts.preview_temp_dir(), &[])?;
    let shown = host.to_string();
    let verdict = plan.decide_connect(&shown, port);
    let pin = plan.resolve_pin(&shown);
    let mut out = std::io::stdout().lock();
    let note = match verdict.decision {
        Decision::Ask => Some(
            "approval policy `ask`: a person is asked once per session (the connection waits); with no one to ask it is denied",
        ),
        Decision::Allow | Decision::Deny => None,
    };
    if as_json {
        let value = json!({
            "subject": {"connect": {"host": shown, "port": port}},
            "decision": verdict.decision,
            "by": verdict.by,
            "reason": verdict.reason,
            "approval": plan.approval,
            "resolve": pin.map(|p| json!({"address": p.address, "origin": p.origin})),
            "note": note,
        });
        writeln!(out, "{}", serde_json::to_string(&value)?)?;
    } else {
        let colour = crate::style::colour_on_stdout();
        writeln!(
            out,
            "{}: {}",
            crate::style::decision(verdict.decision, colour),
            verdict.reason
        )?;
        if let Some(pin) = pin {
            writeln!(
                out,
                "resolve: `{}` is pinned to {} ({}), private addresses included",
                pin.host, pin.address, pin.origin
            )?;
        } else if verdict.decision != Decision::Deny {
            writeln!(
                out,
                "resolve: the proxy resolves `{shown}` itself and refuses loopback, private, link-local and metadata addresses"
            )?;
        }
        if let Some(note) = note {
            writeln!(out, "{note}")?;
        }
    }
    Ok(explain_status(verdict.decision))
}

fn approval_note(decision: Decision, approval: ApprovalPolicy) -> Option<&'static str> {
    match (decision, approval) {
        (Decision::Ask, ApprovalPolicy::Never) => {
            Some("approval policy `never`: this is rejected without asking")
        }
        (Decision::Ask, ApprovalPolicy::Ask) => {
            Some("approval policy `ask`: a person is asked; with no one to ask it is denied")
        }
        _ => None,
    }
}

/// What an allowed (or asked) command still meets when it runs: where the profile has command
/// rules, every program it starts is decided again at its exec, so a script's own `git push`
/// is refused there although its text was allowed.
fn at_exec_note(plan: &Plan, decision: Decision) -> Option<&'static str> {
    if decision == Decision::Deny || plan.spec.exec_rules.is_none() {
        return None;
    }
    Some(if plan.spec.mode == SandboxMode::DangerFullAccess {
        "every program it runs is decided again by these command rules when it \
         starts (under danger-full-access a best effort: a process can leave the supervision)"
    } else {
        "every program it runs (a script's commands, a program's children) is decided \
         again by these command rules when it starts, and a denied one fails there"
    })
}

fn print_verdict(
    verdict: &Verdict,
    approval: ApprovalPolicy,
    as_json: bool,
    subject: serde_json::Value,
    (scope_key, scope): (&str, Option<String>),
) -> Result<u8> {
    let mut out = std::io::stdout().lock();
    let note = approval_note(verdict.decision, approval);
    if as_json {
        let mut value = json!({
            "subject": subject,
            "decision": verdict.decision,
            "by": verdict.by,
            "reason": verdict.reason,
            "approval": approval,
            "note": note,
        });
        // The scope's key is there, null without one.
        value[scope_key] = json!(scope);
        writeln!(out, "{}", serde_json::to_string(&value)?)?;
    } else {
        let colour = crate::style::colour_on_stdout();
        writeln!(
            out,
            "{}: {}",
            crate::style::decision(verdict.decision, colour),
            verdict.reason
        )?;
        if let Some(note) = note {
            writeln!(out, "{note}")?;
        }
        if let Some(text) = &scope {
            writeln!(out, "{}: {text}", scope_key.replace('_', " "))?;
        }
    }
    Ok(explain_status(verdict.decision))
}
