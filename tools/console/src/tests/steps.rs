//! The scrubber's step marks: each step's start in a range of seqs, with the tools it called.

use super::{create, events, get, host, serve_beside};
use sessionlog_codec::json;

/// A turn of two steps, each an assistant message calling `tools[i]`; seqs 0 to 6.
fn two_steps(tools: [&str; 2]) -> Vec<String> {
    let step = |n: usize, tool: &str| {
        vec![
            format!(r#"{{"type":"step/start","data":{{"turn":1,"step":{n}}}}}"#),
            format!(
                r#"{{"type":"assistant/message","data":{{"turn":1,"step":{n},"message":{{"id":"a{n}","role":"assistant","content":[{{"type":"tool-call","id":"c{n}","name":"{tool}","arguments":"{{}}"}}]}},"stream":[]}},"surfaceOp":"append"}}"#
            ),
        ]
    };
    let mut lines = vec![r#"{"type":"turn/start","data":{"turn":1}}"#.to_owned()];
    lines.extend(step(1, tools[0]));
    lines.push(
        r#"{"type":"user/message","data":{"id":"u1","role":"user","content":[{"type":"text","text":"go"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#
            .to_owned(),
    );
    lines.extend(step(2, tools[1]));
    lines.push(r#"{"type":"turn/end","data":{"turn":1,"reason":"done"}}"#.to_owned());
    lines
}

#[test]
fn steps_lists_each_step_start_in_a_range_with_the_tools_it_called() {
    let (_dir, store) = host();
    let lines = two_steps(["ls", "<img src=x onerror=alert(1)>"]);
    assert!(
        events(&lines).len() == 7,
        "the session is seqs 0 to 6 as the test reads them"
    );
    create(&store, "st", &lines);
    let addr = serve_beside(&store, None);
    let answer = get(addr, "/api/sessions/st/steps?from=0&to=6");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let steps = match answer.json().as_object().and_then(|o| o.get("steps")) {
        Some(json::Value::Array(list)) => list.iter().map(json::stringify).collect::<Vec<_>>(),
        other => panic!("steps: {other:?}"),
    };
    assert_eq!(
        steps,
        vec![
            r#"{"seq":1,"turn":1,"step":1,"tools":["ls"]}"#,
            r#"{"seq":4,"turn":1,"step":2,"tools":["<img src=x onerror=alert(1)>"]}"#,
        ]
    );
    let later = get(addr, "/api/sessions/st/steps?from=2&to=6").json();
    assert!(
        json::stringify(&later).contains(r#""steps":[{"seq":4,"#),
        "a range holds the steps that start in it: {}",
        json::stringify(&later)
    );
    let cases: [(&str, u16, &str); 4] = [
        (
            "/api/sessions/st/steps?from=5&to=1",
            400,
            "the range is empty",
        ),
        ("/api/sessions/st/steps?from=0&to=99999999", 400, "at most"),
        ("/api/sessions/st/steps?from=7", 404, "past its end"),
        (
            "/api/sessions/nope/steps?from=0",
            404,
            "no session \"nope\"",
        ),
    ];
    for (path, status, says) in cases {
        let answer = get(addr, path);
        assert_eq!(answer.status, status, "{path}: {}", answer.body);
        assert!(answer.error().contains(says), "{path}: {}", answer.body);
    }
}
