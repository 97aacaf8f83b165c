//! Direct I/O for flush and compaction (`Options::direct_io`, the default): the store uses it
//! exactly where the option is set and the directory's filesystem takes `O_DIRECT`, and a store
//! flushed and compacted that way reads back every acknowledged batch, with or without the
//! option at the next open.

use std::path::Path;

use sessionlog::engine::{direct_io_supported, Options, Store};
use sessionlog_harness::gen::{session_batches, GenOptions, SessionFeed};

use crate::fixtures::{export_bytes, host_feed};

/// Table files (flushed or compacted) in the store directory.
fn table_files(db: &Path) -> usize {
    std::fs::read_dir(db)
        .expect("store dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        })
        .count()
}

#[test]
fn direct_io_is_used_where_asked_and_the_filesystem_takes_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let supported = direct_io_supported(dir.path());
    if std::env::var_os("CI").is_some() {
        // CI runs on ext4, which takes O_DIRECT: the default path must be the one tested.
        assert!(supported, "the CI filesystem refused O_DIRECT");
    }
    let store = Store::open(dir.path().join("on"), Options::default()).expect("open");
    assert_eq!(store.direct_io(), supported);
    let off = Options {
        direct_io: false,
        ..Options::default()
    };
    let store = Store::open(dir.path().join("off"), off).expect("open");
    assert!(!store.direct_io());
}

#[test]
fn a_store_flushed_and_compacted_with_direct_io_reads_back_every_batch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("db");
    let small_memtables = Options {
        write_buffer_bytes: 1 << 20,
        ..Options::default()
    };
    let gen = GenOptions {
        sessions: 1,
        events_per_session: 400,
        seed: 11,
        torn_fraction: 0.0,
    };
    let store = Store::open(&db, small_memtables.clone()).expect("open");
    let feeds: Vec<SessionFeed> = (0..40).map(|i| session_batches(i, &gen)).collect();
    for feed in &feeds {
        host_feed(&store, feed);
    }
    store.compact().expect("compact");
    assert!(table_files(&db) > 0, "nothing was flushed");
    let used = store.direct_io();
    drop(store);
    let buffered = Options {
        direct_io: false,
        ..small_memtables.clone()
    };
    for options in [buffered, small_memtables] {
        let store = Store::open(&db, options).expect("reopen");
        for feed in &feeds {
            assert!(
                export_bytes(&store, &feed.id) == feed.dsh_bytes(),
                "session {} differs after reopening (written with direct I/O: {used})",
                feed.id
            );
        }
        let report = store.verify(&[]).expect("verify");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}
