//! `.jsonl.zstd` sessions against the Node-made vectors: frames kept verbatim, plaintext export
//! equal to DSH's files, torn final frames, and engine-authored frames equal to Node's.

use sessionlog::engine::{ExportFormat, Verdict};

use crate::fixtures::{events_text, fixtures, import_bytes, names_ending, temp_store};

fn export(store: &sessionlog::engine::Store, id: &str, format: Option<ExportFormat>) -> Vec<u8> {
    let mut out = Vec::new();
    store
        .export(id, format, &mut out)
        .unwrap_or_else(|e| panic!("export {id}: {e}"));
    out
}

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
            export(&store, &report.id, None),
            bytes,
            "{name}: zstd export is not byte-identical"
        );
        assert_eq!(
            export(&store, &report.id, Some(ExportFormat::JsonlZstd)),
            bytes,
            "{name}"
        );
        let committed_everything =
            plain_report.verdict.is_loadable() && plain_report.verdict != Verdict::Torn;
        if committed_everything
            || matches!(plain_report.verdict, Verdict::Corrupt(ref m) if m.contains("session header"))
        {
            if committed_everything {
                assert_eq!(report.verdict, plain_report.verdict, "{name}");
            }
            if plain_report.verdict != Verdict::Corrupt("first line is not a session header".into())
                || committed_everything
            {
                assert_eq!(
                    export(&store, &report.id, Some(ExportFormat::Jsonl)),
                    plain,
                    "{name}: plaintext export"
                );
            }
        }
        if committed_everything {
            assert_eq!(
                events_text(&store, &report.id).expect("events"),
                events_text(&plain_store, &plain_report.id).expect("events"),
                "{name}"
            );
        }
        let v = store.verify(&[]).expect("verify");
        assert!(v.problems.is_empty(), "{name}: {:?}", v.problems);
        checked += 1;
    }
    assert_eq!(checked, 338, "169 single + 169 perturn vectors");
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
            || plain.len() as u64 != export(&store, &r.id, Some(ExportFormat::Jsonl)).len() as u64;
        if meta_has_tail || r.lines == 0 {
            continue;
        }
        let node = std::fs::read(dir.join("dsh-zstd").join(&name)).expect("vector");
        let ours = export(&store, &r.id, Some(ExportFormat::JsonlZstd));
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
            export(&store, &r.id, None),
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
        assert!(store.verify(&[]).expect("verify").problems.is_empty());
        checked += 1;
    }
    assert_eq!(checked, 23);
}
