//! Migrating a V0–V3 session to DSH 0.2's current format (later-format-spec §3.8, §3.9): the
//! codec's migration chain over the served generation's committed events, the result admitted by
//! the V4 reader, then published as the session's served V4 generation beside the untouched
//! source, which becomes a frozen lower generation (DSH's write-open).
//!
//! Invariants:
//! - a refused migration writes nothing: the chain and the V4 admission run before any write;
//! - publication is one atomic commit: the session is re-imported under a new number from the
//!   V4 file plus every generation it had (exact bytes), and the old number's keys go in the
//!   same final batch; appends to the session wait on its lock meanwhile;
//! - a fork (which reads its prefix from its parent's storage) migrates into a whole,
//!   independent V4 log; a session whose prefix a fork still reads is refused until its forks
//!   are migrated (`migrate_all` takes forks first);
//! - the V3→V4 catalog backfill sees the session's direct children in this store
//!   (`origin:"subagent"`, `parentSession` = its id), as DSH sees the child logs of its root.

use sessionlog_codec::generation::NEWEST_VERSION;
use sessionlog_codec::json::{parse, Object, Value};
use sessionlog_codec::migrate::{ChildFacts, MigrationCheck};

use crate::generations::LowerGeneration;
use crate::import::{ImportOptions, Landing};
use crate::meta::{SessionMeta, SourceEncoding, Verdict};
use crate::store::Store;
use crate::{Error, Result};

/// How to migrate.
#[derive(Clone, Copy, Debug, Default)]
pub struct MigrateOptions {
    /// Migrate and check, but publish nothing.
    pub dry_run: bool,
}

/// What a migration did (or, dry, would do).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationReport {
    /// The session id.
    pub id: String,
    /// The source generation's format version.
    pub from_version: u32,
    /// Logical events of the source's committed region.
    pub source_events: u64,
    /// Logical events of the V4 successor.
    pub events: u64,
    /// Bytes of the V4 successor file.
    pub bytes: u64,
    /// Whether the successor was published (false on a dry run).
    pub published: bool,
}

/// One session's outcome in a whole-store migration.
#[derive(Clone, Debug)]
pub enum MigrationOutcome {
    /// Migrated (or would be, dry).
    Migrated(MigrationReport),
    /// Already in the current format.
    Current(String),
    /// Refused; the session is unchanged.
    Refused(String, String),
}

/// The V4 successor of a session, checked and ready to publish.
pub(crate) struct MigratedFile {
    /// The file's bytes, in the session's encoding.
    bytes: Vec<u8>,
    /// Its events, seqs dense from 0.
    pub(crate) events: Vec<Value>,
}

impl Store {
    /// Migrate session `id` to the current format and, unless `dry_run`, publish the V4
    /// successor as its served generation; the source generation stays stored, frozen, and is
    /// still exported by `export --generation N`.
    ///
    /// # Errors
    /// [`Error::Migration`] when DSH refuses the migration (its reason), when the session is
    /// already current, torn beyond DSH's recovery, or shares a fork prefix; nothing is written.
    /// A failure reading the stored session is a [`Error::Storage`] or [`Error::Corrupt`].
    pub fn migrate(&self, id: &str, options: &MigrateOptions) -> Result<MigrationReport> {
        let children = self.children_facts(Some(id))?;
        self.migrate_with(id, options, children.get(id).cloned().unwrap_or_default())
    }

    /// Migrate every session below the current format; `each` hears every outcome as it
    /// happens (for progress). A refusal does not stop the run; a storage error (an unreadable
    /// or corrupt stored value) does, and is returned as itself.
    pub fn migrate_all(
        &self,
        options: &MigrateOptions,
        each: &mut dyn FnMut(&MigrationOutcome),
    ) -> Result<Vec<MigrationOutcome>> {
        let mut metas = std::collections::HashMap::new();
        self.for_each_meta(&mut |m| {
            metas.insert(m.id.clone(), m.clone());
            Ok(())
        })?;
        let children = self.children_facts_of(metas.values(), None)?;
        // Forks before the sessions they read their prefix from: deepest first.
        let depth = |m: &SessionMeta| {
            std::iter::successors(m.fork_of.as_ref(), |b| {
                metas.get(&b.id).and_then(|p| p.fork_of.as_ref())
            })
            .take(metas.len())
            .count()
        };
        let mut ids: Vec<(usize, String, u32)> = metas
            .values()
            .filter(|m| m.deleted_at_ms.is_none())
            .map(|m| (depth(m), m.id_lossy(), m.version))
            .collect();
        ids.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let mut outcomes = Vec::with_capacity(ids.len());
        for (_, id, version) in ids {
            let outcome = if version >= NEWEST_VERSION {
                MigrationOutcome::Current(id)
            } else {
                let own = children.get(&id).cloned().unwrap_or_default();
                match self.migrate_with(&id, options, own) {
                    Ok(report) => MigrationOutcome::Migrated(report),
                    Err(Error::Migration { reason, .. }) => MigrationOutcome::Refused(id, reason),
                    Err(e) => return Err(e),
                }
            };
            each(&outcome);
            outcomes.push(outcome);
        }
        Ok(outcomes)
    }

    /// DSH's write-open of an older generation: a V1–V3 session is migrated, its V4 successor
    /// published, before anything is written to it. V0 sessions are written as V0 (DSH 0.1's
    /// writer), and a missing session is left to the caller's own error.
    pub(crate) fn write_open(&self, id: &str) -> Result<()> {
        match self.meta(id.as_bytes())? {
            Some(meta) if (1..NEWEST_VERSION).contains(&meta.version) => {
                self.migrate(id, &MigrateOptions::default()).map(|_| ())
            }
            _ => Ok(()),
        }
    }

    fn migrate_with(
        &self,
        id: &str,
        options: &MigrateOptions,
        children: Vec<ChildFacts>,
    ) -> Result<MigrationReport> {
        let refuse = |reason: String| Error::Migration {
            id: id.to_owned(),
            reason,
        };
        let meta = self.require_meta(id.as_bytes())?;
        let successor = self.successor(&meta, children)?.map_err(refuse)?;
        let report = MigrationReport {
            id: id.to_owned(),
            from_version: meta.version,
            source_events: meta.events,
            events: successor.events.len() as u64,
            bytes: successor.bytes.len() as u64,
            published: !options.dry_run,
        };
        if !options.dry_run {
            self.publish(&meta, successor)?;
        }
        Ok(report)
    }

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
            let frame =
                |b: &[u8]| sessionlog_codec::zstd::compress_frame(b).map_err(|e| e.to_string());
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
    /// Publish `successor` as `meta`'s served generation, keeping every generation it had.
    fn publish(&self, meta: &SessionMeta, successor: MigratedFile) -> Result<()> {
        let id = meta.id_lossy();
        let handle = self.hot.handle(&meta.id);
        let mut hot = crate::append::lock_session(&handle);
        let current = self.require_meta(&meta.id)?;
        if current.number != meta.number || current.events != meta.events {
            return Err(Error::Migration {
                id,
                reason: "the session changed while it was being migrated; nothing was published"
                    .into(),
            });
        }
        let zstd = meta.source == SourceEncoding::JsonlZstd;
        let mut lower = Vec::with_capacity(meta.frozen.len() + 1);
        for version in meta.frozen.iter().map(|f| f.version).chain([meta.version]) {
            let mut bytes = Vec::new();
            self.export_generation(&id, version, None, &mut bytes)?;
            lower.push(LowerGeneration {
                version,
                zstd,
                shown: format!("generation v{version} of \"{id}\""),
                bytes,
            });
        }
        let landing = Landing {
            lower: Some(lower),
            replaces: Some(current),
        };
        let name = format!("v{NEWEST_VERSION} successor of \"{id}\"");
        let options = ImportOptions {
            strict: true,
            ..ImportOptions::default()
        };
        if zstd {
            self.land_zstd(&name, &successor.bytes, &options, landing)?;
        } else {
            self.land_jsonl(&name, &successor.bytes[..], &options, landing, &mut |_| {})?;
        }
        *hot = None;
        Ok(())
    }

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
    fn children_facts_of<'m>(
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
            let cut = child.inherited_cut.unwrap_or(0);
            let mut descriptors = Vec::new();
            self.events_of(child, cut, None, &mut |_, e| {
                if sessionlog_codec::event::event_type(e) == "subagent/descriptor" {
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

#[cfg(test)]
mod tests {
    use super::{MigrateOptions, MigrationOutcome};
    use crate::test_support::{damage_first_block, seeded};
    use crate::Error;

    /// Unreadable stored events stop a migration as the storage fault they are: not a refusal
    /// of the session, and `migrate --all` does not carry on past them.
    #[test]
    fn a_storage_fault_is_not_a_migration_refusal() {
        let (_t, store) = seeded();
        damage_first_block(&store);
        let e = store
            .migrate("a", &MigrateOptions::default())
            .expect_err("unreadable");
        assert!(matches!(e, Error::Corrupt { .. }), "{e}");
        let mut heard = Vec::new();
        let all = store.migrate_all(&MigrateOptions::default(), &mut |o| {
            heard.push(matches!(o, MigrationOutcome::Refused(..)))
        });
        assert!(matches!(all, Err(Error::Corrupt { .. })), "{all:?}");
        assert!(heard.is_empty(), "reported as an outcome: {heard:?}");
    }
}
