//! The fleet's step in the engine's group commit (`CommitHook`): the group's session batches
//! go to PostgreSQL in one call of `sessionlog.append_batches` (one transaction, one WAL flush
//! for all), each fenced by the owner epoch this host holds its session at and by its expected
//! next seq and batch, and each refused alone; only the accepted ones are then written locally.
//!
//! One batch never refuses another tenant's: a batch PostgreSQL cannot hold (an id with NUL, a
//! batch past [`MAX_BATCH_BYTES`]) is refused at the door, before any call; a group is cut into
//! calls of at most [`CALL_BYTES`], under PostgreSQL's 1 GB for a message or a value; and a call
//! that fails for one row (a value PostgreSQL refuses for good, a row lock held past the
//! connection's `lock_timeout`) is split in halves, each committed on its own, until the row
//! at fault is alone and refused alone.
//!
//! A commit whose outcome is unknown (the connection dropped before PostgreSQL answered, or the
//! server ended it: a shutdown or a crash may end a backend after its commit is flushed, while
//! it waits for a synchronous standby) is read back from a new connection before anything is
//! said: a batch PostgreSQL holds with the same bytes is committed; when none of the group is
//! there, the call is made again (it changed nothing, since a transaction commits whole); when
//! PostgreSQL cannot be read back within the hook's patience, the outcome is reported unknown. Every batch refused (stale, fenced, existing,
//! deleted, missing) is read back too: when PostgreSQL holds that very batch (same number, same
//! bytes), an earlier call committed it (one whose outcome stayed unknown past the hook's
//! patience and was reported unavailable, its batch then appended again; or this call's first
//! try, whose commit landed after the read, possibly just before a new owner's takeover), so it
//! is reported committed, once, and the local store catches up with it.
//!
//! Invariant: a batch is reported committed only when PostgreSQL said so, or holds it; it is
//! reported refused (fenced, stale) only when PostgreSQL does not hold it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use postgres::Client;
use sessionlog_engine::{CommitHook, CommitRecord, Refusal, RefusalKind};

use crate::ownership::{lease_seconds, Fork, Forks, Held, Holding};
use crate::pg::{is_timeout, is_transient, may_have_committed, Pg};

/// The most bytes (its bytes and, creating its session, its header) one batch may have: a
/// call carries each twice at most (the batch and its read-back), each under PostgreSQL's 1 GB
/// for a value or a message.
pub(crate) const MAX_BATCH_BYTES: usize = 512 << 20;
/// The most batch bytes one call of `append_batches` carries; a group past it is cut into
/// several calls (a batch past it goes alone).
pub(crate) const CALL_BYTES: usize = 64 << 20;

/// The fleet's commit hook.
pub(crate) struct FleetHook {
    pub(crate) pg: Mutex<Pg>,
    pub(crate) host: String,
    pub(crate) lease: Duration,
    /// How long a group keeps trying PostgreSQL before it is refused as unavailable
    /// (`FleetOptions::commit_patience`).
    pub(crate) patience: Duration,
    pub(crate) held: Arc<Held>,
    pub(crate) forks: Arc<Forks>,
}

/// The outcome of each batch of a group, by its index in the group.
type Outcomes = Vec<(usize, Result<(), Refusal>)>;

/// One batch as PostgreSQL's arrays take it.
struct Row<'r> {
    /// Its index in the group.
    at: usize,
    record: &'r CommitRecord,
    root: String,
    epoch: i64,
    crc: i64,
    /// The fork a creating batch makes, if it makes one.
    fork: Option<Fork>,
}

impl CommitHook for FleetHook {
    fn commit(&self, records: &[&CommitRecord]) -> Vec<Result<(), Refusal>> {
        let mut outcomes: Vec<Option<Result<(), Refusal>>> = vec![None; records.len()];
        let mut rows = Vec::with_capacity(records.len());
        for (at, record) in records.iter().enumerate() {
            if let Some(rule) = unstorable(record, MAX_BATCH_BYTES) {
                outcomes[at] = Some(Err(refusal(RefusalKind::Unstorable, rule)));
                continue;
            }
            let fork = record
                .creates
                .as_ref()
                .and_then(|_| self.forks.get(&record.session));
            let holding = match &record.creates {
                // A session created here is held at the first epoch, under its own lineage root
                // or (a fork) its parent's.
                Some(_) => Some(Holding {
                    root: fork
                        .as_ref()
                        .map_or_else(|| record.session.clone(), |f| f.root.clone()),
                    epoch: 1,
                }),
                None => self.held.get(&record.session),
            };
            match holding {
                Some(h) => rows.push(Row {
                    at,
                    record,
                    root: h.root,
                    epoch: h.epoch,
                    crc: i64::from(crc32fast::hash(&record.bytes)),
                    fork,
                }),
                None => {
                    outcomes[at] = Some(Err(refusal(
                        RefusalKind::Fenced,
                        format!(
                            "session \"{}\" is not held by host \"{}\" (never acquired here, or taken over)",
                            record.session, self.host
                        ),
                    )))
                }
            }
        }
        // One lock order for every transaction: two hosts' groups overlapping during a
        // takeover then cannot deadlock.
        rows.sort_by(|a, b| (&a.root, &a.record.session).cmp(&(&b.root, &b.record.session)));
        let mut pg = self.pg.lock().unwrap_or_else(PoisonError::into_inner);
        let deadline = Instant::now() + self.patience;
        for call in calls(&rows, CALL_BYTES) {
            for (at, outcome) in self.commit_rows(&mut pg, call, deadline, false) {
                outcomes[at] = Some(outcome);
            }
        }
        settle_held(&self.held, &rows, &outcomes);
        outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    Err(refusal(
                        RefusalKind::Unavailable,
                        "PostgreSQL gave no outcome for the batch".into(),
                    ))
                })
            })
            .collect()
    }
}

impl FleetHook {
    /// Commit `rows` (see the module docs) by `deadline`; the outcome of each, by its index in
    /// the group. `uncertain`: an earlier call of these rows may have committed.
    fn commit_rows(
        &self,
        pg: &mut Pg,
        rows: &[Row<'_>],
        deadline: Instant,
        mut uncertain: bool,
    ) -> Outcomes {
        if rows.is_empty() {
            return Vec::new();
        }
        const DURING: &str = "committing a group of batches";
        loop {
            let failure = match pg.client(DURING) {
                Err(e) => e.to_string(),
                Ok(client) => match self.call(client, rows) {
                    Ok(outcomes) => return settle_refused(pg, rows, outcomes, self.patience),
                    // The connection dropped, or the server ended it: the call may have
                    // committed.
                    Err(e) if may_have_committed(&e) => {
                        uncertain = true;
                        pg.pg_error(DURING, &e).to_string()
                    }
                    // Rolled back for one row's sake, maybe: each half on its own.
                    Err(e) if rows.len() > 1 && splits(&e) => {
                        let (first, second) = rows.split_at(rows.len() / 2);
                        let mut outcomes = self.commit_rows(pg, first, deadline, uncertain);
                        outcomes.extend(self.commit_rows(pg, second, deadline, uncertain));
                        return outcomes;
                    }
                    // PostgreSQL refused the call for good (a privilege, a missing function, a
                    // value it cannot take).
                    Err(e) if e.code().is_some() && !is_transient(&e) => {
                        return unavailable(
                            rows,
                            "not committed",
                            &pg.pg_error(DURING, &e).to_string(),
                        )
                    }
                    // Rolled back before anything was done (a deadlock, a standby, a lock or
                    // statement timeout): again.
                    Err(e) => pg.pg_error(DURING, &e).to_string(),
                },
            };
            pg.reset();
            if uncertain {
                let all: Vec<&Row<'_>> = rows.iter().collect();
                if let Ok(present) = read_back(pg, &all, self.patience) {
                    if present.iter().any(|&p| p) {
                        return rows
                            .iter()
                            .zip(present)
                            .map(|(r, p)| {
                                let outcome = match p {
                                    true => Ok(()),
                                    false => Err(refusal(
                                        RefusalKind::Unavailable,
                                        format!("session \"{}\": {failure}; PostgreSQL holds other batches of its group, not this one", r.record.session),
                                    )),
                                };
                                (r.at, outcome)
                            })
                            .collect();
                    }
                }
            }
            if Instant::now() >= deadline {
                let outcome = match uncertain {
                    false => "not committed",
                    true => {
                        "outcome unknown: the connection dropped during the commit and PostgreSQL \
                         could not be read back (appending the same batch again commits it once, or \
                         reports it committed if it was)"
                    }
                };
                return unavailable(rows, outcome, &failure);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// One call of `sessionlog.append_batches` for `rows`.
    fn call(
        &self,
        client: &mut Client,
        rows: &[Row<'_>],
    ) -> std::result::Result<Outcomes, postgres::Error> {
        let roots: Vec<&str> = rows.iter().map(|r| r.root.as_str()).collect();
        let ids: Vec<&str> = rows.iter().map(|r| r.record.session.as_str()).collect();
        let epochs: Vec<i64> = rows.iter().map(|r| r.epoch).collect();
        let batches: Vec<i64> = rows.iter().map(|r| as_i64(r.record.batch)).collect();
        let first_seqs: Vec<i64> = rows.iter().map(|r| as_i64(r.record.first_seq)).collect();
        let events: Vec<i64> = rows.iter().map(|r| as_i64(r.record.events)).collect();
        let bytes: Vec<&[u8]> = rows.iter().map(|r| r.record.bytes.as_slice()).collect();
        let crcs: Vec<i64> = rows.iter().map(|r| r.crc).collect();
        let verdicts: Vec<&str> = rows.iter().map(|r| r.record.verdict.as_str()).collect();
        let headers: Vec<Option<&[u8]>> = rows
            .iter()
            .map(|r| r.record.creates.as_ref().map(|c| c.header.as_slice()))
            .collect();
        let zstds: Vec<bool> = rows
            .iter()
            .map(|r| r.record.creates.as_ref().is_some_and(|c| c.zstd))
            .collect();
        let versions: Vec<i32> = rows
            .iter()
            .map(|r| {
                r.record
                    .creates
                    .as_ref()
                    .map_or(0, |c| i32::try_from(c.version).unwrap_or(i32::MAX))
            })
            .collect();
        let parents: Vec<Option<&str>> = rows
            .iter()
            .map(|r| r.fork.as_ref().map(|f| f.parent.as_str()))
            .collect();
        let seeds: Vec<Option<i64>> = rows
            .iter()
            .map(|r| r.fork.as_ref().map(|f| f.seed))
            .collect();
        let answer = client.query(
            "SELECT idx, outcome FROM sessionlog.append_batches($1, $2, $3, $4, $5, $6, $7, $8, \
             $9, $10, $11, $12, $13, $14, $15, $16)",
            &[
                &self.host,
                &lease_seconds(self.lease),
                &roots,
                &ids,
                &epochs,
                &batches,
                &first_seqs,
                &events,
                &bytes,
                &crcs,
                &verdicts,
                &headers,
                &zstds,
                &versions,
                &parents,
                &seeds,
            ],
        );
        Ok(answer?
            .iter()
            .filter_map(|row| {
                let idx: i32 = row.get(0);
                let outcome: &str = row.get(1);
                let r = rows.get(usize::try_from(idx).ok()?.checked_sub(1)?)?;
                Some((r.at, outcome_of(outcome, r)))
            })
            .collect())
    }
}

/// `outcomes` of a call, with each batch refused (stale, fenced, existing, deleted, missing)
/// that PostgreSQL holds (same number, same bytes) reported committed (see the module docs).
/// When PostgreSQL cannot be read back, those batches are refused as unavailable instead, their
/// outcome unknown: appending them again settles it.
fn settle_refused(
    pg: &mut Pg,
    rows: &[Row<'_>],
    outcomes: Outcomes,
    patience: Duration,
) -> Outcomes {
    let refused: Vec<&Row<'_>> = outcomes
        .iter()
        .filter(|(_, o)| {
            matches!(o, Err(r) if matches!(r.kind, RefusalKind::Stale | RefusalKind::Fenced))
        })
        .filter_map(|(at, _)| rows.iter().find(|r| r.at == *at))
        .collect();
    if refused.is_empty() {
        return outcomes;
    }
    let held: Vec<usize> = match read_back(pg, &refused, patience) {
        Ok(present) => refused
            .iter()
            .zip(present)
            .filter(|(_, p)| *p)
            .map(|(r, _)| r.at)
            .collect(),
        Err(e) => {
            let unknown: Vec<usize> = refused.iter().map(|r| r.at).collect();
            return outcomes
                .into_iter()
                .map(|(at, o)| match (unknown.contains(&at), o) {
                    (true, Err(r)) => (
                        at,
                        Err(refusal(
                            RefusalKind::Unavailable,
                            format!(
                                "{}; whether PostgreSQL holds this very batch could not be read \
                                 back (outcome unknown: appending it again settles it): {e}",
                                r.message
                            ),
                        )),
                    ),
                    (_, o) => (at, o),
                })
                .collect();
        }
    };
    outcomes
        .into_iter()
        .map(|(at, o)| match held.contains(&at) {
            true => (at, Ok(())),
            false => (at, o),
        })
        .collect()
}

/// Record in `held` what the group's `outcomes` say of its `rows`: a session created is held
/// at its first epoch; one refused as fenced is forgotten (further batches are refused without
/// asking PostgreSQL), but only if this host still holds it at the epoch refused, so a late
/// refusal never erases an acquisition made while the call was under way.
fn settle_held(held: &Held, rows: &[Row<'_>], outcomes: &[Option<Result<(), Refusal>>]) {
    for row in rows {
        match (&outcomes[row.at], &row.record.creates) {
            (Some(Err(r)), _) if r.kind == RefusalKind::Fenced => {
                held.lose(&row.record.session, row.epoch);
            }
            (Some(Ok(())), Some(_)) => held.insert(
                &row.record.session,
                Holding {
                    root: row.root.clone(),
                    epoch: row.epoch,
                },
            ),
            _ => {}
        }
    }
}

/// Why PostgreSQL cannot hold `record` as it is, if it cannot (the rule, naming the session):
/// an id with NUL, or past `max_bytes` ([`MAX_BATCH_BYTES`]).
fn unstorable(record: &CommitRecord, max_bytes: usize) -> Option<String> {
    let id = &record.session;
    if let Some(rule) = unstorable_id(id) {
        return Some(rule);
    }
    let size = batch_bytes(record);
    (size > max_bytes).then(|| {
        format!(
            "session \"{id}\" batch {}: {size} bytes, past the {max_bytes} bytes a batch \
             may have in the fleet (PostgreSQL takes at most 1 GB in one value or message)",
            record.batch
        )
    })
}

/// Why PostgreSQL cannot hold session id `id`, if it cannot (the rule, naming the session).
pub(crate) fn unstorable_id(id: &str) -> Option<String> {
    id.contains('\0').then(|| {
        format!(
            "session \"{}\": a session id in the fleet cannot hold the character U+0000 (NUL): \
             PostgreSQL's text cannot",
            id.replace('\0', "\\u0000")
        )
    })
}

/// The bytes `record` carries to PostgreSQL.
fn batch_bytes(record: &CommitRecord) -> usize {
    record.bytes.len() + record.creates.as_ref().map_or(0, |c| c.header.len())
}

/// `rows` cut into runs of at most `budget` bytes each (a row past it alone), in order.
fn calls<'a, 'r>(rows: &'a [Row<'r>], budget: usize) -> Vec<&'a [Row<'r>]> {
    let mut calls = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, row) in rows.iter().enumerate() {
        let size = batch_bytes(row.record);
        if i > start && bytes + size > budget {
            calls.push(&rows[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < rows.len() {
        calls.push(&rows[start..]);
    }
    calls
}

/// Whether a call that failed with `e` may have failed for one of its rows alone, so that its
/// halves may commit: a value or state PostgreSQL refuses for good, or a row lock (or a statement)
/// past the connection's limit. Not a refusal of the whole call (access, a missing function,
/// the server's state: classes 08, 28, 3D, 3F, 42, 53, 57 but its cancellations, 58), nor one
/// that rolled back for the group's sake (a deadlock, a serialization failure): those are
/// answered, or tried again, for the whole call.
fn splits(e: &postgres::Error) -> bool {
    match e.code() {
        None => false,
        Some(_) if is_timeout(e) => true,
        Some(_) if is_transient(e) => false,
        Some(code) => !["08", "28", "3D", "3F", "42", "53", "57", "58"]
            .iter()
            .any(|class| code.code().starts_with(class)),
    }
}

/// Which of `rows` PostgreSQL holds, as the same batch number with the same bytes (and, for a
/// batch that creates its session, under the same header; a creation with no events has no
/// batch row, so its header alone says).
fn read_back(
    pg: &mut Pg,
    rows: &[&Row<'_>],
    patience: Duration,
) -> crate::error::Result<Vec<bool>> {
    let roots: Vec<&str> = rows.iter().map(|r| r.root.as_str()).collect();
    let ids: Vec<&str> = rows.iter().map(|r| r.record.session.as_str()).collect();
    let batches: Vec<i64> = rows.iter().map(|r| as_i64(r.record.batch)).collect();
    let crcs: Vec<i64> = rows.iter().map(|r| r.crc).collect();
    let bytes: Vec<&[u8]> = rows.iter().map(|r| r.record.bytes.as_slice()).collect();
    let headers: Vec<Option<&[u8]>> = rows
        .iter()
        .map(|r| r.record.creates.as_ref().map(|c| c.header.as_slice()))
        .collect();
    let found = pg.retrying("reading back a group of batches", patience, |client| {
        client.query(
            "SELECT t.i FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], \
                                    $5::bytea[], $6::bytea[]) \
                  WITH ORDINALITY AS t(root_id, id, batch, crc, bytes, header, i) \
             JOIN sessionlog.sessions s \
               ON s.root_id = t.root_id AND s.id = t.id \
              AND (t.header IS NULL OR s.header = t.header) \
             WHERE (t.header IS NOT NULL AND octet_length(t.bytes) = 0) \
                OR EXISTS (SELECT 1 FROM sessionlog.batches b \
                            WHERE b.root_id = t.root_id AND b.session_id = t.id \
                              AND b.batch = t.batch AND b.crc = t.crc AND b.bytes = t.bytes)",
            &[&roots, &ids, &batches, &crcs, &bytes, &headers],
        )
    })?;
    let held: Vec<i64> = found.iter().map(|r| r.get(0)).collect();
    Ok((1..=rows.len())
        .map(|i| held.contains(&i64::try_from(i).unwrap_or(i64::MAX)))
        .collect())
}

/// The refusal (or acceptance) PostgreSQL's outcome word means for `row`.
fn outcome_of(outcome: &str, row: &Row<'_>) -> Result<(), Refusal> {
    let id = &row.record.session;
    match outcome {
        "ok" => Ok(()),
        "fenced" => Err(refusal(
            RefusalKind::Fenced,
            format!("session \"{id}\" was taken over by another host (this host held it at epoch {}); it is fenced", row.epoch),
        )),
        "stale" => Err(refusal(
            RefusalKind::Stale,
            format!(
                "session \"{id}\": the fleet's log does not continue at seq {} (batch {})",
                row.record.first_seq, row.record.batch
            ),
        )),
        "exists" => Err(refusal(
            RefusalKind::Stale,
            format!("session \"{id}\" already exists in the fleet"),
        )),
        "deleted" => Err(refusal(
            RefusalKind::Stale,
            format!("session \"{id}\" is deleted in the fleet"),
        )),
        "missing" => Err(refusal(
            RefusalKind::Stale,
            format!("session \"{id}\" is not in the fleet"),
        )),
        other => Err(refusal(
            RefusalKind::Unavailable,
            format!("session \"{id}\": PostgreSQL answered \"{other}\""),
        )),
    }
}

/// Every row refused as unavailable: `outcome` (not committed, or unknown), for `message`.
fn unavailable(rows: &[Row<'_>], outcome: &str, message: &str) -> Outcomes {
    rows.iter()
        .map(|r| {
            (
                r.at,
                Err(refusal(
                    RefusalKind::Unavailable,
                    format!("session \"{}\": {outcome}: {message}", r.record.session),
                )),
            )
        })
        .collect()
}

fn refusal(kind: RefusalKind, message: String) -> Refusal {
    Refusal { kind, message }
}

/// A count or number as PostgreSQL's bigint (never past `i64::MAX` in practice).
fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use sessionlog_engine::CreatedSession;

    use super::*;

    fn record(session: &str, bytes: usize) -> CommitRecord {
        CommitRecord {
            session: session.to_owned(),
            first_seq: 0,
            events: 1,
            batch: 1,
            bytes: vec![b'x'; bytes],
            creates: None,
            verdict: "ok".into(),
        }
    }

    fn row(at: usize, record: &CommitRecord, epoch: i64) -> Row<'_> {
        Row {
            at,
            record,
            root: record.session.clone(),
            epoch,
            crc: 0,
            fork: None,
        }
    }

    fn fenced() -> Option<Result<(), Refusal>> {
        Some(Err(refusal(RefusalKind::Fenced, "fenced".into())))
    }

    #[test]
    fn a_late_fenced_answer_never_erases_a_newer_acquisition() {
        let held = Held::default();
        let (old, current) = (record("old", 1), record("current", 1));
        for (id, epoch) in [("old", 3), ("current", 2)] {
            let root = id.to_owned();
            held.insert(id, Holding { root, epoch });
        }
        // Both were committed at epoch 2; "old" was acquired again at epoch 3 meanwhile.
        let rows = [row(0, &old, 2), row(1, &current, 2)];
        settle_held(&held, &rows, &[fenced(), fenced()]);
        assert_eq!(
            held.get("old").map(|h| h.epoch),
            Some(3),
            "the newer epoch stays"
        );
        assert_eq!(held.get("current"), None, "the epoch refused is forgotten");
    }

    #[test]
    fn a_created_session_is_held_at_its_first_epoch() {
        let held = Held::default();
        let mut created = record("new", 1);
        created.creates = Some(CreatedSession {
            header: b"{}\n".to_vec(),
            zstd: false,
            version: 0,
        });
        settle_held(&held, &[row(0, &created, 1)], &[Some(Ok(()))]);
        assert_eq!(held.get("new").map(|h| h.epoch), Some(1));
    }

    #[test]
    fn a_group_is_cut_into_calls_under_the_budget_a_large_batch_alone() {
        let records: Vec<CommitRecord> = [40, 40, 30, 200, 10, 10]
            .iter()
            .enumerate()
            .map(|(i, &n)| record(&format!("s{i}"), n))
            .collect();
        let rows: Vec<Row<'_>> = records
            .iter()
            .enumerate()
            .map(|(i, r)| row(i, r, 1))
            .collect();
        let cut: Vec<Vec<usize>> = calls(&rows, 100)
            .iter()
            .map(|c| c.iter().map(|r| r.at).collect())
            .collect();
        assert_eq!(cut, [vec![0, 1], vec![2], vec![3], vec![4, 5]]);
        assert!(calls(&[], 100).is_empty());
    }

    #[test]
    fn a_batch_postgres_cannot_hold_is_refused_naming_the_session_and_the_rule() {
        let nul = unstorable(&record("a\0b", 1), 10).expect("an id with NUL");
        assert!(
            nul.contains("\"a\\u0000b\"") && nul.contains("NUL"),
            "{nul}"
        );
        let big = unstorable(&record("big", 11), 10).expect("too large");
        assert!(
            big.contains("\"big\" batch 1: 11 bytes") && big.contains("1 GB"),
            "{big}"
        );
        assert_eq!(unstorable(&record("fine", 10), 10), None);
    }
}
