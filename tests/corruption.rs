//! Corruption of a closed store's files: bytes flipped in blob files (the events' blocks), in SST
//! files (keys, indexes, sessions data) and in the write-ahead log. Opening or reading reports
//! the corruption (RocksDB's checksums, paranoid checks, our crc32 per block); an export never
//! returns wrong bytes; `verify` finds a damaged block and names its session.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sessionlog::engine::{Durability, ImportOptions, Options, Store};
use sessionlog_tools::gen::{session, GenOptions, GenSession};
use sessionlog_tools::stress::Rng;

const SESSIONS: u64 = 6;

fn options() -> Options {
    Options {
        durability: Durability::Buffered,
        ..Options::default()
    }
}

/// The `i`th generated session of the damaged stores.
fn generated(i: u64) -> GenSession {
    session(
        i,
        &GenOptions {
            events_per_session: 600,
            seed: 11,
            torn_fraction: 0.0,
            ..GenOptions::default()
        },
    )
}

/// A closed store holding `SESSIONS` generated sessions, imported in order, and their bytes by
/// id. With `flushed`, the store is reopened once so its data moves from the WAL into SST and blob
/// files.
fn pristine(dir: &Path, flushed: bool) -> HashMap<String, Vec<u8>> {
    pristine_with(dir, flushed, &options())
}

fn pristine_with(dir: &Path, flushed: bool, options: &Options) -> HashMap<String, Vec<u8>> {
    let mut files = HashMap::new();
    {
        let store = Store::open(dir, options.clone()).expect("open");
        for i in 0..SESSIONS {
            let s = generated(i);
            store
                .import_jsonl(&s.id, &s.bytes[..], &ImportOptions::default(), &mut |_| {})
                .expect("import");
            files.insert(s.id, s.bytes);
        }
        store.sync().expect("sync");
    }
    if flushed {
        drop(Store::open(dir, options.clone()).expect("reopen"));
    }
    files
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
    }
}

/// Files of `dir` ending in `ext`, largest first.
fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .map(|p| (std::fs::metadata(&p).expect("stat").len(), p))
        .filter(|(len, _)| *len > 0)
        .collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.0));
    v.into_iter().map(|(_, p)| p).collect()
}

fn flip(path: &Path, offset: usize, mask: u8) {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[offset] ^= mask;
    std::fs::write(path, bytes).expect("write");
}

/// What a damaged store does: how the damage surfaced.
#[derive(Debug, Default)]
struct Outcome {
    open_failed: bool,
    export_failed: Vec<String>,
    verify_named: Vec<String>,
}

impl Outcome {
    fn detected(&self) -> bool {
        self.open_failed || !self.export_failed.is_empty() || !self.verify_named.is_empty()
    }
}

/// Open, export every session, verify; assert no export returns wrong bytes.
fn probe(dir: &Path, files: &HashMap<String, Vec<u8>>) -> Outcome {
    let mut out = Outcome::default();
    let store = match Store::open(dir, options()) {
        Ok(s) => s,
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains("orrupt") || text.contains("checksum") || text.contains("mismatch"),
                "open failed without naming corruption: {text}"
            );
            out.open_failed = true;
            return out;
        }
    };
    for (id, want) in files {
        let mut got = Vec::new();
        match store.export(id, None, &mut got) {
            Ok(_) => assert!(got == *want, "export of {id} returned wrong bytes"),
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains(id.as_str()) || text.contains("orrupt"),
                    "{text}"
                );
                out.export_failed.push(id.clone());
            }
        }
    }
    match store.verify(&[]) {
        Ok(r) => out.verify_named = r.problems.into_iter().map(|p| p.session).collect(),
        Err(e) => panic!("verify failed instead of reporting the damage: {e}"),
    }
    out
}

#[test]
fn flipped_bytes_in_blob_and_sst_files_are_reported_never_returned() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let clean = tmp.path().join("clean");
    let files = pristine(&clean, true);
    let blobs = files_with(&clean, "blob");
    let ssts = files_with(&clean, "sst");
    assert!(!blobs.is_empty(), "no blob files were written");
    assert!(!ssts.is_empty(), "no SST files were written");
    let mut rng = Rng::new(0x00c0_ffee);
    let (mut cases, mut detected) = (0, 0);
    for trial in 0..24u64 {
        let dir = tmp.path().join(format!("t{trial}"));
        copy_dir(&clean, &dir);
        // The largest blob file (the events' blocks) most of the time; any SST otherwise.
        let in_blocks = trial % 3 != 2;
        let file = if in_blocks {
            &blobs[0]
        } else {
            &ssts[rng.range(0, ssts.len() as u64) as usize]
        };
        let path = dir.join(file.file_name().expect("name"));
        let len = std::fs::metadata(&path).expect("stat").len();
        flip(&path, rng.range(0, len) as usize, 1 << rng.range(0, 8));
        let out = probe(&dir, &files);
        cases += 1;
        detected += u64::from(out.detected());
        if in_blocks && !out.open_failed {
            assert!(
                !out.export_failed.is_empty(),
                "trial {trial}: a damaged blob file went unnoticed by export: {out:?}"
            );
            for id in &out.export_failed {
                assert!(
                    out.verify_named.contains(id),
                    "trial {trial}: verify did not name {id}: {out:?}"
                );
            }
        }
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
    eprintln!("corruption: blob and SST flips detected {detected}/{cases}");
    assert!(
        detected * 3 >= cases * 2,
        "only {detected} of {cases} blob and SST flips were detected"
    );
}

#[test]
fn flipped_bytes_in_the_wal_are_reported_never_returned() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let clean = tmp.path().join("clean");
    let files = pristine(&clean, false);
    let wals = files_with(&clean, "log");
    let wal = wals
        .first()
        .expect("a non-empty WAL")
        .file_name()
        .expect("name");
    let mut rng = Rng::new(0x3a1);
    let (mut cases, mut detected) = (0, 0);
    for trial in 0..16u64 {
        let dir = tmp.path().join(format!("w{trial}"));
        copy_dir(&clean, &dir);
        let path = dir.join(wal);
        let len = std::fs::metadata(&path).expect("stat").len();
        // Anywhere but the last record's final bytes, where a flip looks like a torn write.
        flip(
            &path,
            rng.range(0, len * 9 / 10) as usize,
            1 << rng.range(0, 8),
        );
        let out = probe(&dir, &files);
        cases += 1;
        assert!(
            out.open_failed,
            "trial {trial}: a flipped WAL byte was not reported at open: {out:?}"
        );
        detected += 1;
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
    eprintln!("corruption: WAL flips detected {detected}/{cases}");
}

/// The trade-off `Options::wal_recycling` makes (docs/RELIABILITY.md): a flipped WAL byte is not
/// reported; replay ends at it. What opens is still consistent: a prefix of the imports, each
/// session whole or absent, never wrong bytes, `verify` clean.
#[test]
fn with_recycled_wals_a_flipped_wal_byte_ends_replay_at_a_prefix() {
    let recycling = Options {
        wal_recycling: true,
        ..options()
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let clean = tmp.path().join("clean");
    let files = pristine_with(&clean, false, &recycling);
    let order: Vec<String> = (0..SESSIONS).map(|i| generated(i).id).collect();
    let wal = files_with(&clean, "log")
        .first()
        .expect("a non-empty WAL")
        .file_name()
        .expect("name")
        .to_owned();
    let mut rng = Rng::new(0x3a2);
    let mut short = 0;
    for trial in 0..16u64 {
        let dir = tmp.path().join(format!("r{trial}"));
        copy_dir(&clean, &dir);
        let path = dir.join(&wal);
        let len = std::fs::metadata(&path).expect("stat").len();
        flip(
            &path,
            rng.range(0, len * 9 / 10) as usize,
            1 << rng.range(0, 8),
        );
        let store = Store::open(&dir, recycling.clone()).expect("opens: replay ends at the flip");
        let listed = crate::fixtures::listed_ids(&store);
        let present: Vec<&String> = order.iter().filter(|id| listed.contains(id)).collect();
        assert_eq!(
            present,
            order.iter().take(present.len()).collect::<Vec<_>>(),
            "trial {trial}: the sessions left are not a prefix of the imports"
        );
        for id in present {
            let mut got = Vec::new();
            store.export(id, None, &mut got).expect("export");
            assert!(got == files[id], "trial {trial}: {id} is not whole");
        }
        let report = store.verify(&[]).expect("verify");
        assert!(
            report.problems.is_empty(),
            "trial {trial}: {:?}",
            report.problems
        );
        short += usize::from(listed.len() < order.len());
        drop(store);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
    eprintln!("corruption: with recycled WALs, {short} of 16 flips lost sessions silently");
}
