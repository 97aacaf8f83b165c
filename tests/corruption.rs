//! Corruption of a closed store's files: bytes flipped in SST files (events and sessions data),
//! in blob files (the events' blocks, with `Options::blob_files`) and in the write-ahead log. Opening or reading reports
//! the corruption (RocksDB's checksums, paranoid checks, our crc32 per block); an export never
//! returns wrong bytes; `verify` finds a damaged block and names its session.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sessionlog::engine::{Durability, ImportOptions, Options, Store};
use sessionlog_harness::gen::{session, GenOptions, GenSession};
use sessionlog_harness::stress::Rng;

use crate::fixtures::copy_dir;

const SESSIONS: u64 = 6;

fn options() -> Options {
    Options {
        durability: Durability::Buffered,
        ..Options::default()
    }
}

/// The events' blocks in blob files (`Options::blob_files`).
fn blob_options() -> Options {
    Options {
        blob_files: true,
        ..options()
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
    probe_with(dir, files, &options())
}

fn probe_with(dir: &Path, files: &HashMap<String, Vec<u8>>, options: &Options) -> Outcome {
    let mut out = Outcome::default();
    let store = match Store::open(dir, options.clone()) {
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

/// Where one trial flips a byte: a file of the clean store, the offset bound, and whether the
/// byte is the events' data (then an export must fail and `verify` must name its session).
struct Target {
    file: PathBuf,
    within: u64,
    in_data: bool,
}

impl Target {
    /// Anywhere in `file`.
    fn whole(file: PathBuf, in_data: bool) -> Target {
        let within = std::fs::metadata(&file).expect("stat").len();
        Target {
            file,
            within,
            in_data,
        }
    }
}

/// 24 trials, each flipping one byte of a copy of a flushed store written with `options` where
/// `target(trial, rng, clean store)` says; at least two thirds must be detected, and no export
/// may return wrong bytes.
fn flip_trials(options: &Options, what: &str, target: impl Fn(u64, &mut Rng, &Path) -> Target) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let clean = tmp.path().join("clean");
    let files = pristine_with(&clean, true, options);
    let mut rng = Rng::new(0x00c0_ffee);
    let (mut cases, mut detected) = (0, 0);
    for trial in 0..24u64 {
        let dir = tmp.path().join(format!("t{trial}"));
        copy_dir(&clean, &dir);
        let t = target(trial, &mut rng, &clean);
        let path = dir.join(t.file.file_name().expect("name"));
        flip(&path, rng.range(0, t.within) as usize, 1 << rng.range(0, 8));
        let out = probe_with(&dir, &files, options);
        cases += 1;
        detected += u64::from(out.detected());
        if t.in_data && !out.open_failed {
            assert!(
                !out.export_failed.is_empty(),
                "trial {trial}: damaged data went unnoticed by export: {out:?}"
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
    eprintln!("corruption: {what} flips detected {detected}/{cases}");
    assert!(
        detected * 3 >= cases * 2,
        "only {detected} of {cases} {what} flips were detected"
    );
}

/// Any SST of `clean`, anywhere in it: not necessarily data an export reads.
fn any_sst(rng: &mut Rng, clean: &Path) -> Target {
    let ssts = files_with(clean, "sst");
    assert!(!ssts.is_empty(), "no SST files were written");
    Target::whole(
        ssts[rng.range(0, ssts.len() as u64) as usize].clone(),
        false,
    )
}

#[test]
fn flipped_bytes_in_sst_files_are_reported_never_returned() {
    // The largest SST (the events data) most of the time; any SST otherwise.
    flip_trials(&options(), "SST", |trial, rng, clean| {
        if trial % 3 == 2 {
            return any_sst(rng, clean);
        }
        // Data blocks come first in an SST; the first half of the largest file is data.
        let whole = Target::whole(files_with(clean, "sst").remove(0), true);
        Target {
            within: whole.within / 2,
            ..whole
        }
    });
}

#[test]
fn with_blob_files_flipped_bytes_in_blob_and_sst_files_are_reported_never_returned() {
    // The largest blob file (the events' blocks) most of the time; any SST otherwise.
    flip_trials(&blob_options(), "blob and SST", |trial, rng, clean| {
        if trial % 3 == 2 {
            return any_sst(rng, clean);
        }
        let blobs = files_with(clean, "blob");
        assert!(!blobs.is_empty(), "no blob files were written");
        Target::whole(blobs[0].clone(), true)
    });
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

/// With recycled WALs (the default under `Durability::Sync`) RocksDB's replay would end at a
/// flipped WAL byte and silently drop every acknowledged write after it; the WAL audit refuses
/// the open instead, naming the file. Flips land before the last import's record (six imports of
/// similar size): damage inside the last record reads as a torn write (docs/RELIABILITY.md).
#[test]
fn with_recycled_wals_a_flipped_wal_byte_fails_the_open() {
    let recycling = Options {
        durability: Durability::Sync,
        ..options()
    };
    assert!(recycling.recycles_wal());
    let tmp = tempfile::tempdir().expect("temp dir");
    let clean = tmp.path().join("clean");
    let files = pristine_with(&clean, false, &recycling);
    let wal = files_with(&clean, "log")
        .first()
        .expect("a non-empty WAL")
        .file_name()
        .expect("name")
        .to_owned();
    let mut rng = Rng::new(0x3a2);
    for trial in 0..16u64 {
        let dir = tmp.path().join(format!("r{trial}"));
        copy_dir(&clean, &dir);
        let path = dir.join(&wal);
        let len = std::fs::metadata(&path).expect("stat").len();
        flip(
            &path,
            rng.range(0, len * 2 / 3) as usize,
            1 << rng.range(0, 8),
        );
        for options in [recycling.clone(), options()] {
            let err = Store::open(&dir, options).expect_err("a flipped WAL byte fails the open");
            let text = err.to_string();
            assert!(
                text.contains("orrupt") && text.contains(&*wal.to_string_lossy()),
                "trial {trial}: {text}"
            );
        }
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
    let store = Store::open(&clean, recycling).expect("the undamaged store opens");
    for (id, want) in &files {
        let mut got = Vec::new();
        store.export(id, None, &mut got).expect("export");
        assert!(got == *want, "{id} differs");
    }
}
