//! `bridle log ...`: list, show, verify and export session logs.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use bridle_agent::AgentError;
use bridle_agent::log::{Entry, Record, SessionDir, Timeline, timeline, turn_end_name};

use crate::cli::{GlobalArgs, LogCommand, SessionDirArg};
use bridle_exec::printable::printable;

/// Runs `bridle log ...`; returns the exit status.
pub fn run(_global: &GlobalArgs, cmd: &LogCommand) -> Result<u8> {
    match cmd {
        LogCommand::List { json, dir } => list(&session_dir(dir)?, *json),
        LogCommand::Show { id, json, dir } => show(&session_dir(dir)?, id, *json),
        LogCommand::Verify { id, dir } => verify(&session_dir(dir)?, id),
        LogCommand::Export { id, format, dir } => export(&session_dir(dir)?, id, format),
    }
}

fn session_dir(arg: &SessionDirArg) -> Result<PathBuf> {
    match &arg.session_dir {
        Some(dir) => Ok(dir.clone()),
        None => crate::session_facts::default_session_dir(),
    }
}

fn list(dir: &std::path::Path, json: bool) -> Result<u8> {
    // Listing never creates the directory: no directory, no sessions.
    let sessions = if dir.exists() {
        SessionDir::existing(dir)?.list()?
    } else {
        Vec::new()
    };
    let mut out = std::io::stdout().lock();
    if json {
        let value: Vec<_> = sessions
            .iter()
            .map(|s| {
                serde_json::json!({
                    "id": s.id,
                    "store": s.backend.name(),
                    "created": s.created,
                    "workspace": s.workspace,
                    "turns": s.turns,
                    "status": s.status,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(0);
    }
    if sessions.is_empty() {
        writeln!(out, "no sessions in {}", dir.display())?;
        return Ok(0);
    }
    writeln!(
        out,
        "{:<24}  {:<24}  {:>5}  {:<11}  WORKSPACE",
        "ID", "CREATED", "TURNS", "STATUS"
    )?;
    for s in &sessions {
        writeln!(
            out,
            "{:<24}  {:<24}  {:>5}  {:<11}  {}",
            s.id,
            printable(&s.created),
            s.turns,
            printable(&s.status),
            printable(&s.workspace)
        )?;
    }
    Ok(0)
}

/// Exit status of `log verify` when the log could not be checked at all (no such session, no
/// key, unreadable): different from 1, which says the log is tampered or corrupt.
const EXIT_CANNOT_CHECK: u8 = 2;

fn verify(dir: &std::path::Path, id: &str) -> Result<u8> {
    let mut out = std::io::stdout().lock();
    let checked = SessionDir::existing(dir).and_then(|d| d.verify(id));
    let v = match checked {
        Ok(v) => v,
        // Lines that are not records at all: the log is corrupt, and says where.
        Err(
            e @ (AgentError::ParseLine { .. }
            | AgentError::ParseEvent { .. }
            | AgentError::UnknownEvent { .. }),
        ) => {
            writeln!(
                out,
                "session {}: TAMPERED OR CORRUPT: {}",
                printable(id),
                printable(&e.to_string())
            )?;
            return Ok(1);
        }
        Err(e) => {
            let mut err = std::io::stderr().lock();
            writeln!(
                err,
                "bridle: cannot check session {}: {}",
                printable(id),
                printable(&e.to_string())
            )?;
            return Ok(EXIT_CANNOT_CHECK);
        }
    };
    if let Some((seq, what)) = &v.problem {
        writeln!(
            out,
            "session {id}: TAMPERED OR CORRUPT at event {seq}: {} ({} events before it are \
             intact)",
            printable(what),
            v.intact
        )?;
        return Ok(1);
    }
    writeln!(out, "session {id}: intact, {} events", v.intact)?;
    if let Some(torn) = &v.torn {
        writeln!(
            out,
            "note: {} trailing bytes at offset {} are not a complete event (a write a crash cut \
             short, or bytes someone added); they are not part of the log, and are set aside \
             when the session is resumed",
            torn.len, torn.offset
        )?;
    }
    Ok(0)
}

fn export(dir: &std::path::Path, id: &str, format: &str) -> Result<u8> {
    anyhow::ensure!(
        format == "jsonl",
        "unknown export format {format:?}: expected jsonl"
    );
    let records = existing(dir)?.read(id)?;
    let mut out = std::io::stdout().lock();
    for record in &records {
        serde_json::to_writer(&mut out, record)?;
        out.write_all(b"\n")?;
    }
    Ok(0)
}

fn show(dir: &std::path::Path, id: &str, json: bool) -> Result<u8> {
    let records = existing(dir)?.read(id)?;
    let events = typed(&records)?;
    let view = timeline(events.iter().map(|(r, e)| (r.seq, r.time.as_str(), e)));
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&view)?)?;
    } else {
        write_timeline(&mut out, &view)?;
    }
    Ok(0)
}

/// The session directory at `dir`, which must exist (reading never creates it).
fn existing(dir: &std::path::Path) -> Result<SessionDir> {
    anyhow::ensure!(
        dir.exists(),
        "no session directory at {} (pass --session-dir)",
        dir.display()
    );
    Ok(SessionDir::existing(dir)?)
}

fn typed(records: &[Record]) -> Result<Vec<(&Record, bridle_agent::log::Event)>> {
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        let event = record
            .event()
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("event {}", record.seq))?;
        if let Some(event) = event {
            out.push((record, event));
        }
    }
    Ok(out)
}

/// The first line of `text`, at most `max` characters, marked when cut.
fn brief(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    let mut short: String = line.chars().take(max).collect();
    if short.len() < line.len() || text.lines().nth(1).is_some() {
        short.push('…');
    }
    printable(&short)
}

fn write_timeline(out: &mut impl Write, view: &Timeline) -> std::io::Result<()> {
    // Every value read from the log goes through `printable` (or `brief`, which uses it): a
    // log can hold anything a model or a command produced.
    let p = |text: &str| printable(text);
    if let Some(h) = &view.session {
        writeln!(out, "session {}  created {}", p(&h.id), p(&h.created))?;
        writeln!(
            out,
            "  workspace {}  profile {}",
            p(&h.workspace),
            p(&h.profile)
        )?;
        writeln!(out, "  policy sha256:{}", p(&h.policy_digest))?;
    }
    if let Some((from, seq)) = &view.forked_from {
        writeln!(out, "  forked from {} at event {seq}", p(from))?;
    }
    for entry in &view.entries {
        match entry {
            Entry::Switch(s) => writeln!(out, "[{}] {} -> {}", s.seq, s.what, p(&s.to))?,
            Entry::Unattached { seq, kind, .. } => writeln!(
                out,
                "[{seq}] {kind} (belongs to no turn or call in the log)"
            )?,
            Entry::Turn(t) => {
                let ended = t.ended.map_or("open", turn_end_name);
                writeln!(out, "[{}] turn {} ({ended})  {}", t.seq, t.turn, p(&t.time))?;
                for input in &t.input {
                    writeln!(out, "    user: {}", brief(input, 100))?;
                }
                for s in &t.switches {
                    writeln!(out, "    [{}] {} -> {}", s.seq, s.what, p(&s.to))?;
                }
                for step in &t.steps {
                    writeln!(out, "  [{}] step {}", step.seq, step.step)?;
                    for call in &step.calls {
                        let decision = match (&call.decision, &call.decided_by) {
                            (Some(d), Some(by)) => format!("{d} by {}", p(by)),
                            _ => "undecided".to_owned(),
                        };
                        writeln!(
                            out,
                            "    [{}] {} {}  {decision}",
                            call.seq,
                            brief(&call.name, 40),
                            brief(&call.arguments, 80)
                        )?;
                        if let Some(a) = &call.approval {
                            writeln!(
                                out,
                                "        asked: {}  answer: {} by {}",
                                brief(&a.question, 80),
                                p(a.answer.as_deref().unwrap_or("none")),
                                p(a.answered_by.as_deref().unwrap_or("nobody"))
                            )?;
                        }
                        for n in &call.network {
                            writeln!(out, "        {}", network_line(n))?;
                        }
                        match (call.ok, &call.result) {
                            (Some(ok), Some(text)) => writeln!(
                                out,
                                "        {} {}",
                                if ok { "ok:" } else { "failed:" },
                                brief(text, 100)
                            )?,
                            _ => writeln!(out, "        no result")?,
                        }
                    }
                    if !step.answer.is_empty() {
                        writeln!(out, "    answer: {}", brief(&step.answer, 100))?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// One `net/decision` of a call, as `log show` lists it.
fn network_line(n: &bridle_agent::log::NetDecision) -> String {
    let p = |text: &str| printable(text);
    let error = n
        .error
        .as_deref()
        .map(|e| format!(", failed: {}", p(e)))
        .unwrap_or_default();
    format!(
        "network: {} {}:{} by {}  ({} connections, {} bytes sent, {} received{error})",
        n.decision,
        p(&n.host),
        n.port,
        p(&n.by),
        n.connections,
        n.sent,
        n.received
    )
}
