//! `bridle probe`: what this host can enforce, and which mechanism provides each guarantee of
//! the selected profile.

use std::io::Write;

use anyhow::Result;
use bridle_policy::Overrides;
use bridle_sandbox::{HostProbe, PINNED_LANDLOCK_ABI};
use serde_json::json;

use crate::cli::GlobalArgs;
use crate::exec_cmd::EXIT_SANDBOX_UNAVAILABLE;
use crate::session_facts::Facts;

fn state(r: &Result<(), String>) -> String {
    match r {
        Ok(()) => "ok".to_owned(),
        Err(e) => format!("unavailable ({e})"),
    }
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

pub fn run(global: &GlobalArgs, as_json: bool) -> Result<u8> {
    let facts = Facts::gather(global)?;
    let policy = facts.load_policy(global, Overrides::default())?;
    let plan = facts.plan(&policy, facts.preview_temp_dir(), &[])?;
    let probe: &HostProbe = bridle_sandbox::probe();
    let assessment = bridle_sandbox::assess::assess(&plan.spec, probe);
    let refusal = assessment.refusal().cloned();
    let accepted: Vec<_> = assessment
        .guarantees
        .iter()
        .filter(|g| g.missing() && g.accepted_missing)
        .collect();
    // A reader that went away (`bridle probe | head`) changes nothing of the answer: the exit
    // status still says whether the profile is enforceable.
    let printed = (|| -> Result<()> {
        let mut out = std::io::stdout().lock();
        if as_json {
            let value = json!({
                "kernel": kernel_release(),
                "host": probe,
                "pinned_landlock_abi": PINNED_LANDLOCK_ABI,
                "profile": policy.profile,
                "mode": plan.spec.mode,
                "network": plan.spec.network,
                "allow_list": plan.spec.allow_list,
                "guarantees": assessment.guarantees,
                "mechanisms": assessment.plan,
                "accepted_missing": accepted.iter().map(|g| g.guarantee).collect::<Vec<_>>(),
                "enforceable": refusal.is_none(),
            });
            writeln!(out, "{}", serde_json::to_string(&value)?)?;
        } else {
            writeln!(out, "host")?;
            writeln!(out, "  kernel          {}", kernel_release())?;
            writeln!(
                out,
                "  running as      {}",
                if probe.root {
                    "root"
                } else {
                    "an unprivileged user"
                }
            )?;
            match &probe.landlock_abi {
                Ok(abi) => writeln!(
                    out,
                    "  landlock        ABI {abi} (rules built for pinned ABI {PINNED_LANDLOCK_ABI}); rights: {}",
                    probe.landlock_fs_rights.join(" ")
                )?,
                Err(e) => writeln!(out, "  landlock        unavailable ({e})")?,
            }
            writeln!(out, "  seccomp         {}", state(&probe.seccomp))?;
            writeln!(out, "  no_new_privs    {}", state(&probe.no_new_privs))?;
            writeln!(out, "  user namespace  {}", state(&probe.user_ns))?;
            writeln!(
                out,
                "  mount namespace {} (mount API {})",
                state(&probe.mount_ns),
                state(&probe.mount_api)
            )?;
            writeln!(out, "  pid namespace   {}", state(&probe.pid_ns))?;
            writeln!(out, "  net namespace   {}", state(&probe.net_ns))?;
            writeln!(out, "  ipc namespace   {}", state(&probe.ipc_ns))?;
            writeln!(out)?;
            writeln!(
                out,
                "profile {} (mode {}, network {}, unix sockets {})",
                policy.profile, plan.spec.mode, plan.spec.network, plan.spec.unix_sockets
            )?;
            if let Some(list) = &plan.spec.allow_list {
                writeln!(
                    out,
                    "  network allow-list: {} allowed and {} denied entries, decided by bridle's proxy outside the sandbox; the sandbox reaches it only through a relay on its own 127.0.0.1:{} (no DNS inside)",
                    list.allow.len(),
                    list.deny.len(),
                    list.relay_port
                )?;
            }
            for g in &assessment.guarantees {
                let names: Vec<String> = g
                    .provided_by
                    .iter()
                    .map(|m| {
                        serde_json::to_value(m)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default()
                    })
                    .collect();
                let verdict = match (g.missing(), g.accepted_missing) {
                    (false, _) => format!("enforced   {}", names.join(", ")),
                    (true, true) => "ACCEPTED MISSING (accept_missing in the profile)".to_owned(),
                    (true, false) => "MISSING".to_owned(),
                };
                writeln!(out, "  {:<13} {verdict}", g.guarantee.code())?;
                if let Some(note) = &g.note {
                    writeln!(out, "  {:<13}   note: {note}", "")?;
                }
            }
            writeln!(out)?;
            match &refusal {
                None if accepted.is_empty() => writeln!(out, "result: enforceable")?,
                None => writeln!(out, "result: enforceable with accepted missing guarantees")?,
                Some(g) => writeln!(out, "result: NOT enforceable ({} missing)", g.guarantee)?,
            }
        }
        Ok(())
    })();
    if let Err(e) = printed
        && !crate::is_broken_pipe(&e)
    {
        return Err(e);
    }
    if let Some(g) = refusal {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "bridle: sandbox unavailable: {} ({})",
            g.guarantee,
            g.note.unwrap_or_default()
        );
        return Ok(EXIT_SANDBOX_UNAVAILABLE);
    }
    Ok(0)
}
