//! Message projections (DSH 0.2's `registerMessageProjection`, later-format-spec §2.3–2.4 and
//! §5.1 cases 26–27): `image/offload` changes the derived messages and `contentGeneration`,
//! never the log; a session whose projection is gone is not read. A store has no projection
//! unless it is given one, as DSH 0.2's `SessionStore`; these sessions are a host's that loads
//! DSH's image-offload plugin (`temp_host_store`), unless a test says otherwise.

use std::sync::Arc;

use sessionlog::codec::json::{parse, stringify, Value};
use sessionlog::codec::rules::surface::{replay_with, ImageOffload, SurfaceModel};
use sessionlog::engine::{Durability, Error, Options, SourceEncoding, Store};
use sessionlog_harness::gen::host_options;

use crate::fixtures::{
    all_events, export_bytes, import_bytes, new_event, temp_host_store, temp_store,
};

const HEADER: &str =
    r#"{"type":"session","version":4,"id":"s","createdAt":1,"isSeeded":false,"delegationDepth":0}"#;
const IMAGE: &str = r#"{"type":"image","attachment":{"attachmentId":"sha256:aa","mediaType":"image/png","bytes":1,"width":1,"height":1}}"#;

fn append(store: &Store, lines: &[String]) -> sessionlog::engine::Result<()> {
    let events = lines
        .iter()
        .map(|l| new_event(&parse(l).expect("JSON")))
        .collect();
    store.append("s", None, events).map(|_| ())
}

/// A V4 session whose seq 3 is a user message with three images.
fn session_with_images(store: &Store) {
    store
        .create_session(HEADER, SourceEncoding::Jsonl)
        .expect("create");
    append(
        store,
        &[
            r#"{"type":"turn/start","time":1,"data":{"turn":1}}"#.into(),
            r#"{"type":"step/start","time":1,"data":{"turn":1,"step":1}}"#.into(),
            r#"{"type":"system/message","time":1,"data":{"turn":1,"step":1,"message":{"id":"s","role":"system","content":[],"source":{"kind":"system-prompt"}}},"surfaceOp":"append"}"#.into(),
            format!(r#"{{"type":"user/message","time":1,"data":{{"id":"u","role":"user","content":[{{"type":"text","text":"look"}},{IMAGE},{IMAGE},{IMAGE}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#),
        ],
    )
    .expect("append");
}

fn offload(indexes: &str) -> String {
    format!(
        r#"{{"type":"image/offload","time":2,"data":{{"targets":[{{"seq":3,"imageIndexes":{indexes}}}]}}}}"#
    )
}

/// `offloaded` flags of the user message's images, as the model sees them at `at`.
fn flags(store: &Store, at: Option<u64>) -> Vec<bool> {
    let messages = store.messages_at("s", at).expect("messages");
    let user = messages
        .iter()
        .find(|m| {
            m.as_object()
                .and_then(|o| o.get("id"))
                .and_then(Value::as_str)
                == Some("u")
        })
        .expect("the user message");
    user.as_object()
        .and_then(|o| o.get("content"))
        .and_then(Value::as_array)
        .expect("content")
        .iter()
        .filter(|b| stringify(b).starts_with(r#"{"type":"image""#))
        .map(|b| b.as_object().and_then(|o| o.get("offloaded")) == Some(&Value::Bool(true)))
        .collect()
}

#[test]
fn image_offload_changes_messages_and_content_generation_not_the_log() {
    let (_t, store) = temp_host_store();
    session_with_images(&store);
    append(&store, &[offload("[1]")]).expect("offload");
    assert_eq!(flags(&store, None), [false, true, false]);
    assert_eq!(
        flags(&store, Some(3)),
        [false, false, false],
        "before the offload"
    );
    append(&store, &[offload("[0,2]")]).expect("offload");
    assert_eq!(flags(&store, None), [true, true, true]);
    assert_eq!(flags(&store, Some(4)), [false, true, false]);
    let surface = store.surface_at("s", None).expect("surface").to_json();
    assert_eq!(
        surface,
        r#"{"nodes":[2,3],"replaceGeneration":0,"contentGeneration":2,"replacements":[]}"#
    );
    let file = export_bytes(&store, "s");
    assert!(
        !String::from_utf8_lossy(&file).contains("offloaded"),
        "the log never changes"
    );
    // A naive replay and a re-import agree.
    let events = all_events(&store, "s");
    let naive = replay_with(SurfaceModel::V4, &events).expect("replay");
    assert_eq!(
        store.messages_at("s", None).expect("messages"),
        naive.messages
    );
    assert_eq!(surface, naive.surface.to_json());
    let (_t2, again) = temp_host_store();
    import_bytes(&again, "s", &file, true).expect("import");
    assert_eq!(flags(&again, None), [true, true, true]);
    assert_eq!(
        again.surface_at("s", None).expect("surface").to_json(),
        surface
    );
    // A fork reads the parent's projections below its boundary.
    store.fork("s", None, "child").expect("fork");
    let child = store.messages_at("child", None).expect("messages");
    assert_eq!(child, store.messages_at("s", None).expect("messages"));
}

#[test]
fn refused_offloads_write_nothing() {
    let (_t, store) = temp_host_store();
    session_with_images(&store);
    append(&store, &[offload("[1]")]).expect("offload");
    let before = export_bytes(&store, "s");
    let refusals = [
        (offload("[1]"), "image/offload: image index 1 is already offloaded"),
        (offload("[3]"), "image/offload: image index 3 does not exist"),
        (
            r#"{"type":"image/offload","time":2,"data":{"targets":[{"seq":0,"imageIndexes":[0]}]}}"#.into(),
            "image/offload: target seq 0 is not a current surface node",
        ),
        (
            r#"{"type":"image/offload","time":2,"data":{"targets":[{"seq":3,"imageIndexes":[0]}]},"surfaceOp":"append"}"#.into(),
            "is not surface-eligible and cannot carry surfaceOp",
        ),
    ];
    for (line, rule) in refusals {
        let e = append(&store, &[line]).expect_err(rule);
        assert!(e.to_string().contains(rule), "{e}");
        assert_eq!(export_bytes(&store, "s"), before, "{rule}");
    }
    assert_eq!(
        store
            .surface_at("s", None)
            .expect("surface")
            .content_generation,
        1
    );
}

/// Case 26, and removal: without the projection, DSH neither restores nor reads the session.
#[test]
fn a_session_needing_a_missing_projection_is_not_read() {
    let (_t, store) = temp_host_store();
    session_with_images(&store);
    append(&store, &[offload("[0]")]).expect("offload");
    assert!(store.remove_message_projection("image/offload"));
    let removed = "session message projection \"image/offload\" was removed or replaced; restore the session with its owning plugin";
    let e = store.messages_at("s", None).expect_err("removed");
    assert!(
        matches!(&e, Error::SurfaceFailed { reason, .. } if reason == removed),
        "{e}"
    );
    assert!(store.surface_at("s", None).is_err());
    let file = export_bytes(&store, "s");
    let (_t2, fresh) = temp_store();
    assert!(
        !fresh.remove_message_projection("image/offload"),
        "none by default"
    );
    import_bytes(&fresh, "s", &file, false).expect("stored byte-exactly");
    let e = fresh.messages_at("s", None).expect_err("missing");
    assert!(
        e.to_string().contains("session event \"image/offload\" requires a message projection; load its owning plugin or supply its projection definition"),
        "{e}"
    );
    assert_eq!(export_bytes(&fresh, "s"), file);
    store
        .register_message_projection(Arc::new(ImageOffload))
        .expect("register again");
    assert_eq!(flags(&store, None), [true, false, false]);
    let e = store
        .register_message_projection(Arc::new(ImageOffload))
        .expect_err("one owner per type");
    assert_eq!(
        e.to_string(),
        "session message projection \"image/offload\" is already registered"
    );
}

/// The verdict follows the projections of the store that reads: a session stored with
/// `image/offload` registered, read by the store reopened without it, is refused as DSH's restore
/// without the plugin refuses it, and read again once the projection is back.
#[test]
fn a_store_reopened_without_the_projection_refuses_the_session() {
    let (_t, store) = temp_host_store();
    session_with_images(&store);
    append(&store, &[offload("[2]")]).expect("offload");
    let path = store.path().to_path_buf();
    drop(store);
    let buffered = Options {
        durability: Durability::Buffered,
        ..Options::default()
    };
    let plain = Store::open(&path, buffered.clone()).expect("reopen");
    let e = plain.messages_at("s", None).expect_err("missing");
    assert!(
        matches!(&e, Error::SurfaceFailed { reason, .. } if reason == "session event \"image/offload\" requires a message projection; load its owning plugin or supply its projection definition"),
        "{e}"
    );
    assert!(
        plain.messages_at("s", Some(3)).is_ok(),
        "before the offload"
    );
    drop(plain);
    let again = Store::open(&path, host_options(buffered)).expect("reopen");
    assert_eq!(flags(&again, None), [false, false, true]);
}

/// `image/offload` that panics while armed (a faulty plugin), as DSH's own otherwise.
#[derive(Default)]
struct Faulty(std::sync::atomic::AtomicBool);

impl sessionlog::codec::rules::surface::MessageProjection for Faulty {
    fn event_type(&self) -> &str {
        "image/offload"
    }

    fn project(
        &self,
        event: &Value,
        ctx: &sessionlog::codec::rules::surface::ProjectionContext<'_>,
    ) -> Result<Vec<(u64, Value)>, String> {
        assert!(
            !self.0.load(std::sync::atomic::Ordering::SeqCst),
            "the faulty projection panics"
        );
        ImageOffload.project(event, ctx)
    }
}

fn with_faulty(store: &Store) -> Arc<Faulty> {
    let faulty = Arc::new(Faulty::default());
    assert!(store.remove_message_projection("image/offload"));
    store
        .register_message_projection(Arc::clone(&faulty) as _)
        .expect("register");
    faulty.0.store(true, std::sync::atomic::Ordering::SeqCst);
    faulty
}

/// A projection that panics mid-append (the session's lock held, its surface already folded
/// for part of the batch) leaves no state that later appends trust, and a panic mid-import
/// leaves no claim on the id behind: the next append and the next import proceed, and agree
/// with a fresh import of the exported log.
#[test]
fn a_panic_while_writing_leaves_no_half_updated_state() {
    let (_t, store) = temp_host_store();
    session_with_images(&store);
    let faulty = with_faulty(&store);
    let user = r#"{"type":"user/message","time":3,"data":{"id":"u2","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#;
    let before = export_bytes(&store, "s");
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        append(&store, &[user.into(), offload("[1]")])
    }));
    assert!(panicked.is_err(), "the projection was to panic");
    assert_eq!(export_bytes(&store, "s"), before, "nothing was written");
    faulty.0.store(false, std::sync::atomic::Ordering::SeqCst);
    let next = store
        .append(
            "s",
            Some(4),
            vec![new_event(&parse(&offload("[1]")).expect("JSON"))],
        )
        .expect("the append after the panic");
    assert_eq!(next.first_seq, 4);
    let file = export_bytes(&store, "s");
    let (_t2, fresh) = temp_host_store();
    import_bytes(&fresh, "s", &file, true).expect("import");
    assert_eq!(
        store.surface_at("s", None).expect("surface").to_json(),
        fresh.surface_at("s", None).expect("surface").to_json()
    );
    assert_eq!(flags(&store, None), flags(&fresh, None));
    let v = store.verify(&[]).expect("verify");
    assert!(v.problems.is_empty(), "{:?}", v.problems);

    let (_t3, other) = temp_host_store();
    let faulty = with_faulty(&other);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        import_bytes(&other, "s", &file, false)
    }));
    assert!(panicked.is_err(), "the projection was to panic");
    faulty.0.store(false, std::sync::atomic::Ordering::SeqCst);
    import_bytes(&other, "s", &file, false).expect("no claim left behind");
    assert_eq!(export_bytes(&other, "s"), file);
}
