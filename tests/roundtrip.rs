//! Generated sessions at modest scale: import, export byte-exactly, verify; and an import large
//! enough to spill several WriteBatches stays atomic when it is refused midway.

use sessionlog::engine::{Durability, Error, ImportOptions, Options, Store};
use sessionlog_harness::gen::{generate, session_bytes, GenOptions};
use sessionlog_tools_common::export::export_stream;

use crate::fixtures::{assert_empty, export_bytes, temp_store};

#[test]
fn generated_sessions_round_trip_through_a_directory_import() {
    let tmp = tempfile::tempdir().expect("tmp");
    let opts = GenOptions {
        sessions: 40,
        events_per_session: 800,
        torn_fraction: 0.1,
        seed: 7,
    };
    let report = generate(&tmp.path().join("corpus"), &opts).expect("generate");
    assert_eq!(report.files, 40);
    let (_d, store) = temp_store();
    let mut files: Vec<_> = std::fs::read_dir(tmp.path().join("corpus"))
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let mut torn = 0;
    for f in &files {
        let bytes = std::fs::read(f).expect("read");
        let r = store
            .import_jsonl(
                &f.display().to_string(),
                bytes.as_slice(),
                &ImportOptions::default(),
                &mut |_| {},
            )
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(r.verdict.is_loadable(), "{}: {}", f.display(), r.verdict);
        torn += u32::from(r.verdict.to_string() == "torn");
        assert_eq!(export_bytes(&store, &r.id), bytes, "{}", f.display());
    }
    assert!(torn > 0, "the generator was asked for torn tails");
    let v = store.verify(&[]).expect("verify");
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    assert_eq!(v.sessions, 40);
}

/// Many sessions exported into one stream by parallel workers are written in the order asked
/// (here the reverse of their import), each exactly as it was imported: small ones buffered by
/// the workers, one above the buffering bound (16 MiB) exported in place by the writer.
#[test]
fn an_export_stream_is_the_sessions_files_one_after_another() {
    let (_d, store) = temp_store();
    let mut sessions = Vec::new();
    for index in 0..12 {
        let opts = GenOptions {
            sessions: 12,
            events_per_session: if index == 5 { 240_000 } else { 300 },
            torn_fraction: 0.0,
            seed: 11,
        };
        let bytes = session_bytes(index, &opts);
        let r = store
            .import_jsonl(
                &format!("s{index}"),
                bytes.as_slice(),
                &ImportOptions::default(),
                &mut |_| {},
            )
            .expect("import");
        sessions.push((r.id, bytes));
    }
    assert!(
        sessions[5].1.len() > 16 << 20,
        "one session above the bound"
    );
    sessions.reverse();
    let ids: Vec<String> = sessions.iter().map(|(id, _)| id.clone()).collect();
    let expected: Vec<u8> = sessions
        .iter()
        .flat_map(|(_, b)| b.iter().copied())
        .collect();
    let mut out = Vec::new();
    let written = export_stream(&store, &ids, None, &mut out).expect("export stream");
    assert_eq!(written, out.len() as u64);
    assert!(
        out == expected,
        "the stream differs from the files in order"
    );
}

#[test]
fn a_refused_spilled_import_leaves_nothing_and_reopen_is_clean() {
    let tmp = tempfile::tempdir().expect("tmp");
    let options = Options {
        durability: Durability::Buffered,
        import_batch_bytes: 1 << 16,
        ..Options::default()
    };
    let opts = GenOptions {
        sessions: 1,
        events_per_session: 3000,
        torn_fraction: 1.0,
        seed: 3,
    };
    let bytes = session_bytes(0, &opts);
    {
        let store = Store::open(tmp.path(), options.clone()).expect("open");
        match store.import_jsonl(
            "big",
            bytes.as_slice(),
            &ImportOptions {
                strict: true,
                ..Default::default()
            },
            &mut |_| {},
        ) {
            Err(Error::StrictRejected { verdict, .. }) => assert_eq!(verdict, "torn"),
            other => panic!("expected a strict refusal, got {other:?}"),
        }
        assert_empty(&store);
    }
    let store = Store::open(tmp.path(), options).expect("reopen");
    assert_empty(&store);
    let r = store
        .import_jsonl(
            "big",
            bytes.as_slice(),
            &ImportOptions::default(),
            &mut |_| {},
        )
        .expect("import");
    assert_eq!(export_bytes(&store, &r.id), bytes);
}
