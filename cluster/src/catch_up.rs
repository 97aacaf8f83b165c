//! Catching a host's store up with PostgreSQL: the batches of a session from the first its
//! local copy lacks, applied as replicated batches (kept verbatim, read by DSH's reader, never
//! offered back to PostgreSQL), then its deleted or restored state, applied as a recorded change.
//! A session the host never held is built from its header and every batch, so a host that
//! restarts with an empty disk loses nothing.
//!
//! Invariants: local batch numbers are PostgreSQL's (the header is batch 0, each committed batch
//! the next), so the local copy's next batch says where catching up starts; a local copy is only
//! caught up when it is of the session PostgreSQL holds, not of an earlier one under the same id
//! (its header differs, or the id was once purged and its first bytes differ from PostgreSQL's), which is removed and
//! built again; and a local copy ahead of PostgreSQL's same session is refused rather than
//! trusted. Pages are read by bytes: at most [`PAGE_BYTES`] a query, or one batch larger alone.
//!
//! A host may commit batches of its own to a session it holds while catching it up (catch-ups
//! are one at a time, on the control connection; appends are not). Such a batch reaches
//! PostgreSQL first and the local store right after, with the same number and bytes (the commit
//! hook's invariant), so the local copy can only be ahead of what PostgreSQL said *earlier*: a
//! copy ahead of the row it was given is held against the row read again after the copy was
//! read, and only a copy still ahead of that has diverged; and a batch being applied that the
//! copy meanwhile took from the host's own commit is that very batch, so catching up goes on
//! after the copy's end.
//!
//! The row a catch-up starts from was read before its batches are: the session may be purged,
//! or purged and created again, in between. Every read of batches is therefore bound to the
//! session the row describes (its header, in the same statement), and a read that finds it gone
//! or short (fewer batches than the row promised) stops the catch-up before anything more is
//! applied: the row is read again and the catch-up starts over from it, or, with no row left,
//! the local copy is removed (purged) and the session refused as unknown. So a local copy only
//! ever holds a prefix of a session PostgreSQL held, never a header without the batches the row
//! counted (a state no session was ever in) nor batches of another session after its header.

use std::time::Duration;

use sessionlog_codec::format::zstd::FrameDecoder;
use sessionlog_engine::{AppendItem, RecordedChange, SessionSummary, SourceEncoding, Store};

use crate::error::{Error, Result};
use crate::ownership::{self, SessionRow};
use crate::pg::Pg;

/// The bytes a page of batches holds at most (a larger batch makes a page of its own): a host
/// catching up a long session holds one page in memory at a time.
const PAGE_BYTES: i64 = 8 << 20;
/// Batch sizes read per query to plan pages.
const SIZES: i64 = 10_000;
/// How long reading keeps trying PostgreSQL.
const PATIENCE: Duration = Duration::from_secs(60);
/// How many times a catch-up starts over on a session replaced in PostgreSQL meanwhile.
const ATTEMPTS: usize = 3;

/// Bring the local copy of `row`'s session up to PostgreSQL's; the batches applied. Starts over
/// from the row read again when the session is replaced meanwhile; refused as unknown, its local
/// copy removed, when it is purged meanwhile (see the module docs).
pub(crate) fn catch_up(pg: &mut Pg, store: &Store, row: &SessionRow) -> Result<u64> {
    let id = row.id.as_str();
    let mut current = row.clone();
    for _ in 0..ATTEMPTS {
        if let Some(applied) = catch_up_to(pg, store, &current)? {
            return Ok(applied);
        }
        match pg.retrying("reading a session", PATIENCE, |c| ownership::row(c, id))? {
            Some(now) => current = now,
            None => {
                // Purged since the row was read: so is any copy of it here.
                if local_copy(store, id)?.is_some() {
                    store.apply_recorded(&RecordedChange::Purged(vec![id.to_owned()]))?;
                }
                return Err(Error::UnknownSession(id.to_owned()));
            }
        }
    }
    Err(Error::Diverged {
        id: id.to_owned(),
        detail: format!(
            "replaced in PostgreSQL {ATTEMPTS} times while this host caught it up; try again"
        ),
    })
}

/// Catch the local copy up to `row`'s session; the batches applied, or `None` when that session
/// is no longer in PostgreSQL (purged, or replaced by another under its id), found before any
/// batch it does not hold was applied.
fn catch_up_to(pg: &mut Pg, store: &Store, row: &SessionRow) -> Result<Option<u64>> {
    let id = row.id.as_str();
    let mut local = local_copy(store, id)?;
    // Ahead of the row given: read it again, now that PostgreSQL holds every batch of this
    // host's that the copy holds (see the module docs).
    let reread;
    let row = match &local {
        Some(copy) if copy.batches > batches_of(row) => {
            match pg.retrying("reading a session", PATIENCE, |c| ownership::row(c, id))? {
                Some(now) => {
                    reread = now;
                    &reread
                }
                // Purged since the row was read: [`catch_up`] removes the copy.
                None => return Ok(None),
            }
        }
        _ => row,
    };
    if let Some(copy) = &local {
        if !same_session(pg, store, row, copy)? {
            // An earlier session under this id, purged since: built again from PostgreSQL.
            store.apply_recorded(&RecordedChange::Purged(vec![id.to_owned()]))?;
            if local_copy(store, id)?.is_some() {
                return Err(Error::Diverged {
                    id: id.to_owned(),
                    detail: "the local store keeps an earlier session under this id (a fork of \
                             it reads its prefix), and PostgreSQL holds another"
                        .into(),
                });
            }
            local = None;
        }
    }
    let mut next = local.as_ref().map_or(1, |s| s.batches);
    let target = batches_of(row);
    if next > target {
        return Err(Error::Diverged {
            id: id.to_owned(),
            detail: format!(
                "the local store holds batches up to {}, PostgreSQL only up to {}",
                next - 1,
                target.saturating_sub(1)
            ),
        });
    }
    // A deleted copy takes no batches: restored first, deleted again below if PostgreSQL says.
    let mut deleted = local.as_ref().is_some_and(|s| s.deleted_at_ms.is_some());
    if deleted && (next < target || !row.deleted) {
        store.apply_recorded(&RecordedChange::Undeleted(id.to_owned()))?;
        deleted = false;
    }
    let encoding = if row.zstd {
        SourceEncoding::JsonlZstd
    } else {
        SourceEncoding::Jsonl
    };
    let mut create = local.is_none().then(|| header_line(row)).transpose()?;
    let mut applied = 0;
    'pages: while next < target || create.is_some() {
        let from = i64::try_from(next).unwrap_or(i64::MAX);
        let Some(sizes) = batch_sizes(pg, row, from)? else {
            return Ok(None);
        };
        if sizes.is_empty() {
            if next < target {
                // Fewer batches than the row counted: another session under this id now.
                return Ok(None);
            }
            if let Some(header) = create.take() {
                // Created with no events: the header alone.
                apply(
                    store,
                    AppendItem::replicated(id, Some(0), Vec::new()).creating(header, encoding),
                )?;
            }
            break;
        }
        for (first, last) in pages(&sizes, PAGE_BYTES) {
            let page = pg.retrying("catching a session up", PATIENCE, |client| {
                client.query(
                    "SELECT b.batch, b.first_seq, b.bytes, b.crc \
                     FROM sessionlog.sessions s JOIN sessionlog.batches b \
                       ON b.root_id = s.root_id AND b.session_id = s.id \
                     WHERE s.root_id = $1 AND s.id = $2 AND s.header = $5 \
                       AND b.batch BETWEEN $3 AND $4 \
                     ORDER BY b.batch",
                    &[&row.root, &id, &first, &last, &row.header],
                )
            })?;
            if i64::try_from(page.len()).ok() != Some(last - first + 1) {
                // Removed since the sizes were read (purged, maybe created again).
                return Ok(None);
            }
            for r in &page {
                let batch: i64 = r.get(0);
                let first_seq: i64 = r.get(1);
                let bytes: Vec<u8> = r.get(2);
                let crc: i64 = r.get(3);
                if u64::try_from(batch).ok() != Some(next)
                    || i64::from(crc32fast::hash(&bytes)) != crc
                {
                    return Err(Error::Diverged {
                        id: id.to_owned(),
                        detail: format!(
                            "PostgreSQL's batch {batch} is not batch {next} with its crc32"
                        ),
                    });
                }
                let mut item = AppendItem::replicated(id, u64::try_from(first_seq).ok(), bytes);
                if let Some(header) = &create {
                    item = item.creating(header.clone(), encoding);
                }
                if let Err(e) = apply(store, item) {
                    // Refused because the copy took this batch from the host's own commit
                    // meanwhile (see the module docs): on after the copy's end.
                    match local_copy(store, id)? {
                        Some(now) if now.batches > next => {
                            next = now.batches;
                            create = None;
                            continue 'pages;
                        }
                        _ => return Err(e),
                    }
                }
                create = None;
                next += 1;
                applied += 1;
            }
        }
    }
    if row.deleted != deleted {
        store.apply_recorded(&match row.deleted {
            true => RecordedChange::Deleted(id.to_owned()),
            false => RecordedChange::Undeleted(id.to_owned()),
        })?;
    }
    Ok(Some(applied))
}

/// The batches `row`'s session holds in PostgreSQL, its header counted as batch 0.
fn batches_of(row: &SessionRow) -> u64 {
    u64::try_from(row.next_batch).unwrap_or(0)
}

/// Whether the local copy of `row`'s session is that session as `row` has it (its batches,
/// header and deletion), or `row` is of a deleted session the store has no copy of: nothing to
/// catch up. `reused`: the ids PostgreSQL says were ever purged, whose copy may be of an earlier
/// session under the same id and is never taken as current here.
pub(crate) fn is_current(
    store: &Store,
    row: &SessionRow,
    reused: &std::collections::HashSet<String>,
) -> Result<bool> {
    Ok(match local_copy(store, &row.id)? {
        None => row.deleted,
        Some(copy) => {
            !reused.contains(&row.id)
                && copy.batches == batches_of(row)
                && copy.deleted_at_ms.is_some() == row.deleted
                && copy.header == header_line(row)?
        }
    })
}

/// The local copy of session `id`, if the store keeps one.
pub(crate) fn local_copy(store: &Store, id: &str) -> Result<Option<SessionSummary>> {
    match store.summary(id) {
        Ok(summary) => Ok(Some(summary)),
        Err(sessionlog_engine::Error::UnknownSession { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Whether `copy`, the local copy of `row`'s session, is of that session rather than of an
/// earlier one under the same id. Its header must be PostgreSQL's; and when the id was once
/// purged (the only way it can name two sessions), its bytes must be PostgreSQL's first ones.
fn same_session(
    pg: &mut Pg,
    store: &Store,
    row: &SessionRow,
    copy: &SessionSummary,
) -> Result<bool> {
    if copy.header != header_line(row)? {
        return Ok(false);
    }
    let id = row.id.as_str();
    let reused = pg
        .retrying("reading a session", PATIENCE, |c| {
            c.query_opt("SELECT 1 FROM sessionlog.purged WHERE id = $1", &[&id])
        })?
        .is_some();
    if !reused {
        return Ok(true);
    }
    // The batches both hold: a copy still ahead of PostgreSQL is found diverged after this.
    let both = copy.batches.min(batches_of(row));
    // PostgreSQL's crc32 of the file up to there, from the header's bytes and each batch's
    // crc32 and length; then the copy's first bytes, as it exports.
    let upto = i64::try_from(both).unwrap_or(i64::MAX);
    let batches = pg.retrying("reading a session's checksums", PATIENCE, |c| {
        c.query(
            "SELECT crc, octet_length(bytes)::bigint FROM sessionlog.batches \
             WHERE root_id = $1 AND session_id = $2 AND batch < $3 ORDER BY batch",
            &[&row.root, &id, &upto],
        )
    })?;
    if u64::try_from(batches.len()).ok() != Some(both.saturating_sub(1)) {
        return Ok(false);
    }
    let mut fleet = Checksum::default();
    fleet.hasher.update(&row.header);
    fleet.len = row.header.len() as u64;
    for b in &batches {
        let (crc, len): (i64, i64) = (b.get(0), b.get(1));
        let len = u64::try_from(len).unwrap_or(0);
        let crc = u32::try_from(crc).unwrap_or(0);
        fleet
            .hasher
            .combine(&crc32fast::Hasher::new_with_initial_len(crc, len));
        fleet.len += len;
    }
    begins_with(store, id, &fleet)
}

/// Whether the local copy of `id` begins with the bytes `fleet` sums up. Only its beginning is
/// compared: the host's own commits may have added batches to the copy since its batches were
/// counted, and a copy that grew so is still the same session.
fn begins_with(store: &Store, id: &str, fleet: &Checksum) -> Result<bool> {
    let mut mine = Prefix {
        want: fleet.len,
        sum: Checksum::default(),
        seen: 0,
    };
    store.export(id, None, &mut mine)?;
    Ok(mine.seen >= fleet.len && mine.sum.hasher.finalize() == fleet.hasher.clone().finalize())
}

/// The crc32 and the length of some bytes.
#[derive(Default)]
struct Checksum {
    hasher: crc32fast::Hasher,
    len: u64,
}

/// A writer that sums up the first `want` bytes it is given and counts them all.
struct Prefix {
    want: u64,
    sum: Checksum,
    seen: u64,
}

impl std::io::Write for Prefix {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = usize::try_from(self.want - self.sum.len).unwrap_or(usize::MAX);
        let taken = &buf[..buf.len().min(room)];
        self.sum.hasher.update(taken);
        self.sum.len += taken.len() as u64;
        self.seen += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The numbers and byte lengths of `row`'s batches from `from` on, at most [`SIZES`] of them;
/// `None` when PostgreSQL no longer holds `row`'s session (no row of its id with its header).
fn batch_sizes(pg: &mut Pg, row: &SessionRow, from: i64) -> Result<Option<Vec<(i64, i64)>>> {
    let id = row.id.as_str();
    let rows = pg.retrying("catching a session up", PATIENCE, |client| {
        client.query(
            "SELECT b.batch, octet_length(b.bytes)::bigint \
             FROM sessionlog.sessions s LEFT JOIN sessionlog.batches b \
               ON b.root_id = s.root_id AND b.session_id = s.id AND b.batch >= $3 \
             WHERE s.root_id = $1 AND s.id = $2 AND s.header = $5 \
             ORDER BY b.batch LIMIT $4",
            &[&row.root, &id, &from, &SIZES, &row.header],
        )
    })?;
    if rows.is_empty() {
        return Ok(None);
    }
    // The session's row alone (no batch from `from` on) reads as one row of nulls.
    Ok(Some(
        rows.iter()
            .filter_map(|r| Some((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?)))
            .collect(),
    ))
}

/// The pages (first and last batch) `sizes` (batch numbers with their byte lengths, in order)
/// are read in: each holds at most `budget` bytes, or a single batch larger than that.
fn pages(sizes: &[(i64, i64)], budget: i64) -> Vec<(i64, i64)> {
    let mut pages = Vec::new();
    let mut current: Option<(i64, i64, i64)> = None;
    for &(batch, len) in sizes {
        current = match current {
            Some((first, _, bytes)) if bytes.saturating_add(len) <= budget => {
                Some((first, batch, bytes + len))
            }
            Some((first, last, _)) => {
                pages.push((first, last));
                Some((batch, batch, len))
            }
            None => Some((batch, batch, len)),
        };
    }
    if let Some((first, last, _)) = current {
        pages.push((first, last));
    }
    pages
}

/// Append one replicated item.
fn apply(store: &Store, item: AppendItem) -> Result<()> {
    store
        .append_many(vec![item])
        .pop()
        .unwrap_or_else(|| Err(sessionlog_engine::Error::Internal("no outcome".into())))?;
    Ok(())
}

/// The header line (without its newline) of `row`'s session.
fn header_line(row: &SessionRow) -> Result<String> {
    let plain = match row.zstd {
        false => row.header.clone(),
        true => {
            let mut plain = Vec::new();
            FrameDecoder::new()
                .and_then(|mut d| d.decode_frame(&row.header, 0, &mut plain))
                .map_err(|e| Error::Diverged {
                    id: row.id.clone(),
                    detail: format!("its header frame in PostgreSQL does not decode: {e}"),
                })?;
            plain
        }
    };
    let line = plain.strip_suffix(b"\n").unwrap_or(&plain);
    String::from_utf8(line.to_vec()).map_err(|_| Error::Diverged {
        id: row.id.clone(),
        detail: "its header in PostgreSQL is not text".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::{begins_with, pages, Checksum};
    use sessionlog_codec::format::event::NewEvent;
    use sessionlog_engine::{Options, SourceEncoding, Store};

    fn prompt(n: u64) -> NewEvent {
        let text = format!(
            r#"{{"type":"user/message","time":{n},"data":{{"content":[{{"type":"text","text":"m{n}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{n}"}},"surfaceOp":"append"}}"#
        );
        NewEvent::from_value(&sessionlog_codec::json::parse(&text).expect("json")).expect("event")
    }

    fn sum(bytes: &[u8]) -> Checksum {
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(bytes);
        Checksum {
            hasher,
            len: bytes.len() as u64,
        }
    }

    /// A copy that took a batch of the host's own since its batches were counted is the same
    /// session: catching it up must not remove it and build it again (readers would see it
    /// part-built, down to its header).
    #[test]
    fn a_copy_that_grew_since_it_was_counted_is_the_same_session() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path().join("store"), Options::default()).expect("open");
        let header = r#"{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","delegationDepth":0}"#;
        store
            .create(header, SourceEncoding::Jsonl, vec![prompt(1)])
            .expect("create");
        let counted = store.export_bytes("s").expect("export");
        store.append("s", None, vec![prompt(2)]).expect("append");

        assert!(begins_with(&store, "s", &sum(&counted)).expect("compare"));
        let mut other = counted.clone();
        *other.last_mut().expect("bytes") ^= 1;
        assert!(!begins_with(&store, "s", &sum(&other)).expect("compare"));
        let whole = store.export_bytes("s").expect("export");
        let mut longer = whole.clone();
        longer.extend_from_slice(b"{}\n");
        assert!(!begins_with(&store, "s", &sum(&longer)).expect("compare"));
        assert!(begins_with(&store, "s", &sum(&whole)).expect("compare"));
    }

    #[test]
    fn a_page_holds_at_most_the_budget_or_one_larger_batch() {
        let sizes = [(1, 4), (2, 4), (3, 3), (4, 20), (5, 1), (6, 10), (7, 10)];
        assert_eq!(
            pages(&sizes, 10),
            vec![(1, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7)]
        );
        assert_eq!(pages(&sizes, 11), vec![(1, 3), (4, 4), (5, 6), (7, 7)]);
        assert_eq!(pages(&sizes, 1000), vec![(1, 7)]);
        assert_eq!(pages(&[(9, 0)], 0), vec![(9, 9)]);
        assert_eq!(pages(&[], 10), Vec::<(i64, i64)>::new());
    }

    #[test]
    fn every_batch_is_in_one_page_in_order() {
        let sizes: Vec<(i64, i64)> = (1..=500).map(|b| (b, (b * 7919) % 97)).collect();
        for budget in [0, 1, 50, 96, 97, 500, 10_000] {
            let mut next = 1;
            for (first, last) in pages(&sizes, budget) {
                assert_eq!(first, next, "budget {budget}");
                assert!(last >= first);
                let bytes: i64 = sizes[(first - 1) as usize..last as usize]
                    .iter()
                    .map(|&(_, len)| len)
                    .sum();
                assert!(bytes <= budget || first == last, "budget {budget}: {bytes}");
                next = last + 1;
            }
            assert_eq!(next, 501, "budget {budget}");
        }
    }
}
