//! The one session-batch builder every writer goes through (import, create, append, repair,
//! fork, migrate, delete, purge, the recovery of interrupted imports): a [`Batch`] plus the
//! session-level changes. Its typed methods are the only code that writes the `sessions` CF's
//! `S`, `N`, `A`, `R`, `F`, `P` and `C` keys, and every record of the other column families is
//! staged through them.
//!
//! Invariants kept here: a session's `N`, `A`, `R` (and, for a fork, `F`) keys are written and
//! removed together with its `S` record; the `A` key always names the activity the `S` record
//! holds; a removed session's ranges in every session-keyed CF go in the same batch.

use std::sync::Arc;

use sessionlog_codec::json::Value;

use crate::error::Result;
use crate::layout::changes::Change;
use crate::layout::keys::{
    self, CF_CHECKPOINTS, CF_EVENTS, CF_SESSIONS, CF_SURFACE, EVENT_KEY_LEN,
};
use crate::layout::meta::SessionMeta;
use crate::store::{Batch, Part, Recorded, Recording, Store, Sync};

/// One or more sessions' changes, committed at once: in one part, or, for a store with a commit
/// hook, in parts the hook answers for one by one ([`SessionBatch::end_part`]). Changes staged
/// after the last part are committed as this store's own ([`Recording::Local`], which a store
/// with a commit hook refuses), unless the batch was made [`SessionBatch::recorded`].
pub(crate) struct SessionBatch<'s> {
    store: &'s Store,
    batch: Batch<'s>,
    /// Whether the changes are the system of record's already (see [`SessionBatch::recorded`]).
    recorded: Option<Recorded>,
    /// The parts closed so far (the changes staged since are the last part).
    parts: Vec<Part>,
    /// Updates staged in the closed parts.
    closed: usize,
    /// Session batches the open part appends (for the group-commit metrics).
    appends: u64,
}

impl<'s> SessionBatch<'s> {
    /// An empty batch for `store`.
    pub(crate) fn new(store: &'s Store) -> Self {
        Self::with_capacity(store, 0)
    }

    /// An empty batch for `store` with room for `bytes` of records, so that staging them does
    /// not regrow it (each regrowth copies the whole batch).
    pub(crate) fn with_capacity(store: &'s Store, bytes: usize) -> Self {
        SessionBatch {
            store,
            batch: Batch::with_capacity(store, bytes),
            recorded: None,
            parts: Vec::new(),
            closed: 0,
            appends: 0,
        }
    }

    /// An empty batch for `store` of changes its system of record holds already when `recorded`
    /// proves it (a store with a commit hook writes them without offering them to it), else of
    /// this store's own (as [`SessionBatch::new`]).
    pub(crate) fn recorded(store: &'s Store, recorded: Option<Recorded>) -> Self {
        SessionBatch {
            recorded,
            ..Self::new(store)
        }
    }

    /// Whether nothing was staged.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many updates are staged.
    pub(crate) fn len(&self) -> usize {
        self.closed + self.batch.len()
    }

    /// Close the changes staged since the last part as one part of the commit, standing with the
    /// store's commit hook as `recording` says: the hook accepts or refuses it alone, and
    /// [`SessionBatch::commit_parts`] gives its outcome alone.
    pub(crate) fn end_part(&mut self, recording: Recording) {
        let part = self.batch.take();
        self.closed += part.len();
        let mut part = part.into_part(recording);
        part.appends = std::mem::take(&mut self.appends);
        self.parts.push(part);
    }

    /// Stage a record of the `events` CF: a block of lines, a zstd frame, a tail chunk, a chunk
    /// of a frozen generation, or another per-session record keyed by `layout::keys`.
    pub(crate) fn put_event_record(
        &mut self,
        key: &[u8; EVENT_KEY_LEN],
        value: &[u8],
    ) -> Result<()> {
        self.batch.put(CF_EVENTS, key, value)
    }

    /// Stage a surface-index record (ops, snapshots, replacements, message projections).
    pub(crate) fn put_surface(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.batch.put(CF_SURFACE, key, value)
    }

    /// Stage a projection checkpoint record.
    pub(crate) fn put_checkpoint(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.batch.put(CF_CHECKPOINTS, key, value)
    }

    /// Delete one record of the `events` CF.
    pub(crate) fn delete_event_record(&mut self, key: &[u8; EVENT_KEY_LEN]) -> Result<()> {
        self.batch.delete(CF_EVENTS, key)
    }

    /// Delete the records of the `events` CF in `from..to` (one section of one session).
    pub(crate) fn delete_event_records(
        &mut self,
        from: &[u8; EVENT_KEY_LEN],
        to: &[u8; EVENT_KEY_LEN],
    ) -> Result<()> {
        self.batch.delete_range(CF_EVENTS, from, to)
    }

    /// A new session's metadata and index keys (`S`, `N`, `A`, `R`, and `F` for a fork), and
    /// the session counter past its number.
    pub(crate) fn insert_session(&mut self, meta: &SessionMeta) -> Result<()> {
        let number = meta.number;
        self.put_meta(meta)?;
        self.put_session_key(&keys::number_key(number), &meta.id)?;
        self.put_session_key(&keys::activity_key(meta.activity_ms, number), &meta.id)?;
        self.put_session_key(&keys::created_key(meta.created_at, number), &meta.id)?;
        if let Some(base) = &meta.fork_of {
            self.put_session_key(&keys::fork_key(base.number, number), &meta.id)?;
        }
        // Merged, not put: creations commit in any order (see `layout::counter`).
        self.batch.merge(
            CF_SESSIONS,
            keys::COUNTER_KEY,
            &self.store.counter_after(number),
        )
    }

    /// A stored session's metadata changing in what no index holds (its activity unchanged):
    /// its `S` record and its counters record, which must never be older (`layout::meta`).
    pub(crate) fn put_meta(&mut self, meta: &SessionMeta) -> Result<()> {
        self.put_session_key(&keys::meta_key(&meta.id), &meta.encode()?)?;
        self.put_counters(meta)
    }

    /// A stored session's metadata moving from `before` to `after` in its counters alone
    /// (activity included): its counters record, and its `A` key when the activity moved. A
    /// session read from a version 5 `S` record has that record rewritten too
    /// (`SessionMeta::legacy_record`).
    pub(crate) fn advance(&mut self, before: &SessionMeta, after: &SessionMeta) -> Result<()> {
        if before.legacy_record {
            return self.update_meta(before, after);
        }
        self.move_activity(before, after)?;
        self.put_counters(after)
    }

    /// `meta`'s counters record.
    fn put_counters(&mut self, meta: &SessionMeta) -> Result<()> {
        let record = meta
            .counters()
            .encode()
            .map_err(|e| meta.corrupt(format!("session counters {e}")))?;
        self.put_event_record(&keys::event_key(meta.number, keys::COUNTERS, 0), &record)
    }

    /// A stored session's metadata changing from `before` to `after` (same id and number): its
    /// `S` and counters records, and its `A` key when the activity moved.
    pub(crate) fn update_meta(&mut self, before: &SessionMeta, after: &SessionMeta) -> Result<()> {
        self.move_activity(before, after)?;
        self.put_meta(after)
    }

    /// The `A` key of a session whose activity moves from `before`'s to `after`'s.
    fn move_activity(&mut self, before: &SessionMeta, after: &SessionMeta) -> Result<()> {
        if before.activity_ms != after.activity_ms {
            self.batch.delete(
                CF_SESSIONS,
                &keys::activity_key(before.activity_ms, before.number),
            )?;
            self.put_session_key(
                &keys::activity_key(after.activity_ms, after.number),
                &after.id,
            )?;
        }
        Ok(())
    }

    /// Everything stored for `meta`'s number: its ranges and its `N`, `A`, `R`, `F` keys. Its
    /// `S` record stays unless `with_meta` (a successor of the same id overwrites it).
    pub(crate) fn remove_session(&mut self, meta: &SessionMeta, with_meta: bool) -> Result<()> {
        let number = meta.number;
        self.batch.delete_number_range(number)?;
        if let Some(base) = &meta.fork_of {
            self.batch
                .delete(CF_SESSIONS, &keys::fork_key(base.number, number))?;
        }
        if with_meta {
            self.batch.delete(CF_SESSIONS, &keys::meta_key(&meta.id))?;
        }
        self.batch.delete(CF_SESSIONS, &keys::number_key(number))?;
        self.batch
            .delete(CF_SESSIONS, &keys::activity_key(meta.activity_ms, number))?;
        self.batch
            .delete(CF_SESSIONS, &keys::created_key(meta.created_at, number))
    }

    /// Session `archived`'s bytes given up for the record of where they went: every range of
    /// its number emptied, then its `S` and counters records (`archived` set) written again, in
    /// this one batch (a later write in a batch wins over its range deletes). Its `N`, `A`, `R`
    /// and `F` keys stay, so listings and lineage still know it.
    pub(crate) fn replace_with_archive(&mut self, archived: &SessionMeta) -> Result<()> {
        self.batch.delete_number_range(archived.number)?;
        self.put_meta(archived)
    }

    /// Mark an import of `number` in progress (its partial writes are removed at open).
    pub(crate) fn mark_pending(&mut self, number: u64) -> Result<()> {
        self.put_session_key(&keys::pending_key(number), &[])
    }

    /// Remove whatever an import of `number` wrote, and its marker.
    pub(crate) fn discard(&mut self, number: u64) -> Result<()> {
        self.batch.delete_number_range(number)?;
        self.clear_pending(number)
    }

    /// The import of `number` is complete (or gone): remove its marker.
    pub(crate) fn clear_pending(&mut self, number: u64) -> Result<()> {
        self.batch.delete(CF_SESSIONS, &keys::pending_key(number))
    }

    fn put_session_key(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.batch.put(CF_SESSIONS, key, value)
    }

    /// Say that the open part makes `change` to a session: the change log records it in the
    /// same commit, and the session's subscribers and the store-wide feed learn of it once
    /// that commit is written (`store/feed.rs`). `events`: a live append's events as authored,
    /// given only when the session is followed ([`Store::is_followed`]), which its subscribers
    /// then take from memory.
    pub(crate) fn record_change(&mut self, change: Change, events: Option<Arc<[Value]>>) {
        self.batch.record_change(change, events);
    }

    /// Say that the open part appends `n` session batches (the group-commit metrics count them).
    pub(crate) fn carries_appends(&mut self, n: u64) {
        self.appends = n;
    }

    /// Commit with the configured durability (`context` names the write in errors), through
    /// the store's group-commit queue.
    pub(crate) fn commit(self, context: &str) -> Result<()> {
        self.commit_parts(context).into_iter().collect()
    }

    /// [`SessionBatch::commit`], with the outcome of each part closed by
    /// [`SessionBatch::end_part`], in order, then of the changes staged after the last (if any).
    pub(crate) fn commit_parts(mut self, context: &str) -> Vec<Result<()>> {
        if !self.batch.is_empty() || self.parts.is_empty() {
            self.end_last_part();
        }
        self.store
            .commit_parts(self.parts, Sync::AsConfigured, context)
    }

    /// Commit without an fsync of its own (an import's intermediate batches, a bulk import's
    /// sessions made durable together by one `Store::sync`).
    pub(crate) fn commit_unsynced(mut self, context: &str) -> Result<()> {
        self.end_last_part();
        self.store
            .commit_parts(self.parts, Sync::Deferred, context)
            .into_iter()
            .collect()
    }

    /// Close the changes staged after the last part as the batch's own: the system of record's
    /// for a [`SessionBatch::recorded`] batch, else this store's alone.
    fn end_last_part(&mut self) {
        let recording = match self.recorded {
            Some(proof) => Recording::Recorded(proof),
            None => Recording::Local,
        };
        self.end_part(recording);
    }

    /// Take what is staged, leaving this batch empty.
    pub(crate) fn take(&mut self) -> SessionBatch<'s> {
        SessionBatch {
            store: self.store,
            batch: self.batch.take(),
            recorded: self.recorded,
            parts: std::mem::take(&mut self.parts),
            closed: std::mem::take(&mut self.closed),
            appends: std::mem::take(&mut self.appends),
        }
    }
}

#[cfg(test)]
mod tests {
    use sessionlog_codec::format::header::parse_header;

    use super::SessionBatch;
    use crate::layout::keys::{self, CF_EVENTS, CF_SESSIONS};
    use crate::layout::meta::{SessionCounters, SessionMeta, SourceEncoding};
    use crate::store::Store;
    use crate::test_support::{empty, ev, seeded};

    fn header_line(id: &str) -> String {
        format!(
            r#"{{"type":"session","version":0,"id":"{id}","createdAt":1,"cwd":"/w","delegationDepth":0}}"#
        )
    }

    /// A creation's metadata under a freshly allocated number.
    fn allocated(store: &Store, id: &str) -> SessionMeta {
        let line = header_line(id);
        let header = parse_header(line.as_bytes()).expect("header");
        let record = format!("{line}\n").into_bytes();
        SessionMeta::new(
            store.allocate_number(),
            &header,
            record,
            SourceEncoding::Jsonl,
        )
    }

    fn reopen(store: Store) -> Store {
        let path = store.path().to_path_buf();
        let options = store.options.clone();
        drop(store);
        Store::open(path, options).expect("reopen")
    }

    /// Concurrent creations build their batches in one order and may commit them in the other:
    /// the stored counter must end past both numbers, or a reopened store hands the newer
    /// session's number to the next creation, whose keys then overwrite that session's.
    #[test]
    fn creations_committed_out_of_order_leave_the_counter_past_both() {
        let (_dir, store) = empty();
        let older = allocated(&store, "older");
        let mut older_batch = SessionBatch::new(&store);
        older_batch.insert_session(&older).expect("stage older");
        let newer = allocated(&store, "newer");
        let mut newer_batch = SessionBatch::new(&store);
        newer_batch.insert_session(&newer).expect("stage newer");
        newer_batch.commit("newer").expect("commit newer");
        older_batch.commit("older").expect("commit older");

        let store = reopen(store);
        assert_eq!(store.read_counter().expect("counter"), newer.number + 1);
        store
            .create_session(&header_line("third"), SourceEncoding::Jsonl)
            .expect("create third");
        let third = store.require_meta(b"third").expect("third");
        assert!(third.number > newer.number, "{} reused", third.number);
        assert_eq!(
            store.require_meta(b"newer").expect("newer").number,
            newer.number
        );
        assert_verifies(&store);
    }

    /// A counter left below a stored session's number (as builds before the merged counter could
    /// leave it) is named by `verify`, and the store opened over it still gives the next
    /// session a number no session holds.
    #[test]
    fn a_counter_below_a_stored_number_is_found_and_never_hands_it_out() {
        let (_dir, store) = empty();
        for id in ["a", "b"] {
            store
                .create_session(&header_line(id), SourceEncoding::Jsonl)
                .expect("create");
        }
        let b = store.require_meta(b"b").expect("b").number;
        store.raw_put(CF_SESSIONS, keys::COUNTER_KEY, &b.to_be_bytes());
        let report = store.verify(&[]).expect("verify");
        assert!(
            report.problems.iter().any(|p| p.session == format!("#{b}")
                && p.detail.contains("not below the session counter")),
            "{:?}",
            report.problems
        );

        let store = reopen(store);
        store
            .create_session(&header_line("c"), SourceEncoding::Jsonl)
            .expect("create c");
        let c = store.require_meta(b"c").expect("c").number;
        assert!(c > b, "number {c} is already session b's");
        assert_verifies(&store);
    }

    /// `verify` finds nothing wrong in `store`.
    fn assert_verifies(store: &Store) {
        let report = store.verify(&[]).expect("verify");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }

    /// Append to session `a` (after its seed batch) a user message from `kind` at `time`: a
    /// human prompt when `kind` is `user`.
    fn append_message(store: &Store, kind: &str, time: u64) {
        let event = format!(
            r#"{{"type":"user/message","time":{time},"data":{{"content":[],"source":{{"kind":"{kind}"}},"role":"user","id":"u2"}},"surfaceOp":"append"}}"#
        );
        store
            .append("a", Some(3), vec![ev(&event)])
            .expect("append");
    }

    /// Session `a`'s raw `S` record and counters record (`None` where none is stored).
    fn raw_records(store: &Store) -> (Vec<u8>, Option<SessionCounters>) {
        let meta = store.require_meta(b"a").expect("meta");
        let s = store
            .raw_get(CF_SESSIONS, &keys::meta_key(b"a"))
            .expect("S record");
        let counters = store
            .raw_get(CF_EVENTS, &keys::event_key(meta.number, keys::COUNTERS, 0))
            .map(|v| SessionCounters::decode(&v).expect("counters decode"));
        (s, counters)
    }

    /// An append writes the counters record alone: the `S` record stays as the creation wrote
    /// it, and every reader (after a reopen too) sees the counters record's counters.
    #[test]
    fn an_append_moves_only_the_counters_record() {
        let (_dir, store) = seeded();
        let (s_before, _) = raw_records(&store);
        append_message(&store, "tool", 5);
        let (s_after, counters) = raw_records(&store);
        assert_eq!(s_after, s_before, "an append rewrote the S record");
        let stale = SessionMeta::decode(b"a", &s_after).expect("decode");
        let meta = store.require_meta(b"a").expect("meta");
        assert_eq!((stale.events, meta.events), (0, 4));
        assert_eq!((stale.activity_ms, meta.activity_ms), (None, Some(2)));
        assert_eq!(counters, Some(meta.counters()));
        let listed = {
            let mut all = Vec::new();
            store
                .for_each_meta(&mut |m| {
                    all.push(m.clone());
                    Ok(())
                })
                .expect("list");
            all
        };
        assert_eq!(listed, vec![meta.clone()]);

        let store = reopen(store);
        assert_eq!(store.require_meta(b"a").expect("meta"), meta);
        assert_verifies(&store);
    }

    /// An append whose human prompt moves the session's activity moves its `A` key (the
    /// listing by activity) and its counters record, not its `S` record.
    #[test]
    fn an_append_moving_the_activity_moves_its_listing_key_not_its_s_record() {
        let (_dir, store) = seeded();
        let (s_before, _) = raw_records(&store);
        let number = store.require_meta(b"a").expect("meta").number;
        append_message(&store, "user", 9);
        let (s_after, counters) = raw_records(&store);
        assert_eq!(s_after, s_before);
        let meta = store.require_meta(b"a").expect("meta");
        assert_eq!(meta.activity_ms, Some(9));
        assert_eq!(counters, Some(meta.counters()));
        let listed = |activity| store.raw_get(CF_SESSIONS, &keys::activity_key(activity, number));
        assert_eq!(listed(Some(9)), Some(b"a".to_vec()));
        assert_eq!(listed(Some(2)), None);
        assert_verifies(&store);
    }

    /// A store written before counters records (version 5 `S` records, no counters record)
    /// reads each `S` record's own counters; the session's first append rewrites its `S` record
    /// as version 6, which a binary from before counters records refuses rather than read it
    /// without them, and later appends leave it alone.
    #[test]
    fn a_version_5_session_reads_its_own_counters_and_its_first_append_rewrites_it() {
        let (_dir, store) = seeded();
        let meta = store.require_meta(b"a").expect("meta");
        let mut old = meta.encode().expect("encode");
        old[0] = 5;
        let mut batch = SessionBatch::new(&store);
        batch
            .put_session_key(&keys::meta_key(b"a"), &old)
            .expect("stage put");
        batch
            .delete_event_record(&keys::event_key(meta.number, keys::COUNTERS, 0))
            .expect("stage delete");
        batch.commit("a store of before").expect("commit");
        // Opened anew, as by the binary after the one that wrote it: no write state cached.
        let store = reopen(store);
        assert_eq!(raw_records(&store), (old, None));
        let read = store.require_meta(b"a").expect("meta");
        assert!(read.legacy_record);
        assert_eq!(
            SessionMeta {
                legacy_record: false,
                ..read
            },
            meta
        );
        assert_verifies(&store);

        append_message(&store, "tool", 5);
        let (rewritten, counters) = raw_records(&store);
        assert_eq!(rewritten[0], 6);
        let meta = store.require_meta(b"a").expect("meta");
        assert_eq!((meta.events, meta.legacy_record), (4, false));
        assert_eq!(counters, Some(meta.counters()));
        let event = r#"{"type":"user/message","time":6,"data":{"content":[],"source":{"kind":"tool"},"role":"user","id":"u3"},"surfaceOp":"append"}"#;
        store.append("a", Some(4), vec![ev(event)]).expect("append");
        assert_eq!(raw_records(&store).0, rewritten);
        assert_eq!(store.require_meta(b"a").expect("meta").events, 5);
        assert_verifies(&store);
    }

    /// A damaged counters record is corrupt metadata, named with its session.
    #[test]
    fn a_damaged_counters_record_is_refused_naming_its_session() {
        let (_dir, store) = seeded();
        let number = store.require_meta(b"a").expect("meta").number;
        let key = keys::event_key(number, keys::COUNTERS, 0);
        let mut bytes = store.raw_get(CF_EVENTS, &key).expect("record");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        store.raw_put(CF_EVENTS, &key, &bytes);
        let err = store.require_meta(b"a").expect_err("damaged counters read");
        let text = err.to_string();
        assert!(
            text.contains("\"a\"") && text.contains("session counters crc32 mismatch"),
            "{text}"
        );
    }
}
