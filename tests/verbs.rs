//! The first-contact verbs (`Store::create`, `read_events`, `export_bytes`) are the batch forms
//! they wrap: a session created with its first batch in one commit, or refused whole; its
//! events and bytes as `events` and `export` give them.

use sessionlog::codec::format::header::{author_header, HeaderFields};
use sessionlog::engine::{AppendReceipt, Error, SourceEncoding};

use crate::fixtures::{ev, temp_store};

fn header(id: &str) -> String {
    author_header(&HeaderFields {
        id: id.into(),
        created_at: 1,
        version: 4,
        ..HeaderFields::default()
    })
}

fn first_turn() -> Vec<sessionlog::codec::format::event::NewEvent> {
    vec![
        ev(r#"{"type":"turn/start","data":{"turn":1}}"#),
        ev(
            r#"{"type":"user/message","data":{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        ),
        ev(r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#),
    ]
}

#[test]
fn create_stores_the_header_and_first_batch_in_one_commit() {
    let (_dir, store) = temp_store();
    let before = store.commit_stats().writes;
    let receipt = store
        .create(&header("s"), SourceEncoding::Jsonl, first_turn())
        .expect("create");
    assert_eq!(
        receipt,
        AppendReceipt {
            first_seq: 0,
            count: 3
        }
    );
    assert_eq!(store.commit_stats().writes, before + 1, "one commit");
    let bytes = store.export_bytes("s").expect("export_bytes");
    let mut exported = Vec::new();
    store.export("s", None, &mut exported).expect("export");
    assert_eq!(bytes, exported);
    assert!(bytes.starts_with(header("s").as_bytes()));
}

#[test]
fn create_of_a_stored_id_is_refused_whole() {
    let (_dir, store) = temp_store();
    store
        .create(&header("s"), SourceEncoding::Jsonl, first_turn())
        .expect("create");
    let before = store.export_bytes("s").expect("export");
    let again = store.create(&header("s"), SourceEncoding::JsonlZstd, first_turn());
    assert!(
        matches!(again, Err(Error::DuplicateSession { .. })),
        "{again:?}"
    );
    assert_eq!(store.export_bytes("s").expect("export"), before);
    let refused = store.create("not a header", SourceEncoding::Jsonl, first_turn());
    assert!(
        matches!(refused, Err(Error::Rejected { .. })),
        "{refused:?}"
    );
}

#[test]
fn read_events_is_the_events_in_a_seq_range() {
    let (_dir, store) = temp_store();
    store
        .create(&header("s"), SourceEncoding::Jsonl, first_turn())
        .expect("create");
    let mut streamed = Vec::new();
    store
        .events("s", 1, Some(2), &mut |_, e| {
            streamed.push(e.clone());
            Ok(())
        })
        .expect("events");
    assert_eq!(store.read_events("s", 1, Some(2)).expect("read"), streamed);
    assert_eq!(streamed.len(), 2);
    assert_eq!(store.read_events("s", 0, None).expect("read").len(), 3);
    assert!(matches!(
        store.read_events("missing", 0, None),
        Err(Error::UnknownSession { .. })
    ));
}
