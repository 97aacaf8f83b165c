//! Message projections (DSH 0.2, later-format-spec §2.3–2.4): events that change what the model
//! sees of earlier messages without editing the log. A projection owns one event type; given
//! the event and the current surface it returns the new messages keyed by their original seq
//! (ids kept), which compose over earlier projections in log order. Each committed projection
//! event advances `contentGeneration` only.
//!
//! The first-party one is `image/offload` ([`ImageOffload`]), which marks images `offloaded`.

use crate::json::{JsString, Object, Value};

/// Event types DSH declares as message projections (`MESSAGE_PROJECTION_EVENT_TYPES`): a log
/// holding one needs its projection to be read.
pub const MESSAGE_PROJECTION_EVENT_TYPES: [&str; 1] = ["image/offload"];

/// What a projection sees (DSH's `SessionMessageProjectionContext`).
pub struct ProjectionContext<'a> {
    /// Current surface nodes, in model order.
    pub nodes: &'a [u64],
    /// An earlier event of the log.
    pub event_at: &'a dyn Fn(u64) -> Option<Value>,
    /// The message an earlier projection made of node `seq`, if any.
    pub projected: &'a dyn Fn(u64) -> Option<Value>,
}

/// A registered message projection (DSH's `SessionMessageProjection`).
pub trait MessageProjection: Send + Sync {
    /// The event type it owns.
    fn event_type(&self) -> &str;

    /// Validate the whole decision and return the new messages by original seq. `Err` is the
    /// projection's message; nothing is applied.
    fn project(
        &self,
        event: &Value,
        ctx: &ProjectionContext<'_>,
    ) -> Result<Vec<(u64, Value)>, String>;
}

/// DSH's message when a log needs a projection nobody registered.
pub fn missing_projection(ty: &str) -> String {
    format!("session event \"{ty}\" requires a message projection; load its owning plugin or supply its projection definition")
}

/// DSH's message when a projection a session used is no longer registered.
pub fn removed_projection(ty: &str) -> String {
    format!("session message projection \"{ty}\" was removed or replaced; restore the session with its owning plugin")
}

/// DSH's message when a second projection claims a type.
pub fn duplicate_projection(ty: &str) -> String {
    format!("session message projection \"{ty}\" is already registered")
}

/// The first-party `image/offload` projection: `{targets:[{seq, imageIndexes}]}` marks the
/// selected images of current `user/message` / `tool/result` nodes `offloaded: true`. Images are
/// the top-level `image` blocks of the message's content, counted from 0 including those already
/// offloaded; the marker is appended to the block, which keeps its data and key order.
#[derive(Clone, Copy, Debug, Default)]
pub struct ImageOffload;

impl MessageProjection for ImageOffload {
    fn event_type(&self) -> &str {
        "image/offload"
    }

    fn project(
        &self,
        event: &Value,
        ctx: &ProjectionContext<'_>,
    ) -> Result<Vec<(u64, Value)>, String> {
        let data = event
            .as_object()
            .and_then(|o| o.get("data"))
            .and_then(Value::as_object);
        let targets = data
            .filter(|d| d.len() == 1)
            .and_then(|d| d.get("targets"))
            .and_then(Value::as_array)
            .filter(|t| !t.is_empty())
            .ok_or("image/offload: data must contain a nonempty targets array")?;
        let mut out: Vec<(u64, Value)> = Vec::with_capacity(targets.len());
        for target in targets {
            let t = target.as_object().filter(|t| t.len() == 2);
            let seq = t.and_then(|t| index(t.get("seq")));
            let indexes = t
                .and_then(|t| t.get("imageIndexes"))
                .and_then(Value::as_array)
                .filter(|i| !i.is_empty());
            let (Some(seq), Some(indexes)) = (seq, indexes) else {
                return Err(
                    "image/offload: each target must contain a seq and nonempty imageIndexes"
                        .into(),
                );
            };
            if out.iter().any(|(s, _)| *s == seq) {
                return Err(format!("image/offload: duplicate target seq {seq}"));
            }
            if !ctx.nodes.contains(&seq) {
                return Err(format!(
                    "image/offload: target seq {seq} is not a current surface node"
                ));
            }
            let source = (ctx.event_at)(seq);
            let ty = source
                .as_ref()
                .and_then(Value::as_object)
                .and_then(|o| o.get("type"))
                .and_then(Value::as_str);
            let original = match (ty, &source) {
                (Some("user/message"), Some(e)) => {
                    e.as_object().and_then(|o| o.get("data")).cloned()
                }
                (Some("tool/result"), Some(e)) => e
                    .as_object()
                    .and_then(|o| o.get("data"))
                    .and_then(Value::as_object)
                    .and_then(|d| d.get("message"))
                    .cloned(),
                _ => {
                    return Err(format!(
                        "image/offload: target seq {seq} must be user/message or tool/result"
                    ))
                }
            };
            let mut wanted = Vec::with_capacity(indexes.len());
            for i in indexes {
                match index(Some(i)) {
                    Some(i) if wanted.last().is_none_or(|&p| i > p) => wanted.push(i),
                    _ => {
                        return Err("image/offload: imageIndexes must be strictly increasing non-negative safe integers".into())
                    }
                }
            }
            let message = (ctx.projected)(seq).or(original).unwrap_or(Value::Null);
            out.push((seq, offload_images(&message, &wanted)?));
        }
        Ok(out)
    }
}

/// A non-negative safe integer, not `-0`.
fn index(v: Option<&Value>) -> Option<u64> {
    match v {
        Some(Value::Number(n)) if !(*n == 0.0 && n.is_sign_negative()) => {
            Value::Number(*n).as_safe_u64()
        }
        _ => None,
    }
}

/// `offloadMessageImages`: `{...message, content}` with the selected image blocks marked.
fn offload_images(message: &Value, wanted: &[u64]) -> Result<Value, String> {
    let Some(m) = message.as_object() else {
        return Err(format!(
            "image/offload: image index {} does not exist",
            wanted[0]
        ));
    };
    let blocks = m.get("content").and_then(Value::as_array).unwrap_or(&[]);
    let mut image = 0u64;
    let mut selected = 0usize;
    let mut content = Vec::with_capacity(blocks.len());
    for block in blocks {
        let mut projected = block.clone();
        if let Some(b) = block
            .as_object()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("image"))
        {
            if wanted.get(selected) == Some(&image) {
                if b.get("offloaded") == Some(&Value::Bool(true)) {
                    return Err(format!(
                        "image/offload: image index {image} is already offloaded"
                    ));
                }
                let mut marked: Object = b.clone();
                marked.insert(JsString::from("offloaded"), Value::Bool(true));
                projected = Value::Object(marked);
                selected += 1;
            }
            image += 1;
        }
        content.push(projected);
    }
    if let Some(missing) = wanted.get(selected) {
        return Err(format!(
            "image/offload: image index {missing} does not exist"
        ));
    }
    let mut out = m.clone();
    out.insert(JsString::from("content"), Value::Array(content));
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, stringify};

    const IMAGE: &str = r#"{"type":"image","attachment":{"attachmentId":"sha256:aa","mediaType":"image/png","bytes":1,"width":1,"height":1}}"#;

    fn user(content: &str) -> Value {
        parse(&format!(
            r#"{{"type":"user/message","seq":0,"time":1,"data":{{"id":"u","role":"user","content":{content},"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
        ))
        .expect("JSON")
    }

    fn offload(
        data: &str,
        log: &[Value],
        nodes: &[u64],
        earlier: Option<&Value>,
    ) -> Result<Vec<(u64, String)>, String> {
        let event = parse(&format!(
            r#"{{"type":"image/offload","seq":9,"time":1,"data":{data}}}"#
        ))
        .expect("JSON");
        let event_at = |s: u64| log.get(usize::try_from(s).ok()?).cloned();
        let projected = |_: u64| earlier.cloned();
        let ctx = ProjectionContext {
            nodes,
            event_at: &event_at,
            projected: &projected,
        };
        ImageOffload
            .project(&event, &ctx)
            .map(|m| m.into_iter().map(|(s, v)| (s, stringify(&v))).collect())
    }

    /// The upstream case: six blocks, offload `[1]`, then `[0,2]` over the first projection.
    #[test]
    fn images_are_marked_in_place_and_offloads_compose() {
        let log = [user(&format!(
            r#"[{{"type":"text","text":"before"}},{IMAGE},{IMAGE},{{"type":"text","text":"after"}},{{"type":"text","text":"unchanged"}},{IMAGE}]"#
        ))];
        let first = offload(
            r#"{"targets":[{"seq":0,"imageIndexes":[1]}]}"#,
            &log,
            &[0],
            None,
        )
        .expect("offload");
        let marked = format!(r#"{},"offloaded":true}}"#, &IMAGE[..IMAGE.len() - 1]);
        assert_eq!(first[0].1.matches(r#""offloaded":true"#).count(), 1);
        assert!(first[0]
            .1
            .starts_with(r#"{"id":"u","role":"user","content":[{"type":"text","text":"before"},"#));
        assert!(
            first[0].1.contains(&format!("{IMAGE},{marked}")),
            "{}",
            first[0].1
        );
        let earlier = parse(&first[0].1).expect("JSON");
        let second = offload(
            r#"{"targets":[{"seq":0,"imageIndexes":[0,2]}]}"#,
            &log,
            &[0],
            Some(&earlier),
        )
        .expect("offload");
        assert_eq!(second[0].1.matches(r#""offloaded":true"#).count(), 3);
        let again = offload(
            r#"{"targets":[{"seq":0,"imageIndexes":[1]}]}"#,
            &log,
            &[0],
            Some(&earlier),
        );
        assert_eq!(
            again,
            Err("image/offload: image index 1 is already offloaded".into())
        );
    }

    #[test]
    fn bad_decisions_are_refused_with_dsh_s_text() {
        let log = [user(&format!("[{IMAGE},{IMAGE}]"))];
        let refused = |data: &str| offload(data, &log, &[0], None).expect_err(data);
        let shape = "image/offload: data must contain a nonempty targets array";
        for data in [
            "null",
            "{}",
            r#"{"targets":[]}"#,
            r#"{"targets":"bad"}"#,
            r#"{"targets":[{"seq":0,"imageIndexes":[0]}],"extra":true}"#,
        ] {
            assert_eq!(refused(data), shape, "{data}");
        }
        let target = "image/offload: each target must contain a seq and nonempty imageIndexes";
        for data in [
            r#"{"targets":[null]}"#,
            r#"{"targets":[{"seq":0,"imageIndexes":[]}]}"#,
            r#"{"targets":[{"seq":0,"imageIndexes":[0],"extra":true}]}"#,
            r#"{"targets":[{"seq":-1,"imageIndexes":[0]}]}"#,
        ] {
            assert_eq!(refused(data), target, "{data}");
        }
        let order =
            "image/offload: imageIndexes must be strictly increasing non-negative safe integers";
        for indexes in ["[-1]", "[0.5]", r#"["0"]"#, "[1,0]", "[0,0]"] {
            assert_eq!(
                refused(&format!(
                    r#"{{"targets":[{{"seq":0,"imageIndexes":{indexes}}}]}}"#
                )),
                order,
                "{indexes}"
            );
        }
        assert_eq!(
            refused(r#"{"targets":[{"seq":0,"imageIndexes":[2]}]}"#),
            "image/offload: image index 2 does not exist"
        );
        assert_eq!(
            refused(r#"{"targets":[{"seq":1,"imageIndexes":[0]}]}"#),
            "image/offload: target seq 1 is not a current surface node"
        );
        assert_eq!(
            refused(r#"{"targets":[{"seq":0,"imageIndexes":[0]},{"seq":0,"imageIndexes":[1]}]}"#),
            "image/offload: duplicate target seq 0"
        );
    }
}
