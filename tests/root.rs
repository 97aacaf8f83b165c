//! DSH session roots: a root of generated sessions in both encodings round-trips through
//! import and export to an identical tree; layouts DSH refuses are refused with its reasons.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sessionlog::engine::{scan_root, Error, ExportFormat, ImportOptions, Store};
use sessionlog_harness::gen::{session_bytes, GenOptions};

use crate::fixtures::{import_bytes, temp_store};

/// Every file under `dir`, by relative path.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.insert(
                    p.strip_prefix(base).expect("prefix").to_path_buf(),
                    std::fs::read(&p).expect("read"),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn import_root(store: &Store, root: &Path) -> (usize, Vec<(PathBuf, Error)>) {
    let scan = scan_root(root).expect("scan");
    let mut ok = 0;
    for (location, generations) in scan.sessions {
        let options = ImportOptions {
            location: Some(location.clone()),
            generations: Some(generations),
            ..ImportOptions::default()
        };
        store
            .import_path(&location.path, &options, &mut |_| {})
            .unwrap_or_else(|e| panic!("{}: {e}", location.path.display()));
        ok += 1;
    }
    (ok, scan.refused)
}

/// A root of `n` generated sessions, every other one as `.jsonl.zstd`.
fn generated_root(n: u64, root: &Path) {
    let (_t, store) = temp_store();
    let opts = GenOptions {
        sessions: n,
        events_per_session: 150,
        seed: 11,
        torn_fraction: 0.05,
    };
    for i in 0..n {
        let r = import_bytes(&store, "gen", &session_bytes(i, &opts), false).expect("import");
        let format = if i % 2 == 0 {
            ExportFormat::JsonlZstd
        } else {
            ExportFormat::Jsonl
        };
        store
            .export_to_root(root, &r.id, Some(format))
            .expect("export to root");
    }
}

#[test]
fn a_generated_root_round_trips_to_an_identical_tree() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (first, second) = (tmp.path().join("root1"), tmp.path().join("root2"));
    generated_root(300, &first);
    let (_t, store) = temp_store();
    let (imported, refused) = import_root(&store, &first);
    assert_eq!((imported, refused.len()), (300, 0));
    for id in store.ids().expect("ids") {
        store.export_to_root(&second, &id, None).expect("export");
    }
    let (a, b) = (tree(&first), tree(&second));
    assert_eq!(a.len(), 300);
    assert!(
        a.keys().any(|p| p.ends_with("session.jsonl"))
            && a.keys().any(|p| p.ends_with("session.jsonl.zstd"))
    );
    assert!(a == b, "the exported tree differs from the imported one");
}

#[test]
fn layouts_dsh_refuses_are_reported_and_not_imported() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("root");
    generated_root(4, &root);
    let project = std::fs::read_dir(&root)
        .expect("root")
        .next()
        .expect("a project")
        .expect("entry")
        .path();
    std::fs::write(project.join("flat.jsonl"), b"{}\n").expect("flat file");
    let mut session_dirs: Vec<PathBuf> = Vec::new();
    for p in std::fs::read_dir(&root).expect("root") {
        let p = p.expect("project").path();
        session_dirs.extend(
            std::fs::read_dir(&p)
                .expect("project")
                .map(|e| e.expect("e").path())
                .filter(|p| p.is_dir()),
        );
    }
    session_dirs.sort();
    let both = &session_dirs[0];
    let other = if both.join("session.jsonl").exists() {
        "session.jsonl.zstd"
    } else {
        "session.jsonl"
    };
    std::fs::write(both.join(other), b"x").expect("second encoding");
    // A session dir whose name no longer matches its header id.
    let moved = &session_dirs[1];
    std::fs::rename(moved, moved.with_file_name("renamed-session")).expect("rename");

    let scan = scan_root(&root).expect("scan");
    let reasons: Vec<String> = scan.refused.iter().map(|(_, e)| e.to_string()).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("unsupported flat-file layout")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("holds both session.jsonl and session.jsonl.zstd")),
        "{reasons:?}"
    );
    let (_t, store) = temp_store();
    let mut identity = 0;
    for (location, generations) in scan.sessions {
        let options = ImportOptions {
            location: Some(location.clone()),
            generations: Some(generations),
            ..ImportOptions::default()
        };
        match store.import_path(&location.path, &options, &mut |_| {}) {
            Ok(_) => {}
            Err(Error::Identity(m)) => {
                assert!(m.contains("and cwd identify"), "{m}");
                identity += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(identity, 1);
    assert_eq!(store.list().expect("list").len(), 2);
}
