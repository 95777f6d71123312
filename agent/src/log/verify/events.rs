//! The second stage of verification: every event readable as its type (or declared by a
//! loaded plugin, or ignorable) and valid where it stands in the session's lifecycle.

use super::super::compaction;
use super::super::event::{Event, EventKinds, PluginEvent};
use super::super::progress::Progress;
use super::{Batch, Item, Options, Passed, Problem, Undeclared};

/// The second stage: every event readable as its type and valid where it stands.
#[derive(Debug)]
pub(super) struct Events<'a> {
    id: &'a str,
    kinds: Option<&'a dyn EventKinds>,
    mode: Undeclared,
    /// The lifecycle state so far, and the latest compaction, for checking compactions.
    progress: Progress,
    last_compaction: Option<u64>,
    pub(super) undeclared: Vec<(u64, String)>,
}

impl<'a> Events<'a> {
    pub(super) fn new(options: Options<'a>) -> Self {
        Self {
            id: options.id,
            kinds: options.kinds,
            mode: options.undeclared,
            progress: Progress::default(),
            last_compaction: None,
            undeclared: Vec::new(),
        }
    }

    /// Checks the events of `batch` in order, handing each that passed to `keep`.
    pub(super) fn check(
        &mut self,
        batch: &mut Batch,
        keep: &mut impl FnMut(Passed<'_>),
    ) -> Result<(), Problem> {
        let mut records = std::mem::take(&mut batch.records).into_iter();
        for item in &batch.items {
            // The ranges were cut where `Batch::push` appended whole strings.
            let (time, kind) = (
                &batch.bytes[item.time.clone()],
                &batch.bytes[item.kind.clone()],
            );
            let event = self.event(item, kind, &batch.bytes)?;
            self.check_place(item.seq, kind, event.as_ref())?;
            if let Some(event) = &event {
                self.progress.observe(event);
            }
            keep(Passed {
                seq: item.seq,
                time,
                event,
                record: records.next(),
            });
        }
        Ok(())
    }

    /// The typed event of `item`; `None` for one of an ignorable type nobody declares.
    fn event(&mut self, item: &Item, kind: &str, bytes: &str) -> Result<Option<Event>, Problem> {
        let seq = item.seq;
        let (data, tagged) = (&bytes[item.data.clone()], &bytes[item.tagged.clone()]);
        let declared = self.kinds.filter(|k| k.declares(kind));
        let event = if Event::is_known_kind(kind) {
            match serde_json::from_str(tagged) {
                Ok(event) => event,
                // Said as a parse of the record says it (without positions in the batch).
                Err(e) => return Err((seq, parse_error(kind, data.as_bytes(), &e))),
            }
        } else if declared.is_some() {
            let data =
                serde_json::from_str(data).map_err(|e| (seq, format!("{kind} data: {e}")))?;
            Event::Plugin(PluginEvent {
                kind: kind.to_owned(),
                data,
            })
        } else if item.ignorable {
            return Ok(None);
        } else {
            let what = format!(
                "unknown event type {kind:?} (not marked ignorable, and no loaded plugin \
                 declares it)"
            );
            return match self.mode {
                Undeclared::Refuse => Err((seq, what)),
                Undeclared::Collect => {
                    self.undeclared.push((seq, kind.to_owned()));
                    Ok(None)
                }
            };
        };
        if let Some(kinds) = declared {
            let value = match &event {
                Event::Plugin(plugin) => std::borrow::Cow::Borrowed(&plugin.data),
                _ => std::borrow::Cow::Owned(serde_json::from_str(data).unwrap_or_default()),
            };
            kinds.validate(kind, &value).map_err(|e| (seq, e))?;
        }
        Ok(Some(event))
    }

    /// The checks that depend on where an event stands: the header first and only first, a
    /// compaction only where it may be.
    fn check_place(&mut self, seq: u64, kind: &str, event: Option<&Event>) -> Result<(), Problem> {
        match (event, seq) {
            (Some(Event::SessionHeader(header)), 0) if header.id != self.id => Err((
                0,
                format!(
                    "the header names session {:?}, not {:?}",
                    header.id, self.id
                ),
            )),
            (Some(Event::SessionHeader(_)), 0) => Ok(()),
            (_, 0) => Err((0, format!("event 0 is {kind:?}, not session/header"))),
            (Some(Event::SessionHeader(_)), _) => Err((seq, "a second session/header".to_owned())),
            (
                Some(Event::ContextCompacted {
                    before, summary, ..
                }),
                seq,
            ) => {
                compaction::check(seq, *before, summary, self.last_compaction, &self.progress)
                    .map_err(|e| (seq, e))?;
                self.last_compaction = Some(seq);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Why the data of a `kind` event does not parse, as a parse of its record says it.
fn parse_error(kind: &str, data: &[u8], fast: &serde_json::Error) -> String {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return format!("{kind} data: {fast}");
    };
    match super::super::record::event_from_value(kind, value) {
        Err(e) => e,
        Ok(_) => format!("{kind} data: {fast}"),
    }
}
