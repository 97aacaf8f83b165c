//! The V4 successor of a V0–V3 session, computed from its stored events: DSH 0.2's migration
//! chain (`codec::migrate`) fed the served generation's committed events, the result admitted by
//! the V4 reader. Reads through migration (`migrated_view.rs`) serve it; `ops/migrate.rs`
//! publishes it.
//!
//! Invariant: a refusal (DSH's reason) and a failure to read the store are kept apart: the
//! first is `Ok(Err(reason))`, the second an error of its own, never reported as a refusal.

use sessionlog_codec::format::generation::NEWEST_VERSION;
use sessionlog_codec::json::{parse, Object, Value};
use sessionlog_codec::migrate::{ChildFacts, MigrationCheck};

use crate::error::{Error, Result};
use crate::layout::meta::{SessionMeta, SourceEncoding, Verdict};
use crate::store::Store;

/// The V4 successor of a session, checked and ready to publish.
pub(crate) struct MigratedFile {
    /// The file's bytes, in the session's encoding.
    pub(crate) bytes: Vec<u8>,
    /// Its events, seqs dense from 0.
    pub(crate) events: Vec<Value>,
}

impl Store {
    /// The checked V4 successor of `meta`'s served generation, or (`Ok(Err(..))`) DSH's
    /// refusal. A failure reading the store is an error of its own, never a refusal.
    pub(crate) fn successor(
        &self,
        meta: &SessionMeta,
        children: Vec<ChildFacts>,
    ) -> Result<std::result::Result<MigratedFile, String>> {
        // A fork reads its prefix through this session's storage: it must become independent
        // first (a migrated fork is a whole V4 log of its own).
        let forks = self.children(meta.number)?;
        let mut check = None;
        let refusal = self.refusal(meta, children, &forks, &mut check);
        let Some(mut check) = check.filter(|_| refusal.is_none()) else {
            return Ok(Err(refusal.unwrap_or_default()));
        };
        self.events_of(meta, 0, None, &mut |_, e| {
            check.observe(e);
            Ok(())
        })?;
        Ok(finish_successor(meta, check))
    }

    /// Why `meta` cannot be migrated before its events are read, or `None` with `check` set to
    /// the migration to feed them to.
    fn refusal(
        &self,
        meta: &SessionMeta,
        children: Vec<ChildFacts>,
        forks: &[Vec<u8>],
        check: &mut Option<MigrationCheck>,
    ) -> Option<String> {
        let from = meta.version;
        if from >= NEWEST_VERSION {
            return Some(format!(
                "the session is already in the current format v{NEWEST_VERSION}"
            ));
        }
        let header = match header_object(&meta.header) {
            Ok(header) => header,
            Err(reason) => return Some(reason),
        };
        let migration = MigrationCheck::keeping(from, &header, children);
        // A header DSH 0.2 cannot take is refused in its words, even where DSH 0.1's reader (the
        // stored verdict) already said it is corrupt; DSH 0.1's own refusals (`Unsupported`) are
        // left to the chain, which states DSH 0.2's.
        if let Some(reason) = migration.refusal() {
            return Some(unchanged(from, reason));
        }
        if let Verdict::Corrupt(m) = &meta.verdict {
            return Some(unchanged(
                from,
                &format!("source v{from} artifact cannot be read: {m}"),
            ));
        }
        if meta.deleted_at_ms.is_some() {
            return Some("the session is deleted; undelete it first".into());
        }
        if let Some(fork) = forks.first() {
            return Some(format!(
                "the fork \"{}\" reads its prefix from this session; migrate the forks first (migrate --all does)",
                String::from_utf8_lossy(fork)
            ));
        }
        *check = Some(migration);
        None
    }
}

/// The end of a migration fed every event: its refusal, or the successor in `meta`'s encoding.
fn finish_successor(
    meta: &SessionMeta,
    mut check: MigrationCheck,
) -> std::result::Result<MigratedFile, String> {
    if let Some(reason) = check.finish() {
        return Err(unchanged(meta.version, &reason));
    }
    let successor = check
        .into_successor()
        .ok_or_else(|| "the migration kept no successor".to_owned())?;
    let bytes = match meta.source {
        SourceEncoding::Jsonl => successor.text,
        SourceEncoding::JsonlZstd => {
            let frame = |b: &[u8]| {
                sessionlog_codec::format::zstd::compress_frame(b).map_err(|e| e.to_string())
            };
            let (header, rows) = successor.text.split_at(successor.header_len);
            let mut out = frame(header)?;
            if !rows.is_empty() {
                out.extend(frame(rows)?);
            }
            out
        }
    };
    Ok(MigratedFile {
        bytes,
        events: successor.events,
    })
}

/// A refusal of migrating a v`from` source, which stays as it is.
fn unchanged(from: u32, reason: &str) -> String {
    format!("{reason}; source v{from} artifact remains unchanged")
}

impl Store {
    /// The direct children of each session (of `only`, when given) in this store, as the V3→V4
    /// catalog backfill needs them: `origin:"subagent"` sessions naming it as `parentSession`.
    pub(crate) fn children_facts(
        &self,
        only: Option<&str>,
    ) -> Result<std::collections::HashMap<String, Vec<ChildFacts>>> {
        let mut metas = Vec::new();
        self.for_each_meta(&mut |m| {
            metas.push(m.clone());
            Ok(())
        })?;
        self.children_facts_of(metas.iter(), only)
    }

    /// [`Store::children_facts`] among `metas` (every session of the store).
    pub(crate) fn children_facts_of<'m>(
        &self,
        metas: impl IntoIterator<Item = &'m SessionMeta>,
        only: Option<&str>,
    ) -> Result<std::collections::HashMap<String, Vec<ChildFacts>>> {
        let mut found: Vec<(String, &SessionMeta, Object)> = Vec::new();
        for m in metas {
            let Ok(header) = header_object(&m.header) else {
                continue;
            };
            let parent = header
                .get("parentSession")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let child = header.get("origin").and_then(Value::as_str) == Some("subagent");
            if let (Some(parent), true) = (parent, child) {
                if only.is_none_or(|o| o == parent) && m.deleted_at_ms.is_none() {
                    found.push((parent, m, header));
                }
            }
        }
        let mut out: std::collections::HashMap<String, Vec<ChildFacts>> = Default::default();
        for (parent, child, header) in found {
            if child.archived.is_some() {
                return Err(Error::Migration {
                    reason: format!(
                        "its subagent session \"{}\" is archived and its descriptors cannot be read; restore it first",
                        child.id_lossy()
                    ),
                    id: parent,
                });
            }
            let cut = child.inherited_cut.unwrap_or(0);
            let mut descriptors = Vec::new();
            self.events_of(child, cut, None, &mut |_, e| {
                if sessionlog_codec::format::event::event_type(e) == "subagent/descriptor" {
                    descriptors.push(
                        e.as_object()
                            .and_then(|o| o.get("data"))
                            .cloned()
                            .unwrap_or_default(),
                    );
                }
                Ok(())
            })?;
            out.entry(parent).or_default().push(ChildFacts {
                child_id: child.id_lossy(),
                child_created_at: header
                    .get("createdAt")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0),
                descriptors,
            });
        }
        Ok(out)
    }
}

/// A stored header line as a JSON object.
fn header_object(line: &[u8]) -> std::result::Result<Object, String> {
    let text = std::str::from_utf8(line).map_err(|e| e.to_string())?;
    match parse(text.trim_end_matches('\n')) {
        Ok(Value::Object(o)) => Ok(o),
        _ => Err("the stored header is not a JSON object".into()),
    }
}
