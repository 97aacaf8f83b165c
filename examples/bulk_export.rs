//! Bulk export: the whole store written out as a DSH session root
//! (`<root>/--<project>--/<session id>/session[.vN].jsonl[.zstd]`), each file the exact bytes the
//! store holds, which DSH opens as its own; then the root imported into a second store, as
//! `sessionlog import ROOT` does, and every session compared byte for byte.
//!
//! The store holds DSH 0.1 (format V0) sessions kept as `.jsonl` and DSH 0.2 (format V4)
//! sessions kept as `.jsonl.zstd`, created and appended to in calls that carry many sessions'
//! batches at once (`Store::append_many`: one commit per call).
//!
//! Run: `cargo build --release --examples && $CARGO_TARGET_DIR/release/examples/bulk_export`
//! (`./x test` runs it). It exits non-zero if a file or a re-imported session differs.

use std::path::Path;

use sessionlog::codec::format::event::NewEvent;
use sessionlog::codec::format::header::{author_header, HeaderFields};
use sessionlog::codec::json;
use sessionlog::engine::{
    scan_root, AppendItem, ImportOptions, Options, SourceEncoding, Store, Verdict,
};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const SESSIONS: u64 = 40;
const TURNS: u64 = 4;

/// Session `k`: even ones are V0 `.jsonl`, odd ones V4 `.jsonl.zstd`, in one of three projects.
fn session(k: u64) -> (String, u32, SourceEncoding, String) {
    let (version, encoding) = match k % 2 {
        0 => (0, SourceEncoding::Jsonl),
        _ => (4, SourceEncoding::JsonlZstd),
    };
    (
        format!("s{k:03}"),
        version,
        encoding,
        format!("/home/dev/project-{}", k % 3),
    )
}

/// Events per turn ([`turn`]).
const EVENTS_PER_TURN: u64 = 3;

/// Turn `n` of a session: the user's prompt between the turn's markers (events every format
/// shares).
fn turn(n: u64) -> Result<Vec<NewEvent>> {
    let user = format!(
        r#"{{"type":"user/message","data":{{"id":"u{n}","role":"user","content":[{{"type":"text","text":"prompt {n}"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
    );
    let start = format!(r#"{{"type":"turn/start","data":{{"turn":{n}}}}}"#);
    let end =
        format!(r#"{{"type":"turn/end","data":{{"turn":{n},"reason":{{"kind":"completed"}}}}}}"#);
    [start, user, end]
        .iter()
        .map(|line| Ok(NewEvent::from_value(&json::parse(line)?)?))
        .collect()
}

/// Fill `store`: every session created with its first turn in one call, then one call per turn
/// carrying every session's batch.
fn fill(store: &Store) -> Result<()> {
    let mut created = Vec::new();
    for k in 0..SESSIONS {
        let (id, version, encoding, cwd) = session(k);
        let header = author_header(&HeaderFields {
            id: id.clone(),
            created_at: 1_700_000_000_000 + k as i64,
            cwd: Some(cwd),
            version,
            ..HeaderFields::default()
        });
        created.push(AppendItem::new(id, Some(0), turn(1)?).creating(header, encoding));
    }
    store
        .append_many(created)
        .into_iter()
        .try_for_each(|r| r.map(drop))?;
    for n in 2..=TURNS {
        let items = (0..SESSIONS)
            .map(|k| {
                Ok(AppendItem::new(
                    session(k).0,
                    Some((n - 1) * EVENTS_PER_TURN),
                    turn(n)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        store
            .append_many(items)
            .into_iter()
            .try_for_each(|r| r.map(drop))?;
    }
    Ok(())
}

/// Session `id`'s stored bytes, exported.
fn exported(store: &Store, id: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    store.export(id, None, &mut out)?;
    Ok(out)
}

/// Import every session of the DSH root `root` into `store`, as `sessionlog import ROOT` does:
/// each file with its place in the root, which DSH's identity rule checks against its header.
fn import_root(store: &Store, root: &Path) -> Result<u64> {
    let scan = scan_root(root)?;
    assert!(scan.refused.is_empty(), "{:?}", scan.refused);
    for (location, generations) in scan.sessions {
        let options = ImportOptions {
            location: Some(location.clone()),
            generations: Some(generations),
            ..ImportOptions::default()
        };
        let report = store.import_path(&location.path, &options, &mut |_| {})?;
        assert_eq!(report.verdict, Verdict::Clean, "{}", report.id);
        assert_eq!(report.events, TURNS * EVENTS_PER_TURN, "{}", report.id);
    }
    Ok(store.list()?.len() as u64)
}

fn main() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path().join("store"), Options::default())?;
    fill(&store)?;

    // `sessionlog export-all --out ROOT` (which runs a worker per core) does this for every id.
    let root = dir.path().join("root");
    let mut total = 0;
    for id in store.ids()? {
        let (path, bytes) = store.export_to_root(&root, &id, None)?;
        total += bytes;
        assert_eq!(
            std::fs::read(&path)?,
            exported(&store, &id)?,
            "{}",
            path.display()
        );
        let zstd = id.trim_start_matches('s').parse::<u64>()? % 2 == 1;
        let name = if zstd {
            "session.v4.jsonl.zstd"
        } else {
            "session.jsonl"
        };
        assert_eq!(path.file_name().and_then(|n| n.to_str()), Some(name));
        assert_eq!(
            path.parent()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str()),
            Some(&*id)
        );
    }
    println!(
        "exported {SESSIONS} sessions ({total} bytes) to {}",
        root.display()
    );

    let copy = Store::open(dir.path().join("copy"), Options::default())?;
    let imported = import_root(&copy, &root)?;
    assert_eq!(imported, SESSIONS);
    for id in store.ids()? {
        assert_eq!(exported(&copy, &id)?, exported(&store, &id)?, "{id}");
    }
    println!("imported the root into a second store: {imported} sessions, byte-identical");
    Ok(())
}
