//! Repair and resume with DSH's semantics: closers byte-identical to DSH's, torn tails cut
//! (bytes before the cut unchanged), recovered zstd records re-appended, end-seed idempotent.

use sessionlog::engine::{ExportFormat, Verdict};

use crate::fixtures::{
    events_text, export_bytes, fixtures, import_bytes, names_ending, temp_store,
};

#[test]
fn repair_of_an_open_turn_writes_dsh_s_closer_lines() {
    let Some(dir) = fixtures() else { return };
    let name = "examples__headless-agent__tests__semantic-checkpoint-snapshots__tool-outcome-unknown__session.expected.jsonl";
    let full = std::fs::read(dir.join("dsh").join(name)).expect("fixture");
    let lines: Vec<&[u8]> = full.split_inclusive(|&b| b == b'\n').collect();
    let first_six: Vec<u8> = lines[..6].concat();
    let (_d, store) = temp_store();
    let r = import_bytes(&store, name, &first_six, false).expect("import");
    let report = store.repair(&r.id).expect("repair");
    assert_eq!((report.closers, report.cut_bytes), (3, 0));
    assert_eq!(
        export_bytes(&store, &r.id),
        lines[..9].concat(),
        "lines 7-9 must be DSH's closers"
    );
    let again = store.repair(&r.id).expect("second repair");
    assert_eq!(again.closers, 0, "a balanced log needs no closers");
    let resumed = store.resume(&r.id).expect("resume");
    assert!(resumed.end_seed);
    let after = export_bytes(&store, &r.id);
    let last = after
        .split(|&b| b == b'\n')
        .rev()
        .nth(1)
        .expect("last line");
    assert!(
        last.starts_with(b"{\"type\":\"session/end-seed\",\"seq\":8,\"time\":"),
        "{}",
        String::from_utf8_lossy(last)
    );
    assert!(
        !store.resume(&r.id).expect("resume again").end_seed,
        "end-seed is idempotent"
    );
    assert_eq!(export_bytes(&store, &r.id), after);
    assert!(store.verify(&[]).expect("verify").problems.is_empty());
}

#[test]
fn a_torn_jsonl_tail_is_cut_and_the_turn_closed() {
    let header =
        r#"{"type":"session","version":0,"id":"t","createdAt":1,"cwd":"/w","delegationDepth":0}"#;
    let body = "{\"type\":\"turn/start\",\"seq\":0,\"time\":5,\"data\":{\"turn\":1}}\n{\"type\":\"step/start\",\"seq\":1,\"time\":6,\"data\":{\"turn\":1,\"step\":1}}\n";
    let torn = format!("{header}\n{body}{{\"type\":\"assistant/chunk\",\"seq\":2,\"ti");
    let (_d, store) = temp_store();
    let r = import_bytes(&store, "torn", torn.as_bytes(), false).expect("import");
    assert_eq!(r.verdict, Verdict::Torn);
    let report = store.repair("t").expect("repair");
    let tail = (torn.len() - header.len() - 1 - body.len()) as u64;
    assert_eq!((report.cut_bytes, report.closers), (tail, 2));
    let expected = format!("{header}\n{body}{{\"type\":\"step/end\",\"seq\":2,\"time\":6,\"data\":{{\"turn\":1,\"step\":1}}}}\n{{\"type\":\"turn/end\",\"seq\":3,\"time\":6,\"data\":{{\"turn\":1,\"reason\":{{\"kind\":\"interrupted\"}}}}}}\n");
    assert_eq!(
        String::from_utf8(export_bytes(&store, "t")).expect("utf8"),
        expected
    );
    assert_eq!(store.list().expect("list")[0].verdict, Verdict::Clean);
    assert!(store.verify(&[]).expect("verify").problems.is_empty());
    let ev = sessionlog::codec::format::event::NewEvent::from_value(
        &sessionlog::codec::json::parse(r#"{"type":"turn/start","data":{"turn":2}}"#)
            .expect("json"),
    )
    .expect("event");
    store
        .append("t", Some(4), vec![ev])
        .expect("appends work after repair");
}

#[test]
fn torn_zstd_vectors_repair_to_a_clean_log_with_one_new_frame() {
    let Some(dir) = fixtures() else { return };
    let mut repaired = 0;
    for name in names_ending(&dir.join("dsh-zstd"), &[".torn.jsonl.zstd"]) {
        let bytes = std::fs::read(dir.join("dsh-zstd").join(&name)).expect("vector");
        let (_d, store) = temp_store();
        let r = store
            .import_zstd(&name, &bytes, &Default::default())
            .expect("import");
        if r.verdict != Verdict::Torn {
            continue;
        }
        let scan = sessionlog::codec::format::zstd::scan_frames(&bytes).expect("scan");
        let cut = scan.torn_start.expect("torn");
        let report = store.repair(&r.id).expect("repair");
        assert_eq!(report.cut_bytes, (bytes.len() - cut) as u64, "{name}");
        let after = export_bytes(&store, &r.id);
        assert_eq!(
            &after[..cut],
            &bytes[..cut],
            "{name}: bytes before the cut changed"
        );
        let rescan = sessionlog::codec::format::zstd::scan_frames(&after).expect("rescan");
        assert!(rescan.torn_start.is_none());
        let added = rescan.frames.len() - scan.frames.len();
        assert_eq!(
            added,
            usize::from(report.closers + report.recovered > 0),
            "{name}: one new frame at most"
        );
        // The repaired file re-imports clean, with the same events.
        let (_d2, again) = temp_store();
        let r2 = again
            .import_zstd("again", &after, &Default::default())
            .expect("re-import");
        assert_eq!(r2.verdict, Verdict::Clean, "{name}");
        assert_eq!(
            events_text(&again, &r2.id).expect("events"),
            events_text(&store, &r.id).expect("events")
        );
        let mut plain = Vec::new();
        store
            .export(&r.id, Some(ExportFormat::Jsonl), &mut plain)
            .expect("plain");
        assert!(
            store.verify(&[]).expect("verify").problems.is_empty(),
            "{name}"
        );
        repaired += 1;
    }
    assert!(repaired >= 10, "only {repaired} torn vectors were repaired");
}
