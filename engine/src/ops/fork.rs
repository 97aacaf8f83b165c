//! Fork and lineage. A fork shares its parent's prefix instead of copying it: the child's
//! metadata names the parent and the number of inherited events, and every read of seqs below
//! that boundary goes to the parent's storage (recursively for forks of forks). Forking costs
//! O(1) in the parent's size: the child gets a header, its `session/end-seed`, one surface
//! snapshot at the boundary, and an `F` lineage key; its projections start from the parent's
//! checkpoints.
//!
//! The child's file, as exported, is what DSH writes for a fork: the child header, then one seed
//! batch (the inherited events re-serialized by `JSON.stringify` and packed as one batch,
//! followed by the end-seed), then the child's own batches. [`Store::fork_file`] works that file
//! out by the same rules without writing anything (a fleet commits it whole instead of sharing
//! the prefix).

use sessionlog_codec::format::header::{author_header, parse_header, HeaderFields};
use sessionlog_codec::json::{self, Object, Value};
use sessionlog_codec::rules::open_turn::{CloseCause, OpenTurn};
use sessionlog_codec::rules::repair::{end_seed, needs_end_seed};
use sessionlog_codec::rules::surface::SurfaceFold;

use crate::error::{Error, Result};
use crate::layout::keys::{self, SESSION_RANGE_CFS, SNAP};
use crate::layout::meta::{now_ms, ForkBase, SessionMeta, SourceEncoding, Verdict};
use crate::layout::values::{encode, Snapshot};
use crate::ops::import::{ImportOptions, Landing};
use crate::store::{visit, Store};
use crate::write::indexer::fold_batch;
use sessionlog_codec::format::lines::author_lines;

/// Events re-serialized per packing pass when writing a fork's seed batch (a pass always ends
/// after a non-chunk event, so no packed run is cut).
const SEED_PASS_EVENTS: usize = 4096;

/// What `fork` created. Serializes as `{id, seed, endSeed, closers}`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkReport {
    /// The child's id.
    pub id: String,
    /// Events inherited (`seedLength`).
    pub seed: u64,
    /// Whether a `session/end-seed` was appended after the seed (V4: the `{inherited:true}`
    /// marker, always).
    pub end_seed: bool,
    /// V4: closer events appended after the marker (the boundary was inside a turn).
    pub closers: u64,
}

/// One session in a lineage tree. Serializes as `{id, parent, seedLength, depth}`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LineageEntry {
    /// Session id.
    pub id: String,
    /// Its parent, if it is a fork.
    pub parent: Option<String>,
    /// Events it inherited from its parent (its header's `seedLength`).
    #[serde(rename = "seedLength")]
    pub seed: Option<u64>,
    /// Distance from the session asked about: negative for ancestors, positive for descendants.
    pub depth: i64,
}

/// A fork's file as DSH writes it, worked out from the parent without writing anything
/// ([`Store::fork_file`]): what a store that is the index of a fleet commits through its system
/// of record instead of sharing the parent's prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkFile {
    /// The child's header line (without `\n`).
    pub header_line: String,
    /// The seed batch: the inherited events as DSH's fork writes them (`JSON.stringify`'d and
    /// packed), then the end-seed and closers.
    pub seed_batch: Vec<u8>,
    /// What the fork inherits and adds.
    pub report: ForkReport,
}

/// A fork worked out from its parent, before anything is written.
struct ForkPlan {
    parent: SessionMeta,
    header_line: String,
    /// The events the child writes itself after the seed: the end-seed and closers.
    own: Vec<Value>,
    report: ForkReport,
}

impl Store {
    /// Fork `source` after event `boundary` (default: its last event) into a new session `new_id`
    /// (DSH `SessionStore.fork`).
    pub fn fork(&self, source: &str, boundary: Option<u64>, new_id: &str) -> Result<ForkReport> {
        self.check_writable()?;
        // The child shares the parent's prefix in DSH 0.2's model: an older parent is migrated
        // first (its successor published, as DSH's next write-open would).
        if self.meta(new_id.as_bytes())?.is_none() {
            self.write_open(source)?;
        }
        let plan = self.plan_fork(source, boundary, new_id)?;
        self.commit_fork(&plan, new_id)?;
        Ok(plan.report)
    }

    /// The file DSH's fork of `source` after event `boundary` into `new_id` writes (as
    /// [`Store::fork`] would create it, refused by the same rules), read from the stored parent
    /// and written nowhere: the bytes a fleet commits for the child.
    pub fn fork_file(&self, source: &str, boundary: Option<u64>, new_id: &str) -> Result<ForkFile> {
        let plan = self.plan_fork(source, boundary, new_id)?;
        let mut seed_batch = Vec::new();
        self.inherited_text(&plan.parent, plan.report.seed, &mut |text| {
            seed_batch.extend_from_slice(text);
            Ok(())
        })?;
        let mut own = String::new();
        author_lines(plan.parent.version, &plan.own, &mut own, &mut Vec::new());
        seed_batch.extend_from_slice(own.as_bytes());
        Ok(ForkFile {
            header_line: plan.header_line,
            seed_batch,
            report: plan.report,
        })
    }

    /// Work out the fork of `source` after `boundary` into `new_id` by DSH's rules: refused
    /// (with DSH's codes) for an existing id, a missing or unloadable parent, a boundary past
    /// its end, or (V0) one inside an open turn.
    fn plan_fork(&self, source: &str, boundary: Option<u64>, new_id: &str) -> Result<ForkPlan> {
        let fail = |code: &'static str, message: String| Err(Error::Fork { code, message });
        if self.meta(new_id.as_bytes())?.is_some() {
            return fail(
                "SESSION_ALREADY_EXISTS",
                format!("session \"{new_id}\" already exists"),
            );
        }
        let parent = self
            .meta(source.as_bytes())?
            .ok_or_else(|| Error::Fork {
                code: "SESSION_NOT_FOUND",
                message: format!("session \"{source}\" not found"),
            })?
            .held()?;
        parent.require_surface_model("fork")?;
        if parent.verdict != Verdict::Clean || parent.surface_error.is_some() {
            return fail(
                "SESSION_NOT_LOADABLE",
                format!(
                    "session \"{source}\" cannot be forked: DSH would not load it ({})",
                    parent.verdict
                ),
            );
        }
        let seed = match (boundary, parent.events) {
            (None, n) => n,
            (Some(b), n) if b < n => b + 1,
            (Some(b), n) => {
                let last = n
                    .checked_sub(1)
                    .map_or_else(|| "none".to_owned(), |l| l.to_string());
                return fail("INVALID_BOUNDARY", format!("fork boundary {b} does not exist in session \"{source}\" (last seq: {last})"));
            }
        };
        if parent.version == 4 {
            return self.plan_fork_v4(parent, seed, new_id);
        }
        if let Some(at) = seed.checked_sub(1) {
            let open = self.state_at(source, "openTurn", Some(at))?;
            if open != Value::Null {
                let turn = json::js_string_of(&open);
                return fail(
                    "OPEN_TURN",
                    format!(
                        "fork boundary {at} in session \"{source}\" ends inside open turn {turn}"
                    ),
                );
            }
        }
        let last = match seed.checked_sub(1) {
            Some(at) => self.event_at(&parent, at)?,
            None => None,
        };
        let with_end_seed = needs_end_seed(last.as_ref());
        let now = now_ms();
        let header_line = author_header(&HeaderFields {
            id: new_id.into(),
            created_at: now,
            cwd: self.header_cwd(&parent)?,
            parent_session: Some(source.into()),
            seed_length: Some(i64::try_from(seed).unwrap_or(i64::MAX)),
            ..HeaderFields::default()
        });
        let own = if with_end_seed {
            vec![end_seed(seed, now)]
        } else {
            Vec::new()
        };
        Ok(ForkPlan {
            parent,
            header_line,
            own,
            report: ForkReport {
                id: new_id.into(),
                seed,
                end_seed: with_end_seed,
                closers: 0,
            },
        })
    }

    /// DSH 0.2's fork of a V4 session (`buildForkSeed`): the child inherits events `0..seed`,
    /// then holds the `{inherited:true}` end-seed (the parent's boundary time) and, when the
    /// boundary falls inside a turn, the `forked` closers. No `OPEN_TURN` refusal. An empty
    /// parent gives a child holding only the marker, stamped now.
    fn plan_fork_v4(&self, parent: SessionMeta, seed: u64, new_id: &str) -> Result<ForkPlan> {
        let source = parent.id_lossy();
        let now = now_ms();
        let own: Vec<Value> = match seed.checked_sub(1) {
            None => vec![inherited_marker(0, Value::from(now))],
            Some(at) => {
                let last = self.event_at(&parent, at)?;
                let time = last
                    .as_ref()
                    .and_then(Value::as_object)
                    .and_then(|o| o.get("time"))
                    .cloned()
                    .unwrap_or(Value::Null);
                let marker = inherited_marker(seed, time);
                let mut turn = self.open_turn_at(&parent, at)?;
                turn.observe(&marker);
                std::iter::once(marker)
                    .chain(turn.closers(CloseCause::Forked))
                    .collect()
            }
        };
        let header_line = author_header(&HeaderFields {
            id: new_id.into(),
            created_at: now,
            cwd: self.header_cwd(&parent)?,
            parent_session: Some(source.clone()),
            seed_length: Some(i64::try_from(seed).unwrap_or(i64::MAX)),
            version: 4,
            ..HeaderFields::default()
        });
        Ok(ForkPlan {
            report: ForkReport {
                id: new_id.into(),
                seed,
                end_seed: true,
                closers: own.len().saturating_sub(1) as u64,
            },
            parent,
            header_line,
            own,
        })
    }

    /// The last human prompt's time in `source`'s first `seed` events (the `activity` unit at the
    /// boundary, from its nearest checkpoint): the listing activity a fork inherits.
    fn inherited_activity(&self, source: &str, seed: u64) -> Result<Option<i64>> {
        let Some(at) = seed.checked_sub(1) else {
            return Ok(None);
        };
        Ok(self
            .state_at(source, "activity", Some(at))?
            .as_object()
            .and_then(|a| a.get("lastPromptAt"))
            .and_then(Value::as_safe_integer))
    }

    /// Store the fork `new_id` `plan` describes, sharing its parent's prefix: its header, a
    /// surface snapshot at the boundary (the parent's surface there), its own events (folded and
    /// indexed after the snapshot, written as one batch in the parent's format), the lineage key
    /// and its metadata. Atomic, like an import.
    fn commit_fork(&self, plan: &ForkPlan, new_id: &str) -> Result<()> {
        let (parent, header_line, seed, own) =
            (&plan.parent, &plan.header_line, plan.report.seed, &plan.own);
        let activity = self.inherited_activity(&parent.id_lossy(), seed)?;
        let base = match seed.checked_sub(1) {
            Some(at) => self.surface_fold_at(parent, at)?,
            None => SurfaceFold::new().with_model(parent.require_surface_model("fork")?),
        };
        let header = parse_header(header_line.as_bytes()).map_err(|e| Error::Rejected {
            id: new_id.into(),
            seq: None,
            rule: format!("header: {e}"),
        })?;
        let mut record = header_line.as_bytes().to_vec();
        record.push(b'\n');
        self.import_session(
            &format!("fork {new_id}"),
            &header,
            &ImportOptions::default(),
            Landing::default(),
            |mut w| {
                let mut meta = SessionMeta {
                    events: seed,
                    activity_ms: activity,
                    inherited_cut: (parent.version >= 2).then_some(seed),
                    fork_of: Some(ForkBase {
                        number: parent.number,
                        id: parent.id.clone(),
                        seed,
                    }),
                    ..SessionMeta::new(w.number(), &header, record.clone(), SourceEncoding::Jsonl)
                };
                let mut fold = base;
                if let Some(at) = seed.checked_sub(1) {
                    let snap = encode(&Snapshot::of(&fold))?;
                    w.put_surface(&keys::event_key(meta.number, SNAP, at), snap)?;
                }
                let folded = fold_batch(self, &meta, &mut fold, own)?.map_err(|r| {
                    meta.corrupt(format!(
                        "fork event at seq {} breaks the surface: {}",
                        r.seq, r.message
                    ))
                })?;
                for (key, value) in folded.puts {
                    w.put_surface(&key, value)?;
                }
                let (mut text, mut members) = (String::new(), Vec::new());
                author_lines(meta.version, own, &mut text, &mut members);
                for (line, count) in text.split_terminator('\n').zip(&members) {
                    w.put_line(meta.events, *count, 1, line.as_bytes())?;
                    meta.events += u64::from(*count);
                }
                meta.body_lines = members.len() as u64;
                meta.next_batch = 2;
                meta.surface_since_snapshot = folded.since_snapshot;
                w.finish(meta, false)
            },
        )?;
        Ok(())
    }

    /// The open-turn state after event `at`: folded from the last turn boundary at or before
    /// it, found by scanning back in growing windows (a turn is short next to a long log).
    fn open_turn_at(&self, meta: &SessionMeta, at: u64) -> Result<OpenTurn> {
        let mut window = 256u64;
        loop {
            let from = at.saturating_sub(window - 1);
            let mut events = Vec::new();
            self.events_of(meta, from, Some(at), &mut |_, e| {
                events.push(e.clone());
                Ok(())
            })?;
            let boundary = events.iter().rposition(|e| {
                let ty = e
                    .as_object()
                    .and_then(|o| o.get("type"))
                    .and_then(Value::as_str);
                matches!(ty, Some("turn/start" | "turn/end"))
            });
            if boundary.is_some() || from == 0 {
                let mut turn = OpenTurn::default();
                for e in &events[boundary.unwrap_or(0)..] {
                    turn.observe(e);
                }
                return Ok(turn);
            }
            window = window.saturating_mul(4);
        }
    }

    /// The `cwd` of a stored session's header (a fork inherits it).
    fn header_cwd(&self, meta: &SessionMeta) -> Result<Option<String>> {
        Ok(meta
            .parsed_header()?
            .object
            .get("cwd")
            .and_then(Value::as_str)
            .map(str::to_owned))
    }

    /// The fork's seed batch text as DSH writes it: the inherited events, `JSON.stringify`'d and
    /// packed as one batch (V0) or one row each with ranges encoded (V4), passed to `out` a
    /// piece at a time.
    pub(crate) fn seed_text(
        &self,
        meta: &SessionMeta,
        out: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let Some(base) = &meta.fork_of else {
            return Ok(());
        };
        let parent = self.require_meta(&base.id)?;
        self.inherited_text(&parent, base.seed, out)
    }

    /// The first `seed` events of `parent` as a fork's seed batch writes them (see
    /// [`Store::seed_text`]; a fork is written in its parent's format).
    fn inherited_text(
        &self,
        parent: &SessionMeta,
        seed: u64,
        out: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let Some(last) = seed.checked_sub(1) else {
            return Ok(());
        };
        let version = parent.version;
        let mut pending: Vec<Value> = Vec::new();
        let mut text = String::new();
        let mut members = Vec::new();
        let mut emit = |pending: &mut Vec<Value>, text: &mut String| -> Result<()> {
            text.clear();
            author_lines(version, pending, text, &mut members);
            members.clear();
            pending.clear();
            out(text.as_bytes())
        };
        self.events_of(parent, 0, Some(last), &mut |_, e| {
            pending.push(e.clone());
            let ty = e
                .as_object()
                .and_then(|o| o.get("type"))
                .and_then(Value::as_str);
            if pending.len() >= SEED_PASS_EVENTS && ty != Some("assistant/chunk") {
                emit(&mut pending, &mut text)?;
            }
            Ok(())
        })?;
        emit(&mut pending, &mut text)
    }

    /// `id`'s ancestors (negative depth, nearest first) and descendants (positive depth).
    pub fn lineage(&self, id: &str) -> Result<Vec<LineageEntry>> {
        let meta = self.require_record(id.as_bytes())?;
        let entry = |m: &SessionMeta, depth: i64| LineageEntry {
            id: m.id_lossy(),
            parent: m
                .fork_of
                .as_ref()
                .map(|b| String::from_utf8_lossy(&b.id).into_owned()),
            seed: m.fork_of.as_ref().map(|b| b.seed),
            depth,
        };
        let mut out = vec![entry(&meta, 0)];
        let (mut cursor, mut depth) = (meta.clone(), 0);
        while let Some(base) = cursor.fork_of.clone() {
            depth -= 1;
            cursor = self.require_record(&base.id)?;
            out.push(entry(&cursor, depth));
        }
        let mut frontier = vec![(meta.number, 0i64)];
        while let Some((number, d)) = frontier.pop() {
            for child in self.children(number)? {
                let m = self.require_record(&child)?;
                frontier.push((m.number, d + 1));
                out.push(entry(&m, d + 1));
            }
        }
        Ok(out)
    }

    /// Bytes (keys and values) stored for session `id` itself: its metadata and its own ranges
    /// of lines, frames, tail, surface index and checkpoints. A fork's shared prefix is not
    /// counted: it is the parent's.
    pub fn stored_bytes(&self, id: &str) -> Result<u64> {
        let meta = self.require_meta(id.as_bytes())?;
        let mut total = meta.encode()?.len() as u64;
        for name in SESSION_RANGE_CFS {
            let mut it = self.session_iter_cf(name, meta.number)?;
            it.seek(keys::session_start(meta.number));
            visit(&mut it, "measuring a session".into(), &mut |k, v| {
                total += (k.len() + v.len()) as u64;
                Ok(true)
            })?;
        }
        Ok(total)
    }
}

/// DSH 0.2's inherited-cut marker: `{type:"session/end-seed", seq, time, data:{inherited:true}}`.
fn inherited_marker(seq: u64, time: Value) -> Value {
    Value::Object(
        Object::new()
            .with("type", "session/end-seed")
            .with("seq", seq as f64)
            .with("time", time)
            .with("data", Object::new().with("inherited", true)),
    )
}
