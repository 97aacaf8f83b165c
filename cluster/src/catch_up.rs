//! Catching a host's store up with PostgreSQL: the batches of a session from the first its
//! local copy lacks, applied as replicated batches (kept verbatim, read by DSH's reader, never
//! offered back to PostgreSQL). A session the host never held is built from its header and
//! every batch, so a host that restarts with an empty disk loses nothing.
//!
//! Invariant: local batch numbers are PostgreSQL's (the header is batch 0, each committed batch
//! the next), so the local copy's next batch says where catching up starts; a local copy ahead
//! of PostgreSQL is refused rather than trusted.

use std::time::Duration;

use sessionlog_codec::format::zstd::FrameDecoder;
use sessionlog_engine::{AppendItem, SourceEncoding, Store};

use crate::error::{Error, Result};
use crate::ownership::SessionRow;
use crate::pg::Pg;

/// Batches read per query.
const PAGE: i64 = 1000;
/// How long reading keeps trying PostgreSQL.
const PATIENCE: Duration = Duration::from_secs(60);

/// Bring the local copy of `row`'s session up to PostgreSQL's; the batches applied.
pub(crate) fn catch_up(pg: &mut Pg, store: &Store, row: &SessionRow) -> Result<u64> {
    let id = row.id.as_str();
    let local = match store.summary(id) {
        Ok(summary) => Some(summary),
        Err(sessionlog_engine::Error::UnknownSession { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let mut next = local.as_ref().map_or(1, |s| s.batches);
    let target = u64::try_from(row.next_batch).unwrap_or(0);
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
    let encoding = if row.zstd {
        SourceEncoding::JsonlZstd
    } else {
        SourceEncoding::Jsonl
    };
    let mut create = local.is_none().then(|| header_line(row)).transpose()?;
    let mut applied = 0;
    while next < target || create.is_some() {
        let from = i64::try_from(next).unwrap_or(i64::MAX);
        let page = pg.retrying("catching a session up", PATIENCE, |client| {
            client.query(
                "SELECT batch, first_seq, bytes, crc FROM sessionlog.batches \
                 WHERE root_id = $1 AND session_id = $2 AND batch >= $3 ORDER BY batch LIMIT $4",
                &[&row.root, &id, &from, &PAGE],
            )
        })?;
        if page.is_empty() {
            if let Some(header) = create.take() {
                // Created with no events: the header alone.
                apply(
                    store,
                    AppendItem::replicated(id, Some(0), Vec::new()).creating(header, encoding),
                )?;
            }
            break;
        }
        for r in &page {
            let batch: i64 = r.get(0);
            let first_seq: i64 = r.get(1);
            let bytes: Vec<u8> = r.get(2);
            let crc: i64 = r.get(3);
            if u64::try_from(batch).ok() != Some(next) || i64::from(crc32fast::hash(&bytes)) != crc
            {
                return Err(Error::Diverged {
                    id: id.to_owned(),
                    detail: format!(
                        "PostgreSQL's batch {batch} is not batch {next} with its crc32"
                    ),
                });
            }
            let mut item = AppendItem::replicated(id, u64::try_from(first_seq).ok(), bytes);
            if let Some(header) = create.take() {
                item = item.creating(header, encoding);
            }
            apply(store, item)?;
            next += 1;
            applied += 1;
        }
    }
    Ok(applied)
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
