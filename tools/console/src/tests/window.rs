//! A view's messages a window at a time: the page asks for the messages on screen and fills
//! the rest as it scrolls, so a view's size no longer bounds a scrubber move.

use super::{create, get, host, serve_beside, turn_lines};
use sessionlog_codec::json;

/// The messages of a view answer, each as `JSON.stringify` writes it.
fn messages(view: &json::Value) -> Vec<String> {
    match view.as_object().and_then(|o| o.get("messages")) {
        Some(json::Value::Array(list)) => list.iter().map(json::stringify).collect(),
        other => panic!("messages: {other:?}"),
    }
}

fn number(view: &json::Value, key: &str) -> Option<f64> {
    view.as_object()?.get(key)?.as_f64()
}

#[test]
fn a_view_answers_a_window_of_its_messages_and_their_count() {
    let (_dir, store) = host();
    let lines: Vec<String> = (1..=6)
        .flat_map(|turn| turn_lines(turn, &format!("message of turn {turn}")))
        .collect();
    create(&store, "w1", &lines);
    let addr = serve_beside(&store, None);
    let at = lines.len() as u64 - 1;
    let all: Vec<String> = store
        .messages_at("w1", Some(at))
        .expect("messages")
        .iter()
        .map(json::stringify)
        .collect();
    assert!(all.len() >= 12, "{} messages", all.len());
    let mut gathered = Vec::new();
    loop {
        let from = gathered.len();
        let answer = get(
            addr,
            &format!("/api/sessions/w1/view?at={at}&from={from}&limit=5"),
        );
        assert_eq!(answer.status, 200, "{}", answer.body);
        let view = answer.json();
        assert_eq!(number(&view, "messageCount"), Some(all.len() as f64));
        assert_eq!(number(&view, "messagesFrom"), Some(from as f64));
        let window = messages(&view);
        assert!(window.len() <= 5, "a window of {} messages", window.len());
        if window.is_empty() {
            break;
        }
        gathered.extend(window);
    }
    assert_eq!(gathered, all, "the windows make up the view");
    let whole = get(addr, &format!("/api/sessions/w1/view?at={at}")).json();
    assert_eq!(messages(&whole), all, "without a window: every message");
    let refused = get(addr, "/api/sessions/w1/view?limit=0");
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        refused.error().contains("at least one message"),
        "{}",
        refused.body
    );
}
