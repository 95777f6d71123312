//! `bridle log ...`: list, show, verify and export session logs.
//!
//! A session is named by its id, by a prefix only its id starts with, or by `last` (the
//! session created last). A prefix several ids start with is refused, listing them (exit 2).
//! A reader that closes the pipe early (`bridle log show ID | head`) ends the output quietly:
//! no error text, and the status the command would have had (0, or `verify`'s verdict).

mod show;

pub(crate) use show::brief;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use bridle_agent::AgentError;
use bridle_agent::log::{SessionDir, parse_id, timeline};

use crate::cli::{GlobalArgs, LogCommand, SessionDirArg};
use bridle_exec::printable::printable;

/// Exit status when a session prefix names more than one session, and of `log verify` when
/// the log could not be checked at all (no such session, no key, unreadable): different from
/// 1, which says the log is tampered or corrupt (a damaged file included).
const EXIT_USAGE: u8 = 2;

/// Runs `bridle log ...`; returns the exit status.
pub fn run(_global: &GlobalArgs, cmd: &LogCommand) -> Result<u8> {
    let ran = match cmd {
        LogCommand::List { json, dir } => list(&session_dir(dir)?, *json),
        LogCommand::Show {
            id,
            json,
            full,
            dir,
        } => show(&session_dir(dir)?, id, *json, *full),
        LogCommand::Verify { id, dir } => verify(&session_dir(dir)?, id),
        LogCommand::Export { id, format, dir } => export(&session_dir(dir)?, id, format),
    };
    match ran {
        // The reader went away (`| head`): what it wanted it has; nothing to complain about.
        Err(e) if crate::is_broken_pipe(&e) => Ok(0),
        other => other,
    }
}

fn session_dir(arg: &SessionDirArg) -> Result<PathBuf> {
    match &arg.session_dir {
        Some(dir) => Ok(dir.clone()),
        None => crate::session_facts::default_session_dir(),
    }
}

/// What a session argument names.
pub(crate) enum Named {
    One(String),
    /// Why none: no session has that id or prefix, or the directory holds none.
    None(String),
    /// Every id the prefix starts.
    Several(Vec<String>),
}

/// The session `wanted` names in `dir`: `last`, an id, or a prefix of exactly one id (also
/// what `--resume` and `--fork` take).
pub(crate) fn resolve(dir: &SessionDir, wanted: &str) -> Result<Named, AgentError> {
    if wanted == "last" {
        return Ok(match dir.newest()? {
            Some(id) => Named::One(id),
            None => Named::None(format!("no sessions in {}", dir.path().display())),
        });
    }
    parse_id(wanted)?;
    // A session whose log is missing beside its head is named too: opening it says so.
    let ids: Vec<String> = dir
        .ids()?
        .into_iter()
        .map(|(id, _)| id)
        .chain(dir.missing_logs()?)
        .collect();
    if ids.iter().any(|id| id == wanted) {
        return Ok(Named::One(wanted.to_owned()));
    }
    let mut matching: Vec<String> = ids
        .into_iter()
        .filter(|id| id.starts_with(wanted))
        .collect();
    matching.sort();
    // The same id in both stores is one session (opening it then says what is wrong).
    matching.dedup();
    Ok(match matching.len() {
        0 => Named::None(
            AgentError::FindSession {
                id: wanted.to_owned(),
                dir: dir.path().to_owned(),
            }
            .to_string(),
        ),
        1 => Named::One(matching.remove(0)),
        _ => Named::Several(matching),
    })
}

/// Says on stderr that `wanted` names several sessions, listing them; returns the exit status.
fn ambiguous(wanted: &str, ids: &[String]) -> Result<u8> {
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "bridle: {} sessions start with {:?}; give more of the id:",
        ids.len(),
        printable(wanted)
    )?;
    for id in ids {
        writeln!(err, "  {}", printable(id))?;
    }
    Ok(EXIT_USAGE)
}

/// The session `wanted` names, for `show` and `export`: `Err(status)` when it named several
/// (already said); a missing session is an error.
fn named(dir: &Path, wanted: &str) -> Result<Result<(SessionDir, String), u8>> {
    let dir = existing(dir)?;
    match resolve(&dir, wanted)? {
        Named::One(id) => Ok(Ok((dir, id))),
        Named::None(why) => anyhow::bail!("{why}"),
        Named::Several(ids) => Ok(Err(ambiguous(wanted, &ids)?)),
    }
}

fn list(dir: &Path, json: bool) -> Result<u8> {
    // Listing never creates the directory: no directory, no sessions.
    let sessions = if dir.exists() {
        SessionDir::existing(dir)?.list()?
    } else {
        Vec::new()
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        let value: Vec<_> = sessions
            .iter()
            .map(|s| {
                serde_json::json!({
                    "id": s.id,
                    "store": s.backend.map(|b| b.name()),
                    "created": s.created,
                    "workspace": s.workspace,
                    "turns": s.turns,
                    "status": s.status,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string(&value)?)?;
        out.flush()?;
        return Ok(0);
    }
    if sessions.is_empty() {
        writeln!(
            out,
            "no sessions in {}",
            printable(&dir.display().to_string())
        )?;
        out.flush()?;
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
    out.flush()?;
    Ok(0)
}

/// Says on stderr that session `id` could not be checked; returns the exit status.
fn cannot_check(id: &str, why: &str) -> Result<u8> {
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "bridle: cannot check session {}: {}",
        printable(id),
        printable(why)
    )?;
    Ok(EXIT_USAGE)
}

fn verify(dir: &Path, wanted: &str) -> Result<u8> {
    let found = SessionDir::existing(dir).and_then(|d| resolve(&d, wanted).map(|n| (d, n)));
    let (sessions, id) = match found {
        Ok((d, Named::One(id))) => (d, id),
        Ok((_, Named::None(why))) => return cannot_check(wanted, &why),
        Ok((_, Named::Several(ids))) => return ambiguous(wanted, &ids),
        Err(e) => return cannot_check(wanted, &e.to_string()),
    };
    let (status, lines) = match sessions.verify(&id) {
        Ok(v) => verdict(&id, &v),
        // Lines that are not records at all, or a file that is there but damaged (a database
        // SQLite cannot read as one): the log is corrupt, and the error says where.
        Err(
            e @ (AgentError::ParseLine { .. }
            | AgentError::ParseEvent { .. }
            | AgentError::UnknownEvent { .. }
            | AgentError::CorruptLog { .. }),
        ) => (
            1,
            vec![format!(
                "session {}: TAMPERED OR CORRUPT: {}",
                printable(&id),
                printable(&e.to_string())
            )],
        ),
        Err(e) => return cannot_check(&id, &e.to_string()),
    };
    let mut out = std::io::stdout().lock();
    let written = lines.iter().try_for_each(|line| writeln!(out, "{line}"));
    match written {
        // The verdict is the exit status, whoever still reads the text.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(status),
        Err(e) => Err(e.into()),
        Ok(()) => Ok(status),
    }
}

/// The exit status and the lines `log verify` prints for `v`.
fn verdict(id: &str, v: &bridle_agent::log::Verification) -> (u8, Vec<String>) {
    if let Some((seq, what)) = &v.problem {
        let line = format!(
            "session {id}: TAMPERED OR CORRUPT at event {seq}: {} ({} events before it are \
             intact)",
            printable(what),
            v.intact
        );
        return (1, vec![line]);
    }
    let mut lines = vec![format!("session {id}: intact, {} events", v.intact)];
    if let Some(torn) = &v.torn {
        lines.push(format!(
            "note: {} trailing bytes at offset {} are not a complete event (a write in \
             progress, a write a crash cut short, or bytes someone added); they are not part \
             of the log, and are set aside when the session is resumed",
            torn.len, torn.offset
        ));
    }
    (0, lines)
}

fn export(dir: &Path, wanted: &str, format: &str) -> Result<u8> {
    anyhow::ensure!(
        format == "jsonl",
        "unknown export format {format:?}: expected jsonl"
    );
    let (sessions, id) = match named(dir, wanted)? {
        Ok(found) => found,
        Err(status) => return Ok(status),
    };
    let records = sessions.read(&id)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for record in &records {
        out.write_all(&record.stored_form())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(0)
}

fn show(dir: &Path, wanted: &str, json: bool, full: bool) -> Result<u8> {
    let (sessions, id) = match named(dir, wanted)? {
        Ok(found) => found,
        Err(status) => return Ok(status),
    };
    let events = sessions.read_events(&id)?;
    let view = timeline(events.iter().map(|(seq, time, e)| (*seq, time.as_str(), e)));
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        serde_json::to_writer(&mut out, &view)?;
        writeln!(out)?;
    } else {
        show::write_timeline(&mut out, &view, full)?;
    }
    out.flush()?;
    Ok(0)
}

/// The session directory at `dir`, which must exist (reading never creates it).
fn existing(dir: &Path) -> Result<SessionDir> {
    anyhow::ensure!(
        dir.exists(),
        "no session directory at {} (pass --session-dir)",
        printable(&dir.display().to_string())
    );
    Ok(SessionDir::existing(dir)?)
}
