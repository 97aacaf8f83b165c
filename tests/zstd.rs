//! `.jsonl.zstd` sessions against the Node-made vectors: frames kept verbatim, plaintext export
//! equal to DSH's files whatever their verdict (`zstd -dc`) and re-importing alike, torn final
//! frames, and engine-authored frames equal to Node's.

use sessionlog::engine::{ExportFormat, ImportReport, Store, Verdict};

use crate::fixtures::{events_text, export_as, fixtures, import_bytes, names_ending, temp_store};

#[test]
fn node_vectors_round_trip_and_decode_to_the_dsh_files() {
    let Some(dir) = fixtures() else { return };
    let mut checked = 0;
    let names = names_ending(
        &dir.join("dsh-zstd"),
        &[".single.jsonl.zstd", ".perturn.jsonl.zstd"],
    );
    for name in &names {
        let stem = name
            .trim_end_matches(".jsonl.zstd")
            .trim_end_matches(".single")
            .trim_end_matches(".perturn");
        let bytes = std::fs::read(dir.join("dsh-zstd").join(name)).expect("vector");
        let plain =
            std::fs::read(dir.join("dsh").join(format!("{stem}.jsonl"))).expect("plaintext");
        let (_t, store) = temp_store();
        let (_t2, plain_store) = temp_store();
        let report = store
            .import_zstd(name, &bytes, &Default::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let plain_report = import_bytes(&plain_store, stem, &plain, false).expect("plain import");
        assert_eq!(
            export_as(&store, &report.id, None),
            bytes,
            "{name}: zstd export is not byte-identical"
        );
        assert_eq!(
            export_as(&store, &report.id, Some(ExportFormat::JsonlZstd)),
            bytes,
            "{name}"
        );
        let committed_everything =
            plain_report.verdict.is_loadable() && plain_report.verdict != Verdict::Torn;
        if committed_everything {
            assert_eq!(report.verdict, plain_report.verdict, "{name}");
            assert_eq!(
                events_text(&store, &report.id).expect("events"),
                events_text(&plain_store, &plain_report.id).expect("events"),
                "{name}"
            );
        }
        // `zstd -dc`: every decompressed byte, whatever the verdict.
        let as_jsonl = export_as(&store, &report.id, Some(ExportFormat::Jsonl));
        assert_eq!(as_jsonl, plain, "{name}: plaintext export");
        let (_t3, again) = temp_store();
        let reimported = import_bytes(&again, stem, &as_jsonl, false).expect("re-import");
        assert_same_import(&again, &reimported, &plain_store, &plain_report, name);
        let v = store.verify(&[]).expect("verify");
        assert!(v.problems.is_empty(), "{name}: {:?}", v.problems);
        checked += 1;
    }
    assert_eq!(checked, 338, "169 single + 169 perturn vectors");
}

/// The same verdict and logical events from two imports.
fn assert_same_import(
    store: &Store,
    report: &ImportReport,
    peer: &Store,
    peer_report: &ImportReport,
    name: &str,
) {
    assert_eq!(
        report.verdict, peer_report.verdict,
        "{name}: re-import verdict"
    );
    assert_eq!(
        (report.events, report.lines),
        (peer_report.events, peer_report.lines),
        "{name}: re-import counts"
    );
    if report.verdict.is_loadable() {
        assert_eq!(
            events_text(store, &report.id).expect("events"),
            events_text(peer, &peer_report.id).expect("events"),
            "{name}: re-imported events"
        );
    }
}

/// What `zstd -dc` writes for `bytes`, computed frame by frame with the reader DSH's import uses.
fn zstd_dc(bytes: &[u8]) -> Vec<u8> {
    let log = sessionlog::codec::format::zstd::read_frames(bytes).expect("frames");
    let mut out: Vec<u8> = log.frames.into_iter().flat_map(|f| f.plaintext).collect();
    out.extend(log.torn.map(|t| t.recovered).unwrap_or_default());
    out
}

#[test]
fn plain_imports_export_frames_identical_to_node() {
    let Some(dir) = fixtures() else { return };
    let mut compared = 0;
    for name in names_ending(&dir.join("dsh-zstd"), &[".single.jsonl.zstd"]) {
        let stem = name.trim_end_matches(".single.jsonl.zstd");
        let plain =
            std::fs::read(dir.join("dsh").join(format!("{stem}.jsonl"))).expect("plaintext");
        let (_t, store) = temp_store();
        let r = import_bytes(&store, stem, &plain, false).expect("import");
        let meta_has_tail = r.verdict == Verdict::Torn
            || plain.len() as u64
                != export_as(&store, &r.id, Some(ExportFormat::Jsonl)).len() as u64;
        if meta_has_tail || r.lines == 0 {
            continue;
        }
        let node = std::fs::read(dir.join("dsh-zstd").join(&name)).expect("vector");
        let ours = export_as(&store, &r.id, Some(ExportFormat::JsonlZstd));
        if ours == node {
            compared += 1;
            continue;
        }
        // A body with an uncommitted tail cannot be framed: only committed bodies must match.
        let committed_all = events_text(&store, &r.id)
            .map(|t| t.lines().count())
            .unwrap_or(0)
            > 0
            && r.verdict.is_loadable();
        assert!(!committed_all, "{stem}: our frames differ from Node's");
    }
    assert!(
        compared >= 120,
        "only {compared} single-frame vectors compared equal"
    );
}

#[test]
fn torn_vectors_are_torn_and_keep_the_complete_frames() {
    let Some(dir) = fixtures() else { return };
    let mut checked = 0;
    for name in names_ending(&dir.join("dsh-zstd"), &[".torn.jsonl.zstd"]) {
        let stem = name.trim_end_matches(".torn.jsonl.zstd");
        let bytes = std::fs::read(dir.join("dsh-zstd").join(&name)).expect("vector");
        let plain =
            std::fs::read(dir.join("dsh").join(format!("{stem}.jsonl"))).expect("plaintext");
        let (_t, store) = temp_store();
        let (_t2, plain_store) = temp_store();
        let r = store
            .import_zstd(&name, &bytes, &Default::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let p = import_bytes(&plain_store, stem, &plain, false).expect("plain");
        if p.verdict == Verdict::Clean {
            assert_eq!(r.verdict, Verdict::Torn, "{name}");
        }
        assert_eq!(
            export_as(&store, &r.id, None),
            bytes,
            "{name}: export is not byte-identical"
        );
        let ours = events_text(&store, &r.id).expect("events");
        let full = events_text(&plain_store, &p.id).expect("events");
        assert!(
            full.starts_with(&ours),
            "{name}: recovered events are not a prefix of the log"
        );
        assert!(
            ours.len() < full.len() || p.verdict != Verdict::Clean,
            "{name}: a torn file cannot hold every event"
        );
        // `zstd -dc` of a torn file: the complete frames, then what the torn frame's complete
        // blocks hold (decoded here frame by frame, apart from the export's stream decoder).
        let as_jsonl = export_as(&store, &r.id, Some(ExportFormat::Jsonl));
        assert_eq!(as_jsonl, zstd_dc(&bytes), "{name}: plaintext export");
        assert!(
            plain.starts_with(&as_jsonl),
            "{name}: not a prefix of the log"
        );
        let (_t3, again) = temp_store();
        let reimported = import_bytes(&again, stem, &as_jsonl, false).expect("re-import");
        let ends_on_a_line = as_jsonl.ends_with(b"\n");
        let expected = if ends_on_a_line {
            Verdict::Clean
        } else {
            Verdict::Torn
        };
        if r.verdict == Verdict::Torn {
            assert_eq!(reimported.verdict, expected, "{name}: re-import verdict");
            assert_eq!(
                events_text(&again, &reimported.id).expect("events"),
                ours,
                "{name}"
            );
        }
        assert!(store.verify(&[]).expect("verify").problems.is_empty());
        checked += 1;
    }
    assert_eq!(checked, 23);
}
