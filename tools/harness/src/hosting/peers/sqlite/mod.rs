//! DSH's SQLite backend as a hosting peer (persistence-spec §5): schema 17, WAL,
//! `synchronous = FULL` (one WAL fsync per commit), one transaction per batch.
//!
//! **One connection behind a mutex**, because that is what DSH runs: one `DatabaseSync` per
//! store in one Node process, whose synchronous calls all run on the event-loop thread, so
//! appends of different sessions never overlap. (Connections per thread would not add
//! parallelism either: WAL admits one writer, and the others would wait in SQLite's busy
//! handler, which sleeps rather than queues.)
//!
//! Per batch, as DSH's `appendBatch`: `BEGIN IMMEDIATE`; re-validate identity, version and
//! schema; read the physical tail (last two rows, packed predecessors reaching into them, rows
//! from there) and decode it to find the next seq; check the batch starts there; on the
//! session's first batch upsert its `sessions` row (revision 0, fresh incarnation); insert each
//! packed record; bump the revision; `COMMIT`. Statements are prepared per call, as DSH does.
//! Row encoding (JSON text, zstd) is done before taking the lock, which DSH does on its single
//! thread; that favours the peer.

mod rows;
mod schema;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Mutex;

use anyhow::{anyhow, bail, ensure, Context};
use rusqlite::{params, Connection, Transaction, TransactionBehavior};
use sessionlog_codec::format::header::parse_header;
use sessionlog_codec::json::{Object, Value};

use self::rows::{decode_row, encode_batch, Row};
use self::schema::{random_uuid, reference_schema, validate, SchemaObject};
use super::super::{Durability, Host, Item, PendingSessions, SessionStart};

/// DSH `MAX_PACKED_ROW_MEMBERS`: how far back a packed row may start and still cover a seq.
const MAX_PACKED_MEMBERS: i64 = 1_024;

const SELECT_TAIL: &str = "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable \
     FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT ?";
const SELECT_PACKED_PREDECESSORS: &str =
    "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable \
     FROM events WHERE session_id = ? AND seq >= ? AND seq < ? \
     AND type IN ('text-chunks', 'reasoning-chunks', 'tool-call-chunks') AND ignorable = 0 \
     ORDER BY seq";
const SELECT_FROM: &str = "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable \
     FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq";
const UPSERT_SESSION: &str = "INSERT INTO sessions \
     (id, version, created_at, cwd, parent_session, seed_length, origin, \
      delegation_depth, agent_preset, incarnation, revision) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0) \
     ON CONFLICT(id) DO UPDATE SET version = excluded.version, \
      created_at = excluded.created_at, cwd = excluded.cwd, \
      parent_session = excluded.parent_session, seed_length = excluded.seed_length, \
      origin = excluded.origin, delegation_depth = excluded.delegation_depth, \
      agent_preset = excluded.agent_preset";
const INSERT_EVENT: &str = "INSERT INTO events \
     (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
const BUMP_REVISION: &str = "UPDATE sessions SET revision = revision + 1 WHERE id = ?";

/// A session's `sessions` row fields, from its header.
#[derive(Clone, Debug)]
struct SessionRow {
    version: i64,
    created_at: i64,
    cwd: Option<String>,
    parent_session: Option<String>,
    seed_length: Option<i64>,
    origin: Option<String>,
    delegation_depth: Option<i64>,
    agent_preset: Option<String>,
}

/// DSH's SQLite backend over one database file.
#[derive(Debug)]
pub struct SqlitePeer {
    conn: Mutex<Connection>,
    reference: Vec<SchemaObject>,
    /// Headers of created sessions whose first batch has not been written, by id.
    pending: PendingSessions<SessionRow>,
}

impl SqlitePeer {
    /// Open (or create) the database at `path`.
    pub fn open(path: &Path, durability: Durability) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let conn = schema::open(path, durability)
            .with_context(|| format!("opening the session database {}", path.display()))?;
        Ok(SqlitePeer {
            conn: Mutex::new(conn),
            reference: reference_schema()?,
            pending: PendingSessions::new(),
        })
    }

    /// One batch in one write transaction.
    fn append_one(
        &self,
        tx: &Transaction<'_>,
        item: &Item<'_>,
        rows: &[Row],
    ) -> anyhow::Result<()> {
        validate(tx, &self.reference)?;
        let expected = next_seq(tx, item.id)?;
        let first = i64::try_from(item.batch.first_seq)?;
        ensure!(
            first == expected,
            "append starts at seq {first}, stored next seq is {expected}"
        );
        if first == 0 {
            let row = self
                .pending
                .take_first(item)?
                .ok_or_else(|| anyhow!("first batch of a session never created"))?;
            tx.prepare(UPSERT_SESSION)?.execute(params![
                item.id,
                row.version,
                row.created_at,
                row.cwd,
                row.parent_session,
                row.seed_length,
                row.origin,
                row.delegation_depth,
                row.agent_preset,
                random_uuid(),
            ])?;
        }
        let mut insert = tx.prepare(INSERT_EVENT)?;
        for r in rows {
            insert.execute(params![
                item.id,
                r.seq,
                r.ty,
                r.time,
                r.data,
                r.source_event_seqs,
                r.surface_op,
                r.ignorable
            ])?;
        }
        let bumped = tx.prepare(BUMP_REVISION)?.execute([item.id])?;
        ensure!(bumped == 1, "metadata row is missing");
        Ok(())
    }
}

impl Host for SqlitePeer {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn create(&self, start: &SessionStart<'_>) -> anyhow::Result<()> {
        self.pending.hold(start.id, session_row(start.header_line)?)
    }

    fn append(&self, items: Vec<Item<'_>>, acked: &mut dyn FnMut(usize)) -> anyhow::Result<()> {
        for (i, item) in items.iter().enumerate() {
            let rows = encode_batch(&item.events)?;
            let mut conn = self
                .conn
                .lock()
                .map_err(|_| anyhow!("connection lock poisoned"))?;
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            self.append_one(&tx, item, &rows)
                .with_context(|| format!("session {}", item.id))?;
            tx.commit()?;
            drop(conn);
            acked(i);
        }
        Ok(())
    }
}

/// The logical next seq of session `id`: DSH reads the last two physical rows, widens to any
/// packed row reaching into them, and decodes that span.
fn next_seq(tx: &Transaction<'_>, id: &str) -> anyhow::Result<i64> {
    let tail = select_rows(tx, SELECT_TAIL, params![id, 2])?;
    let Some(from) = tail.iter().map(|r| r.seq).min() else {
        return Ok(0);
    };
    let mut base = from;
    let floor = (from - MAX_PACKED_MEMBERS + 1).max(0);
    for row in select_rows(tx, SELECT_PACKED_PREDECESSORS, params![id, floor, from])? {
        let reaches = decode_row(&row)
            .ok()
            .and_then(|events| events.last().and_then(event_seq))
            .is_none_or(|last| last >= from);
        if reaches {
            base = base.min(row.seq);
        }
    }
    let mut next = base;
    for row in select_rows(tx, SELECT_FROM, params![id, base])? {
        for event in decode_row(&row)? {
            let seq = event_seq(&event).ok_or_else(|| anyhow!("stored event without a seq"))?;
            if seq != next {
                bail!(
                    "session {id} has an invalid physical tail at seq {}",
                    row.seq
                );
            }
            next += 1;
        }
    }
    Ok(next)
}

fn event_seq(event: &Value) -> Option<i64> {
    event.as_object()?.get("seq")?.as_safe_integer()
}

fn select_rows(
    db: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> anyhow::Result<Vec<Row>> {
    let mut stmt = db.prepare(sql)?;
    let rows = stmt.query_map(params, |r| {
        Ok(Row {
            seq: r.get(0)?,
            ty: r.get(1)?,
            time: r.get(2)?,
            data: r.get(3)?,
            source_event_seqs: r.get(4)?,
            surface_op: r.get(5)?,
            ignorable: r.get(6)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The `sessions` row a header line maps to (absent fields are NULL).
fn session_row(header_line: &str) -> anyhow::Result<SessionRow> {
    let header = parse_header(header_line.as_bytes()).map_err(|e| anyhow!("{e}"))?;
    let o: &Object = &header.object;
    let int = |k: &str| o.get(k).and_then(Value::as_safe_integer);
    let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
    Ok(SessionRow {
        version: int("version").ok_or_else(|| anyhow!("header has no integer version"))?,
        created_at: int("createdAt").ok_or_else(|| anyhow!("header has no createdAt"))?,
        cwd: text("cwd"),
        parent_session: text("parentSession"),
        seed_length: int("seedLength"),
        origin: text("origin"),
        delegation_depth: int("delegationDepth"),
        agent_preset: text("agentPreset"),
    })
}
