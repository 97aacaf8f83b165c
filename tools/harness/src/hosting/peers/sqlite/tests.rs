//! The SQLite peer: schema 17 as DSH creates it, and rows that decode back to the batches'
//! events.

use rusqlite::Connection;
use sessionlog_codec::json::Value;

use super::rows::decode_row;
use super::schema::{APPLICATION_ID, SCHEMA_VERSION};
use super::*;
use crate::gen::{session_batches, GenOptions};

fn feed_opts() -> GenOptions {
    GenOptions {
        events_per_session: 600,
        torn_fraction: 0.0,
        seed: 5,
        ..GenOptions::default()
    }
}

#[test]
fn schema_matches_spec_and_rows_reconstruct_events() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("sessions.db");
    let peer = SqlitePeer::open(&path, Durability::Sync).expect("opens");
    let feeds: Vec<_> = (0..2).map(|i| session_batches(i, &feed_opts())).collect();
    for (slot, feed) in feeds.iter().enumerate() {
        let start = SessionStart {
            slot,
            id: &feed.id,
            header_line: &feed.header_line,
        };
        peer.create(&start).expect("creates");
    }
    // Interleave the two sessions' batches, as a host thread would.
    let rounds = feeds.iter().map(|f| f.batches.len()).max().unwrap_or(0);
    let mut acks = 0;
    for round in 0..rounds {
        let items: Vec<Item<'_>> = feeds
            .iter()
            .enumerate()
            .filter_map(|(slot, f)| {
                f.batches
                    .get(round)
                    .map(|batch| Item::built(slot, &f.id, batch))
            })
            .collect();
        peer.append(items, &mut |_| acks += 1).expect("appends");
    }
    assert_eq!(acks, feeds.iter().map(|f| f.batches.len()).sum::<usize>());
    drop(peer);

    let db = Connection::open(&path).expect("reopens");
    assert_eq!(schema::user_version(&db).expect("reads"), 17);
    assert_eq!(SCHEMA_VERSION, 17);
    assert_eq!(schema::application_id(&db).expect("reads"), 1_146_308_688);
    assert_eq!(APPLICATION_ID, 1_146_308_688);
    let mode: String = db
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("reads");
    assert_eq!(mode, "wal");
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("lists tables");
    assert_eq!(tables, ["events", "persistence_state", "sessions"]);

    let mut blobs = 0;
    for feed in &feeds {
        let (revision, created_at, depth): (i64, i64, Option<i64>) = db
            .query_row(
                "SELECT revision, created_at, delegation_depth FROM sessions WHERE id = ?",
                [&feed.id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .expect("session row");
        assert_eq!(revision, feed.batches.len() as i64, "one bump per batch");
        let header = parse_header(feed.header_line.as_bytes()).expect("header");
        assert_eq!(
            Some(created_at),
            header
                .object
                .get("createdAt")
                .and_then(Value::as_safe_integer)
        );
        assert!(depth.is_some(), "generated headers carry delegationDepth");
        let rows = select_rows(&db, SELECT_FROM, params![feed.id, 0]).expect("reads rows");
        blobs += rows
            .iter()
            .filter(|r| matches!(r.data, rusqlite::types::Value::Blob(_)))
            .count();
        let stored: Vec<Value> = rows
            .iter()
            .flat_map(|r| decode_row(r).expect("decodes"))
            .collect();
        let written: Vec<Value> = feed
            .batches
            .iter()
            .flat_map(|b| b.events.iter().cloned())
            .collect();
        assert_eq!(stored, written, "session {}", feed.id);
        let packed = rows.iter().filter(|r| r.ignorable == Some(0)).count();
        assert!(packed > 0, "chunk runs are packed");
        assert!(rows.len() < written.len());
    }
    assert!(blobs > 0, "large data (request headers) is stored as zstd");
}

#[test]
fn refuses_a_batch_out_of_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let peer = SqlitePeer::open(&dir.path().join("s.db"), Durability::Buffered).expect("opens");
    let feed = session_batches(0, &feed_opts());
    let start = SessionStart {
        slot: 0,
        id: &feed.id,
        header_line: &feed.header_line,
    };
    peer.create(&start).expect("creates");
    let item = |batch| Item::built(0, &feed.id, batch);
    peer.append(vec![item(&feed.batches[0])], &mut |_| {})
        .expect("first batch");
    let err = peer
        .append(vec![item(&feed.batches[2])], &mut |_| {})
        .expect_err("skipping a batch fails");
    assert!(format!("{err:#}").contains("stored next seq is"), "{err:#}");
    peer.append(vec![item(&feed.batches[1])], &mut |_| {})
        .expect("the right batch still goes in");
}
