//! The WAL policy: with `wal_recycling` (the default under `Durability::Sync`), obsolete WAL
//! files are overwritten in place (their inode comes back under a newer log number), the store,
//! reopened with or without the option, holds every acknowledged batch, and damage inside a
//! reused file's records fails the open instead of silently ending replay.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sessionlog::engine::{Durability, Options, Store};
use sessionlog_harness::gen::{session_batches, GenOptions, SessionFeed};

use crate::fixtures::{copy_dir, export_bytes, host_feed};

/// The store's WAL files: inode → file name.
fn wal_files(db: &Path) -> Vec<(u64, String)> {
    std::fs::read_dir(db)
        .expect("store dir")
        .map(|e| e.expect("dir entry"))
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| {
            let ino = e.metadata().expect("metadata").ino();
            (ino, e.file_name().to_string_lossy().into_owned())
        })
        .collect()
}

#[test]
fn recycled_wal_files_are_reused_and_keep_every_batch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("db");
    let recycling = Options {
        durability: Durability::Sync,
        wal_recycling: true,
        write_buffer_bytes: 1 << 20,
        ..Options::default()
    };
    let gen = GenOptions {
        sessions: 1,
        events_per_session: 400,
        seed: 5,
        torn_fraction: 0.0,
    };
    let store = Store::open(&db, recycling.clone()).expect("open");
    let mut names_by_inode: HashMap<u64, String> = HashMap::new();
    let mut reused = None;
    let mut feeds: Vec<SessionFeed> = Vec::new();
    while reused.is_none() && feeds.len() < 300 {
        let feed = session_batches(feeds.len() as u64, &gen);
        host_feed(&store, &feed);
        feeds.push(feed);
        for (ino, name) in wal_files(&db) {
            match names_by_inode.insert(ino, name.clone()) {
                Some(old) if old != name => reused = Some((old, name)),
                _ => {}
            }
        }
    }
    let (old, new) =
        reused.unwrap_or_else(|| panic!("no WAL file was reused after {} sessions", feeds.len()));
    eprintln!("WAL {old} reused as {new} after {} sessions", feeds.len());
    // A few more sessions write into the reused file, over its previous life's records.
    for index in 0..3 {
        let feed = session_batches(1000 + index, &gen);
        host_feed(&store, &feed);
        feeds.push(feed);
    }
    drop(store);
    let plain = Options {
        wal_recycling: false,
        ..Options::default()
    };
    // The reused file holds this life's records over its previous life's: a flipped byte in its
    // first record is damage with complete records after it.
    let damaged = dir.path().join("damaged");
    copy_dir(&db, &damaged);
    let wal = damaged.join(&new);
    let mut bytes = std::fs::read(&wal).expect("read WAL");
    bytes[40] ^= 0x08;
    std::fs::write(&wal, bytes).expect("write WAL");
    for options in [recycling.clone(), plain.clone()] {
        let err = Store::open(&damaged, options).expect_err("damage inside the reused WAL");
        let text = err.to_string();
        assert!(text.contains("corrupt") && text.contains(&new), "{text}");
    }
    for options in [plain, recycling] {
        let store = Store::open(&db, options.clone()).expect("reopen");
        for feed in &feeds {
            assert!(
                export_bytes(&store, &feed.id) == feed.dsh_bytes(),
                "session {} differs after reopening (wal_recycling {})",
                feed.id,
                options.wal_recycling
            );
        }
        let report = store.verify(&[]).expect("verify");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}
