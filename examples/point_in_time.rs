//! Point-in-time queries: what the model saw, and what a session's title and todo list were, at
//! an earlier seq, answered from the store's indexes without replaying the log.
//!
//! A DSH 0.2 (format V4) session takes two turns; the second renames the session and writes a
//! todo list. Then the store is asked about the end of the first turn and about now.
//!
//! Run: `cargo build --release --examples && $CARGO_TARGET_DIR/release/examples/point_in_time`
//! (`./x test` runs it). It exits non-zero if an answer is not the one shown.

use sessionlog::codec::format::event::NewEvent;
use sessionlog::codec::format::header::{author_header, HeaderFields};
use sessionlog::codec::json::{self, Value};
use sessionlog::engine::{Options, SourceEncoding, Store};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A batch from events in the shape `sessionlog append` reads (`{"type","data","surfaceOp"?}`).
fn batch(lines: &[&str]) -> Result<Vec<NewEvent>> {
    lines
        .iter()
        .map(|line| Ok(NewEvent::from_value(&json::parse(line)?)?))
        .collect()
}

/// The text of each message's content parts, joined (what a reader of `messages_at` wants).
fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| {
            let parts = m.as_object().and_then(|o| o.get("content"));
            let parts = parts.and_then(Value::as_array).unwrap_or_default();
            parts
                .iter()
                .filter_map(|p| p.as_object()?.get("text")?.as_str())
                .collect::<Vec<_>>()
                .join("")
        })
        .collect()
}

fn main() -> Result<()> {
    let dir = tempfile::tempdir()?;
    // Strict appends also check DSH 0.2's lifecycle relationships (turn and step numbering,
    // titles' citations, tool calls settled): a batch DSH's reader would refuse is refused whole.
    let options = Options {
        strict_appends: true,
        ..Options::default()
    };
    let store = Store::open(dir.path(), options)?;

    let header = author_header(&HeaderFields {
        id: "pit".into(),
        created_at: 1_700_000_000_000,
        cwd: Some("/work".into()),
        version: 4,
        ..HeaderFields::default()
    });
    let first_turn = batch(&[
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        r#"{"type":"session/title","data":{"title":"Files","messageSeqs":[],"source":{"kind":"user"}}}"#,
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
        r#"{"type":"system/message","data":{"turn":1,"step":1,"message":{"id":"s1","role":"system","content":[{"type":"text","text":"Be brief."}],"source":{"kind":"system-prompt"}}},"surfaceOp":"append"}"#,
        r#"{"type":"user/message","data":{"id":"u1","role":"user","content":[{"type":"text","text":"List the files."}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        r#"{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"text","text":"README.md and src/."}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"}},"stream":[]},"surfaceOp":"append"}"#,
        r#"{"type":"step/end","data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ])?;
    let receipt = store.create(&header, SourceEncoding::Jsonl, first_turn)?;
    let end_of_turn_one = receipt.first_seq + receipt.count - 1;

    let second_turn = batch(&[
        r#"{"type":"turn/start","data":{"turn":2}}"#,
        r#"{"type":"session/title","data":{"title":"Release checklist","messageSeqs":[],"source":{"kind":"user"}}}"#,
        r#"{"type":"step/start","data":{"turn":2,"step":1}}"#,
        r#"{"type":"user/message","data":{"id":"u2","role":"user","content":[{"type":"text","text":"Plan the release."}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        r#"{"type":"todo/write","data":{"todos":[{"content":"tag v1.0","status":"pending"},{"content":"publish","status":"pending"}]}}"#,
        r#"{"type":"assistant/message","data":{"turn":2,"step":1,"message":{"id":"a2","role":"assistant","content":[{"type":"text","text":"Tag, then publish."}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"}},"stream":[]},"surfaceOp":"append"}"#,
        r#"{"type":"step/end","data":{"turn":2,"step":1}}"#,
        r#"{"type":"turn/end","data":{"turn":2,"reason":{"kind":"completed"}}}"#,
    ])?;
    store.append("pit", Some(end_of_turn_one + 1), second_turn)?;

    // What the model saw at the end of the first turn, and what it sees now.
    let then = texts(&store.messages_at("pit", Some(end_of_turn_one))?);
    let now = texts(&store.messages_at("pit", None)?);
    println!("messages at seq {end_of_turn_one}: {then:?}");
    println!("messages now: {now:?}");
    assert_eq!(
        then,
        ["Be brief.", "List the files.", "README.md and src/."]
    );
    assert_eq!(now.len(), 5);
    assert_eq!(now[..3], then[..]);

    // A projection unit's state at any seq: the nearest checkpoint, then the tail folded.
    let title_then = store.state_at("pit", "title", Some(end_of_turn_one))?;
    let title_now = store.state_at("pit", "title", None)?;
    let todos_then = store.state_at("pit", "todos", Some(end_of_turn_one))?;
    let todos_now = store.state_at("pit", "todos", None)?;
    println!(
        "title at seq {end_of_turn_one}: {}",
        json::stringify(&title_then)
    );
    println!("title now: {}", json::stringify(&title_now));
    println!(
        "todos at seq {end_of_turn_one}: {}",
        json::stringify(&todos_then)
    );
    println!("todos now: {}", json::stringify(&todos_now));
    assert_eq!(title_then.as_str(), Some("Files"));
    assert_eq!(title_now.as_str(), Some("Release checklist"));
    assert_eq!(todos_then, Value::Null, "no todo list in the first turn");
    assert_eq!(todos_now.as_array().map(<[Value]>::len), Some(2));
    Ok(())
}
