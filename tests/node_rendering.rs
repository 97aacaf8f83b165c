//! The Node binding renders every result through its one serde rendering (`reply.rs`), so the
//! CLI's `--json` and Node's objects cannot drift: no string literal in `bindings/node/src`
//! spells JSON object text by hand (a key in escaped quotes followed by a colon, `\"key\":`).

/// The lines of `text` outside `//` comments that hold a hand-spelled JSON key.
fn hand_built_keys(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .filter(|line| {
            line.match_indices("\\\"").any(|(at, _)| {
                let rest = &line[at + 2..];
                let key_len = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                key_len > 0 && rest[key_len..].starts_with("\\\":")
            })
        })
        .map(|line| line.trim().to_owned())
        .collect()
}

#[test]
fn the_node_binding_builds_no_json_text_by_hand() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bindings/node/src");
    let mut found = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).expect("bindings/node/src") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            files += 1;
            let text = std::fs::read_to_string(&path).expect("a source file");
            for line in hand_built_keys(&text) {
                found.push(format!("{}: {line}", path.display()));
            }
        }
    }
    assert!(
        files >= 5,
        "read {files} source files under {}",
        dir.display()
    );
    assert!(
        found.is_empty(),
        "JSON text built by hand:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_hand_spelled_key_is_seen_and_a_message_is_not() {
    assert_eq!(
        hand_built_keys(r#"    Reply::Json(format!("{{\"next\":{},\"events\":{e}}}", n))"#).len(),
        1
    );
    assert!(
        hand_built_keys(r#"    format!("format must be \"stored\", got \"{other}\"")"#).is_empty()
    );
    assert!(hand_built_keys(r#"    // {\"next\": 1}"#).is_empty());
}
