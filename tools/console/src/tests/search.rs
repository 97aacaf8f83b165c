//! The listing's search box: message text found through the session index the process holding
//! the store keeps (`Store::search`), and, where there is no index to read, the substring
//! filter with a note saying why.

use super::{create, get, host, serve_beside, turn_lines};
use sessionlog_codec::json;
use sessionlog_engine::SearchQuery;

/// The ids of a listing page, and its object.
fn listed(answer: &super::Answer) -> (Vec<String>, json::Object) {
    assert_eq!(answer.status, 200, "{}", answer.body);
    let page = answer.json();
    let page = page.as_object().expect("an object").clone();
    let ids = match page.get("sessions") {
        Some(json::Value::Array(list)) => list
            .iter()
            .filter_map(|s| Some(s.as_object()?.get("id")?.as_str()?.to_owned()))
            .collect(),
        other => panic!("sessions: {other:?}"),
    };
    (ids, page)
}

fn text(page: &json::Object, key: &str) -> String {
    page.get(key)
        .and_then(json::Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_search_box_finds_message_text_through_the_session_index() {
    let (_dir, store) = host();
    create(&store, "plain", &turn_lines(1, "nothing to see"));
    create(
        &store,
        "needle",
        &turn_lines(1, "a quokka <script>alert(1)</script> hides here"),
    );
    store
        .search(&SearchQuery::default())
        .expect("the host builds its index");
    store.sync().expect("sync");
    let addr = serve_beside(&store, None);
    let (ids, page) = listed(&get(addr, "/api/sessions?q=quokka"));
    assert_eq!(ids, vec!["needle"], "{page:?}");
    assert_eq!(text(&page, "search"), "index");
    let hit = json::stringify(&json::Value::Object(page.clone()));
    assert!(
        hit.contains("[quokka] <script>alert(1)</script>"),
        "the snippet marks the match and keeps the text as it is: {hit}"
    );
    let (ids, page) = listed(&get(addr, "/api/sessions?q=plain"));
    assert_eq!(ids, vec!["plain"], "an id typed whole lists it: {page:?}");
    let bad = get(addr, "/api/sessions?q=%22unclosed");
    assert!(
        bad.status == 400 || bad.status == 200,
        "a query the index does not parse is no crash: {}",
        bad.body
    );
}

#[test]
fn without_a_session_index_the_search_box_filters_and_says_why() {
    let (_dir, store) = host();
    create(&store, "alpha", &turn_lines(1, "hi"));
    create(&store, "beta", &turn_lines(1, "hi"));
    let addr = serve_beside(&store, None);
    let (ids, page) = listed(&get(addr, "/api/sessions?q=ALPH"));
    assert_eq!(ids, vec!["alpha"], "{page:?}");
    assert_eq!(text(&page, "search"), "filter");
    let note = text(&page, "note");
    assert!(
        note.contains("no session index") && note.contains("sessionlog reindex"),
        "the note says why and what builds it: {note}"
    );
}
