//! Finding the sessions of a directory: their ids and backends, the newest, a summary of each,
//! and where one is stored.

use std::path::PathBuf;

use super::dir::{SessionDir, parse_id, turn_end_name};
use super::event::Event;
use super::progress::Progress;
use super::store::{Backend, Flow};
use crate::AgentError;

/// One line of `bridle log list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub id: String,
    /// `None` for a session whose log is missing and whose head is left.
    pub backend: Option<Backend>,
    pub created: String,
    pub workspace: String,
    pub turns: u64,
    /// `open`, how the last turn ended, `new`, or why the log cannot be read.
    pub status: String,
}

impl SessionDir {
    /// The id and store of every session in the directory, by name alone (nothing is read).
    pub fn ids(&self) -> Result<Vec<(String, Backend)>, AgentError> {
        let entries =
            std::fs::read_dir(self.path()).map_err(|source| AgentError::ListSessionDir {
                dir: self.path().to_path_buf(),
                source,
            })?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some((id, backend)) = Backend::ALL.iter().find_map(|b| {
                name.strip_suffix(&format!(".{}", b.extension()))
                    .map(|id| (id.to_owned(), *b))
            }) else {
                continue;
            };
            if parse_id(&id).is_ok() {
                out.push((id, backend));
            }
        }
        out.sort_by(|a, b| (&a.0, a.1.extension()).cmp(&(&b.0, b.1.extension())));
        Ok(out)
    }

    /// The session created last: the greatest `YYYYMMDD-HHMMSS` in its id, and among sessions
    /// created in the same second the one whose header says it was created last (only those
    /// are read). `None` when the directory holds no session.
    pub fn newest(&self) -> Result<Option<String>, AgentError> {
        let ids = self.ids()?;
        let stamp = |id: &str| id.get(..15).map(str::to_owned).unwrap_or_default();
        let Some(latest) = ids.iter().map(|(id, _)| stamp(id)).max() else {
            return Ok(None);
        };
        let mut tied: Vec<(String, String)> = ids
            .into_iter()
            .filter(|(id, _)| stamp(id) == latest)
            .map(|(id, _)| {
                let created = self.created(&id).unwrap_or_default();
                (created, id)
            })
            .collect();
        tied.sort();
        Ok(tied.pop().map(|(_, id)| id))
    }

    /// When session `id` says it was created (its header), if it can be read (only its
    /// first record is).
    pub(super) fn created(&self, id: &str) -> Option<String> {
        let (backend, path) = self.locate(id).ok()?;
        let mut store = backend.open_read_only(&path).ok()?;
        let mut created = None;
        store
            .scan(&mut |scanned| {
                if let Ok(Some(Event::SessionHeader(h))) = scanned.into_event() {
                    created = Some(h.created);
                }
                Flow::Break(())
            })
            .ok()?;
        created
    }

    /// The ids of sessions whose log is gone while its head record is still there: a log
    /// deleted or moved away, which a reviewer must see rather than a shorter list.
    pub fn missing_logs(&self) -> Result<Vec<String>, AgentError> {
        let entries =
            std::fs::read_dir(self.path()).map_err(|source| AgentError::ListSessionDir {
                dir: self.path().to_path_buf(),
                source,
            })?;
        let mut out: Vec<String> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                let id = name.to_str()?.strip_suffix(".head")?.to_owned();
                (parse_id(&id).is_ok() && !self.has_log(&id)).then_some(id)
            })
            .collect();
        out.sort();
        Ok(out)
    }

    fn has_log(&self, id: &str) -> bool {
        Backend::ALL.iter().any(|b| {
            std::fs::symlink_metadata(self.path().join(format!("{id}.{}", b.extension()))).is_ok()
        })
    }

    /// Every session in the directory, oldest first. A log that cannot be read is listed with
    /// the reason as its status, and a log that is missing beside its head as missing.
    pub fn list(&self) -> Result<Vec<SessionSummary>, AgentError> {
        let mut out = Vec::new();
        for (id, backend) in self.ids()? {
            out.push(self.summarise(id, backend));
        }
        out.sort_by(|a, b| (&a.created, &a.id).cmp(&(&b.created, &b.id)));
        for id in self.missing_logs()? {
            let status = format!("unreadable: {}", self.log_missing(&id));
            out.push(SessionSummary {
                id,
                backend: None,
                created: String::new(),
                workspace: String::new(),
                turns: 0,
                status,
            });
        }
        Ok(out)
    }

    /// Why session `id`, whose head is there, has no log: it is corrupt, as a log cut short
    /// is (`log verify` exits 1).
    fn log_missing(&self, id: &str) -> AgentError {
        AgentError::CorruptLog {
            path: self.path().join(id),
            reason: format!(
                "its log file is missing (deleted or moved away); only its head `{id}.head` is \
                 left"
            ),
        }
    }

    pub(super) fn summarise(&self, id: String, backend: Backend) -> SessionSummary {
        let mut summary = SessionSummary {
            id,
            backend: Some(backend),
            created: String::new(),
            workspace: String::new(),
            turns: 0,
            status: String::new(),
        };
        let mut progress = Progress::default();
        let mut header = None;
        let loaded = self.load(&summary.id, false, |passed| match passed.event {
            Some(Event::SessionHeader(h)) => header = Some(h),
            Some(event) => progress.observe(&event),
            None => {}
        });
        let verdict = match loaded {
            Ok((path, verdict, _)) => {
                verdict.map_err(|(seq, what)| AgentError::VerifyLog { path, seq, what })
            }
            Err(e) => Err(e),
        };
        if let Err(e) = verdict {
            summary.status = format!("unreadable: {e}");
            return summary;
        }
        if let Some(h) = header {
            summary.created = h.created;
            summary.workspace = h.workspace;
        }
        summary.turns = progress.last_turn.map_or(0, |t| t + 1);
        summary.status = match (progress.open_turn, progress.last_end) {
            (Some(_), _) => "open".to_owned(),
            (None, Some(reason)) => turn_end_name(reason).to_owned(),
            (None, None) => "new".to_owned(),
        };
        summary
    }

    /// The backend and file of session `id`.
    pub fn locate(&self, id: &str) -> Result<(Backend, PathBuf), AgentError> {
        parse_id(id)?;
        let found: Vec<_> = Backend::ALL
            .iter()
            .map(|b| (*b, self.path().join(format!("{id}.{}", b.extension()))))
            .filter(|(_, p)| p.is_file())
            .collect();
        match found.as_slice() {
            [one] => Ok(one.clone()),
            [] if self.path().join(format!("{id}.head")).exists() => Err(self.log_missing(id)),
            [] => Err(AgentError::FindSession {
                id: id.to_owned(),
                dir: self.path().to_path_buf(),
            }),
            _ => Err(AgentError::OpenLog {
                path: self.path().join(id),
                reason: "the session exists in both stores (jsonl and sqlite)".to_owned(),
            }),
        }
    }
}
