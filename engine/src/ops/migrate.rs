//! Migrating a V0–V3 session to DSH 0.2's current format (later-format-spec §3.8, §3.9): its
//! successor (`read/successor.rs`: the codec's migration chain over the served generation's
//! committed events, the result admitted by the V4 reader) published as the session's served V4 generation beside the untouched
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

use sessionlog_codec::format::generation::NEWEST_VERSION;
use sessionlog_codec::migrate::ChildFacts;

use crate::error::{Error, Result};
use crate::layout::meta::{SessionMeta, SourceEncoding};
use crate::ops::import::{ImportOptions, Landing};
use crate::read::successor::MigratedFile;
use crate::store::{lock_session, Store};

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

/// One session's outcome in a whole-store migration. Serializes as `{id, outcome}`:
/// `outcome` `migrated` or `would-migrate` (a dry run) with `fromVersion`, `sourceEvents`,
/// `events` and `bytes`; `current`; or `refused` with `reason`.
#[derive(Clone, Debug)]
pub enum MigrationOutcome {
    /// Migrated (or would be, dry).
    Migrated(MigrationReport),
    /// Already in the current format.
    Current(String),
    /// Refused; the session is unchanged.
    Refused(String, String),
}

/// A [`MigrationOutcome`] as it is rendered (`ops/render.rs`).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct OutcomeView<'a> {
    id: &'a str,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    from_version: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source_events: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

impl<'a> OutcomeView<'a> {
    /// An outcome that migrated nothing.
    fn bare(id: &'a str, outcome: &'static str, reason: Option<&'a str>) -> Self {
        OutcomeView {
            id,
            outcome,
            from_version: None,
            source_events: None,
            events: None,
            bytes: None,
            reason,
        }
    }
}

impl serde::Serialize for MigrationOutcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            MigrationOutcome::Migrated(r) => OutcomeView {
                id: &r.id,
                outcome: if r.published {
                    "migrated"
                } else {
                    "would-migrate"
                },
                from_version: Some(r.from_version),
                source_events: Some(r.source_events),
                events: Some(r.events),
                bytes: Some(r.bytes),
                reason: None,
            },
            MigrationOutcome::Current(id) => OutcomeView::bare(id, "current", None),
            MigrationOutcome::Refused(id, reason) => OutcomeView::bare(id, "refused", Some(reason)),
        }
        .serialize(s)
    }
}

/// Whether DSH's write-open of a session of format `version` migrates it first (V1–V3).
pub(crate) fn opens_by_migrating(version: u32) -> bool {
    (1..NEWEST_VERSION).contains(&version)
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

    /// Migrate every session below the current format (archived ones stay as archived; restore
    /// one to migrate it); `each` hears every outcome as it
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
            .filter(|m| m.deleted_at_ms.is_none() && m.archived.is_none())
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
            Some(meta) if opens_by_migrating(meta.version) => {
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

    /// Publish `successor` as `meta`'s served generation, keeping every generation it had.
    fn publish(&self, meta: &SessionMeta, successor: MigratedFile) -> Result<()> {
        let id = meta.id_lossy();
        let handle = self.write_states.handle(&meta.id);
        let mut state = lock_session(&handle);
        let current = self.require_meta(&meta.id)?;
        if current.number != meta.number || current.events != meta.events {
            return Err(Error::Migration {
                id,
                reason: "the session changed while it was being migrated; nothing was published"
                    .into(),
            });
        }
        let versions: Vec<u32> = meta
            .frozen
            .iter()
            .map(|f| f.version)
            .chain([meta.version])
            .collect();
        let landing = Landing {
            lower: Some(self.generation_files(meta, &versions)?),
            replaces: Some(current),
            ..Landing::default()
        };
        let name = format!("v{NEWEST_VERSION} successor of \"{id}\"");
        let options = ImportOptions {
            strict: true,
            ..ImportOptions::default()
        };
        if meta.source == SourceEncoding::JsonlZstd {
            self.land_zstd(&name, &successor.bytes, &options, landing)?;
        } else {
            self.land_jsonl(&name, &successor.bytes[..], &options, landing, &mut |_| {})?;
        }
        *state = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{MigrateOptions, MigrationOutcome};
    use crate::error::Error;
    use crate::test_support::{damage_first_block, seeded};

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
