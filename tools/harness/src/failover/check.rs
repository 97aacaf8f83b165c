//! The failover harness's check, after the last failover: PostgreSQL's batch rows against what
//! the host acknowledged, and the host's store against PostgreSQL and the generated feeds.
//!
//! Invariant checked: every acknowledged batch is in PostgreSQL exactly once, at its seqs, with
//! its bytes (crc32); each session's rows run contiguously from seq 0 with no overlap and no
//! batch stored twice in a row (what committing a retried batch again would leave); each row's
//! bytes match its crc; the host store's export of each session is PostgreSQL's header and
//! batch bytes, in order, and DSH's bytes for a prefix of the session's feed; `verify` is clean.

use std::collections::{BTreeMap, HashMap};

use anyhow::Context;
use sessionlog_engine::Store;

use super::sessions::feed_for;
use crate::stress::verify_problems;

/// A batch the host acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckedBatch {
    /// Its session.
    pub session: String,
    /// Its first and last seq.
    pub first_seq: u64,
    /// See `first_seq`.
    pub last_seq: u64,
    /// The crc32 of its bytes (the lines DSH writes for it).
    pub crc: u32,
}

/// A batch row of PostgreSQL's `sessionlog.batches`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredBatch {
    /// Its session.
    pub session: String,
    /// Its batch number in the session.
    pub batch: u64,
    /// Its first seq and number of events.
    pub first_seq: u64,
    /// See `first_seq`.
    pub events: u64,
    /// The crc32 of its bytes, as computed now.
    pub crc: u32,
    /// The crc the row records.
    pub recorded_crc: u32,
}

/// What [`check_batches`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchCheck {
    /// Acknowledged batches PostgreSQL does not hold at their seqs.
    pub lost: u64,
    /// Batches stored twice (overlapping seqs, or the same bytes twice in a row) or
    /// acknowledged twice.
    pub duplicated: u64,
    /// Acknowledged batches whose seqs PostgreSQL holds with other bytes or bounds: an
    /// acknowledgement of something that was not committed as acknowledged.
    pub unknown_acked: u64,
    /// Rows no acknowledgement names (a batch refused as unavailable whose commit landed, not
    /// appended again because the load stopped): allowed.
    pub unacknowledged: u64,
    /// One line per finding.
    pub problems: Vec<String>,
}

/// Check PostgreSQL's `stored` rows against the `acked` batches (see the module invariant).
pub fn check_batches(acked: &[AckedBatch], stored: &[StoredBatch]) -> BatchCheck {
    let mut found = BatchCheck::default();
    let mut sessions: BTreeMap<&str, Vec<&StoredBatch>> = BTreeMap::new();
    for row in stored {
        sessions.entry(&row.session).or_default().push(row);
    }
    for (session, rows) in &mut sessions {
        rows.sort_by_key(|r| r.batch);
        let mut next_seq = 0;
        let mut previous: Option<&StoredBatch> = None;
        for row in rows.iter() {
            if row.crc != row.recorded_crc {
                found.problems.push(format!(
                    "{session}: batch {} holds bytes whose crc is not the one recorded",
                    row.batch
                ));
            }
            if row.first_seq < next_seq {
                found.duplicated += 1;
                found.problems.push(format!(
                    "{session}: batch {} starts at seq {}, inside the previous batches (overlap)",
                    row.batch, row.first_seq
                ));
            } else if row.first_seq > next_seq {
                found.problems.push(format!(
                    "{session}: batch {} starts at seq {}, past seq {next_seq} (gap)",
                    row.batch, row.first_seq
                ));
            }
            if previous.is_some_and(|p| p.crc == row.crc && p.events == row.events) {
                found.duplicated += 1;
                found.problems.push(format!(
                    "{session}: batch {} holds the bytes of batch {} again (stored twice)",
                    row.batch,
                    row.batch - 1
                ));
            }
            next_seq = next_seq.max(row.first_seq + row.events);
            previous = Some(row);
        }
    }
    let mut by_seqs: HashMap<(&str, u64), Vec<&StoredBatch>> = HashMap::new();
    for row in stored {
        by_seqs
            .entry((&row.session, row.first_seq))
            .or_default()
            .push(row);
    }
    let mut acknowledged: HashMap<(&str, u64), u64> = HashMap::new();
    for ack in acked {
        let times = acknowledged
            .entry((&ack.session, ack.first_seq))
            .or_default();
        *times += 1;
        if *times == 2 {
            found.duplicated += 1;
            found.problems.push(format!(
                "{}: seqs {}..={} were acknowledged twice",
                ack.session, ack.first_seq, ack.last_seq
            ));
        }
        let rows = by_seqs
            .get(&(ack.session.as_str(), ack.first_seq))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let same =
            |r: &&&StoredBatch| r.crc == ack.crc && r.first_seq + r.events == ack.last_seq + 1;
        match (rows.len(), rows.iter().filter(same).count()) {
            (0, _) => {
                found.lost += 1;
                found.problems.push(format!(
                    "{}: acknowledged seqs {}..={} are not in PostgreSQL (lost)",
                    ack.session, ack.first_seq, ack.last_seq
                ));
            }
            (_, 0) => {
                found.unknown_acked += 1;
                found.problems.push(format!(
                    "{}: acknowledged seqs {}..={} are in PostgreSQL with other bytes",
                    ack.session, ack.first_seq, ack.last_seq
                ));
            }
            _ => {}
        }
    }
    found.unacknowledged = stored
        .iter()
        .filter(|r| !acknowledged.contains_key(&(r.session.as_str(), r.first_seq)))
        .count() as u64;
    found
}

/// What PostgreSQL holds of the sessions.
pub struct PostgresLog {
    /// Every batch row.
    pub stored: Vec<StoredBatch>,
    /// Each session's header bytes.
    pub headers: BTreeMap<String, Vec<u8>>,
    /// Each session's batch bytes, concatenated in batch order.
    pub bytes: BTreeMap<String, Vec<u8>>,
}

/// PostgreSQL's batch rows and session headers, read on `client`.
pub fn read_postgres(client: &mut postgres::Client) -> anyhow::Result<PostgresLog> {
    let mut stored = Vec::new();
    let mut bytes: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for row in client.query(
        "SELECT session_id, batch, first_seq, events, bytes, crc FROM sessionlog.batches \
         ORDER BY session_id, batch",
        &[],
    )? {
        let session: String = row.get(0);
        let body: Vec<u8> = row.get(4);
        let number = |i: usize| u64::try_from(row.get::<_, i64>(i)).unwrap_or(u64::MAX);
        stored.push(StoredBatch {
            session: session.clone(),
            batch: number(1),
            first_seq: number(2),
            events: number(3),
            crc: crc32fast::hash(&body),
            recorded_crc: u32::try_from(row.get::<_, i64>(5)).unwrap_or(u32::MAX),
        });
        bytes.entry(session).or_default().extend_from_slice(&body);
    }
    let headers = client
        .query("SELECT id, header FROM sessionlog.sessions", &[])?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    Ok(PostgresLog {
        stored,
        headers,
        bytes,
    })
}

/// Compare the host's `store` with what PostgreSQL holds, by session, and each session with its
/// generated feed (`events`, `seed`); then `verify`. One line per finding; the sessions
/// compared.
pub fn check_store(
    store: &Store,
    postgres: &PostgresLog,
    (events, seed): (u64, u64),
    problems: &mut Vec<String>,
) -> anyhow::Result<u64> {
    let (headers, bytes) = (&postgres.headers, &postgres.bytes);
    let local: std::collections::BTreeSet<String> =
        store.list()?.into_iter().map(|s| s.id).collect();
    for id in local.iter().filter(|id| !headers.contains_key(*id)) {
        problems.push(format!("{id}: in the host's store, not in PostgreSQL"));
    }
    for (id, header) in headers {
        if !local.contains(id) {
            problems.push(format!("{id}: in PostgreSQL, not in the host's store"));
            continue;
        }
        let mut held = header.clone();
        held.extend_from_slice(bytes.get(id).map(Vec::as_slice).unwrap_or_default());
        let mut exported = Vec::new();
        store
            .export(id, None, &mut exported)
            .with_context(|| format!("exporting {id} from the host's store"))?;
        if exported != held {
            problems.push(format!(
                "{id}: the host's export ({} bytes) is not PostgreSQL's bytes ({} bytes)",
                exported.len(),
                held.len()
            ));
        }
        let Some(k) = id
            .strip_prefix("failover-")
            .and_then(|n| n.parse::<u64>().ok())
        else {
            problems.push(format!("{id}: not a session of this harness"));
            continue;
        };
        let (feed, header_line) = feed_for(k, events, seed);
        let mut want = format!("{header_line}\n").into_bytes();
        let mut matches = want == held;
        for batch in &feed.batches {
            want.extend_from_slice(batch.text.as_bytes());
            matches |= want == held;
        }
        if !matches {
            problems.push(format!(
                "{id}: PostgreSQL's bytes are not DSH's for any prefix of the session's batches"
            ));
        }
    }
    problems.extend(verify_problems(store)?);
    Ok(headers.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acked(session: &str, first_seq: u64, events: u64, crc: u32) -> AckedBatch {
        AckedBatch {
            session: session.into(),
            first_seq,
            last_seq: first_seq + events - 1,
            crc,
        }
    }

    fn stored(session: &str, batch: u64, first_seq: u64, events: u64, crc: u32) -> StoredBatch {
        StoredBatch {
            session: session.into(),
            batch,
            first_seq,
            events,
            crc,
            recorded_crc: crc,
        }
    }

    #[test]
    fn a_faithful_record_passes() {
        let acks = [acked("s", 0, 3, 10), acked("s", 3, 2, 11)];
        let rows = [
            stored("s", 1, 0, 3, 10),
            stored("s", 2, 3, 2, 11),
            stored("s", 3, 5, 1, 12),
        ];
        let found = check_batches(&acks, &rows);
        assert_eq!(
            (found.lost, found.duplicated, found.unknown_acked),
            (0, 0, 0),
            "{:?}",
            found.problems
        );
        assert_eq!(
            found.unacknowledged, 1,
            "the last row was never acknowledged"
        );
        assert!(found.problems.is_empty());
    }

    #[test]
    fn a_missing_and_a_duplicated_batch_are_found() {
        let acks = [
            acked("s", 0, 3, 10),
            acked("s", 3, 2, 11),
            acked("s", 5, 4, 12),
        ];
        // Batch 11 committed twice (a retry committed again), batch 12 missing.
        let rows = [
            stored("s", 1, 0, 3, 10),
            stored("s", 2, 3, 2, 11),
            stored("s", 3, 5, 2, 11),
        ];
        let found = check_batches(&acks, &rows);
        assert_eq!(found.duplicated, 1, "{:?}", found.problems);
        assert_eq!(found.unknown_acked, 1, "seqs 5.. hold other bytes");
        let rows = [stored("s", 1, 0, 3, 10), stored("s", 2, 3, 2, 11)];
        let found = check_batches(&acks, &rows);
        assert_eq!(found.lost, 1, "{:?}", found.problems);
        assert!(found.problems[0].contains("5..=8"), "{:?}", found.problems);
    }

    #[test]
    fn overlaps_gaps_bad_crcs_and_double_acknowledgements_are_found() {
        let acks = [acked("s", 0, 3, 10), acked("s", 0, 3, 10)];
        let mut bad = stored("s", 3, 9, 1, 13);
        bad.recorded_crc = 99;
        let rows = [stored("s", 1, 0, 3, 10), stored("s", 2, 2, 2, 11), bad];
        let found = check_batches(&acks, &rows);
        assert_eq!(
            found.duplicated, 2,
            "an overlap and a second acknowledgement"
        );
        let text = found.problems.join("\n");
        for finding in ["overlap", "gap", "crc", "acknowledged twice"] {
            assert!(text.contains(finding), "{finding}: {text}");
        }
    }
}
