//! The unit table. Each unit: a key, a version, an initial state, an `apply` that folds one
//! event, and a `view` of the state. States are JSON values in JS key order.

use crate::format::event::event_type;
use crate::json::{JsString, Object, Value};
use crate::rules::surface::RequestHeaderFold;

/// One projection unit.
pub struct Unit {
    /// The name queries use.
    pub key: &'static str,
    /// Bumped whenever the state's meaning changes; checkpoints of another version are ignored.
    pub version: u8,
    init: fn(u64) -> Value,
    apply: fn(&mut Value, u64, &Value),
    view: fn(&Value) -> Value,
    /// The event types `apply` reads. Invariant: `apply` leaves the state as it is for every
    /// other type (the engine writes a checkpoint of an untouched unit as a reference to its
    /// previous one, and a test folds generated logs to hold every unit to it).
    pub(super) touches: &'static [&'static str],
}

impl Unit {
    /// The initial state.
    pub fn init(&self, seed_length: u64) -> Value {
        (self.init)(seed_length)
    }

    /// Fold the event at `seq`.
    pub fn apply(&self, state: &mut Value, seq: u64, event: &Value) {
        (self.apply)(state, seq, event);
    }

    /// Whether an event of type `ty` may change the state (see [`Unit`]'s `touches`).
    pub fn touches(&self, ty: &str) -> bool {
        self.touches.contains(&ty)
    }

    /// What a query returns for `state`.
    pub fn view(&self, state: &Value) -> Value {
        (self.view)(state)
    }
}

impl std::fmt::Debug for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Unit({} v{})", self.key, self.version)
    }
}

/// Every unit, in checkpoint order (a unit's index is part of its checkpoint key: append only).
pub static UNITS: [Unit; 10] = [
    Unit {
        key: "title",
        version: 1,
        init: null,
        apply: title,
        view: same,
        touches: &["session/title"],
    },
    Unit {
        key: "todos",
        version: 2,
        init: null,
        apply: todos,
        view: same,
        touches: &["todo/write", "turn/start"],
    },
    Unit {
        key: "tokenUsage",
        version: 1,
        init: usage_init,
        apply: usage,
        view: usage_view,
        touches: &["assistant/chunk", "assistant/message"],
    },
    Unit {
        key: "turns",
        version: 1,
        init: empty_list,
        apply: turns,
        view: same,
        touches: &["turn/start", "step/start", "turn/end"],
    },
    Unit {
        key: "requestHeader",
        version: 1,
        init: null,
        apply: request_header,
        view: same,
        touches: &["request/header"],
    },
    Unit {
        key: "requestContext",
        version: 1,
        init: null,
        apply: request_context,
        view: same,
        touches: &["request/context"],
    },
    Unit {
        key: "activity",
        version: 1,
        init: activity_init,
        apply: activity,
        view: same,
        touches: &["turn/start", "user/message"],
    },
    Unit {
        key: "inbox",
        version: 1,
        init: inbox_init,
        apply: inbox,
        view: inbox_view,
        touches: &["agent/inbox/spliced"],
    },
    Unit {
        key: "goal",
        version: 4,
        init: null,
        apply: super::goal::apply,
        view: same,
        touches: &["goal/change"],
    },
    Unit {
        key: "openTurn",
        version: 1,
        init: null,
        apply: open_turn,
        view: same,
        touches: &["turn/start", "turn/end"],
    },
];

/// DSH 0.2's folds of the units whose events V4 reshaped, by key; every other unit folds V4 logs
/// as it folds V0 ones. Versions differ from the V0 units' so checkpoints never cross models.
pub static V4_OVERRIDES: [Unit; 3] = [
    Unit {
        key: "tokenUsage",
        version: 101,
        init: usage_init,
        apply: usage_v4,
        view: usage_view,
        touches: &[
            "session/end-seed",
            "llm/retry-started",
            "compaction/summary",
            "assistant/message",
            "assistant/attempt",
        ],
    },
    Unit {
        key: "requestHeader",
        version: 101,
        init: null,
        apply: request_header_v4,
        view: same,
        touches: &["request/header"],
    },
    Unit {
        key: "inbox",
        version: 101,
        init: inbox_init,
        apply: inbox_v4,
        view: inbox_view,
        touches: &["session/end-seed", "agent/inbox/spliced"],
    },
];

fn null(_: u64) -> Value {
    Value::Null
}

fn empty_list(_: u64) -> Value {
    Value::Array(Vec::new())
}

fn same(state: &Value) -> Value {
    state.clone()
}

fn data(event: &Value) -> Option<&Object> {
    event
        .as_object()
        .and_then(|o| o.get("data"))
        .and_then(Value::as_object)
}

fn time(event: &Value) -> Value {
    event
        .as_object()
        .and_then(|o| o.get("time"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// `title`: the latest `session/title`'s title (DSH's session-title unit, last-wins).
fn title(state: &mut Value, _: u64, event: &Value) {
    if event_type(event) == "session/title" {
        if let Some(t @ Value::String(_)) = data(event).and_then(|d| d.get("title")) {
            *state = t.clone();
        }
    }
}

/// `todos`: the latest `todo/write` list; a `turn/start` clears it (DSH's tool-todo unit).
fn todos(state: &mut Value, _: u64, event: &Value) {
    match event_type(event) {
        "todo/write" => {
            if let Some(list @ Value::Array(_)) = data(event).and_then(|d| d.get("todos")) {
                *state = list.clone();
            }
        }
        "turn/start" => *state = Value::Null,
        _ => {}
    }
}

const BUCKETS: [&str; 4] = [
    "uncachedInputTokens",
    "outputTokens",
    "cacheReadTokens",
    "cacheWriteTokens",
];

fn zero_buckets() -> Value {
    Value::Object(BUCKETS.iter().fold(Object::new(), |o, k| o.with(k, 0.0)))
}

fn usage_init(_: u64) -> Value {
    Value::Object(
        Object::new()
            .with("totals", zero_buckets())
            .with("last", Value::Null),
    )
}

fn usage_view(state: &Value) -> Value {
    state
        .as_object()
        .and_then(|o| o.get("totals"))
        .cloned()
        .unwrap_or_else(zero_buckets)
}

/// `tokenUsage`: DSH's token-meter fold. Samples come from `assistant/chunk` usage chunks and
/// `assistant/message.usage`; a repeated sample for the same (turn, step) replaces the previous
/// one instead of adding to it.
fn usage(state: &mut Value, _: u64, event: &Value) {
    let Some(d) = data(event) else { return };
    let sample = match event_type(event) {
        "assistant/chunk" => d
            .get("chunk")
            .and_then(Value::as_object)
            .filter(|c| c.get("type").and_then(Value::as_str) == Some("usage"))
            .and_then(|c| c.get("usage")),
        "assistant/message" => d.get("usage"),
        _ => None,
    };
    let Some(Value::Object(u)) = sample else {
        return;
    };
    settle(state, d, sample_buckets(u));
}

/// A usage sample's buckets (`inputTokens` is the uncached input).
fn sample_buckets(u: &Object) -> [f64; 4] {
    let num = |k: &str| u.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    [
        num("inputTokens"),
        num("outputTokens"),
        num("cacheReadTokens"),
        num("cacheWriteTokens"),
    ]
}

fn buckets_value(v: &[f64]) -> Value {
    Value::Object(
        BUCKETS
            .iter()
            .zip(v)
            .fold(Object::new(), |o, (k, n)| o.with(k, *n)),
    )
}

/// Settle a sample for the event's (turn, step): a repeat of the last step's sample replaces
/// it instead of adding.
fn settle(state: &mut Value, d: &Object, next: [f64; 4]) {
    let (turn, step) = (
        d.get("turn").cloned().unwrap_or(Value::Null),
        d.get("step").cloned().unwrap_or(Value::Null),
    );
    let Value::Object(s) = state else { return };
    let previous: Option<[f64; 4]> = s
        .get("last")
        .and_then(Value::as_object)
        .filter(|l| l.get("turn") == Some(&turn) && l.get("step") == Some(&step))
        .and_then(|l| l.get("buckets"))
        .map(buckets_of);
    if previous == Some(next) {
        return;
    }
    let totals = s.get("totals").map(buckets_of).unwrap_or([0.0; 4]);
    let prev = previous.unwrap_or([0.0; 4]);
    let sum: Vec<f64> = (0..4).map(|i| totals[i] - prev[i] + next[i]).collect();
    let last = Object::new()
        .with("turn", turn)
        .with("step", step)
        .with("buckets", buckets_value(&next));
    *state = Value::Object(
        Object::new()
            .with("totals", buckets_value(&sum))
            .with("last", Value::Object(last)),
    );
}

/// `tokenUsage` of a V4 log (DSH 0.2's token meter, state version 3): events before the
/// inherited cut do not count (the `{inherited:true}` end-seed resets the meter); a sample is
/// `assistant/message.usage`, else the last usage chunk of a message's or attempt's stream, and
/// settles per (turn, step) as in V0; `llm/retry-started` for the last sample's step makes the
/// retried attempt add; `compaction/summary.usage` always adds.
fn usage_v4(state: &mut Value, seq: u64, event: &Value) {
    let Some(d) = data(event) else { return };
    match event_type(event) {
        "session/end-seed" if d.get("inherited") == Some(&Value::Bool(true)) => {
            *state = usage_init(seq);
        }
        "llm/retry-started" => {
            let Value::Object(s) = state else { return };
            let same_step = s
                .get("last")
                .and_then(Value::as_object)
                .is_some_and(|l| l.get("turn") == d.get("turn") && l.get("step") == d.get("step"));
            if same_step {
                s.insert(JsString::from_static("last"), Value::Null);
            }
        }
        "compaction/summary" => {
            if let Some(Value::Object(u)) = d.get("usage") {
                let Value::Object(s) = state else { return };
                let totals = s.get("totals").map(buckets_of).unwrap_or([0.0; 4]);
                let sample = sample_buckets(u);
                let sum: Vec<f64> = (0..4).map(|i| totals[i] + sample[i]).collect();
                s.insert(JsString::from_static("totals"), buckets_value(&sum));
            }
        }
        "assistant/message" | "assistant/attempt" => {
            let sample = match d.get("usage") {
                Some(u @ Value::Object(_)) if event_type(event) == "assistant/message" => Some(u),
                _ => last_stream_usage(d),
            };
            if let Some(Value::Object(u)) = sample {
                settle(state, d, sample_buckets(u));
            }
        }
        _ => {}
    }
}

/// The usage of the last `{type:"chunk", chunk:{type:"usage"}}` record of `data.stream`.
fn last_stream_usage(d: &Object) -> Option<&Value> {
    d.get("stream")?.as_array()?.iter().rev().find_map(|r| {
        let r = r.as_object()?;
        let chunk = r.get("chunk")?.as_object()?;
        (r.get("type")?.as_str()? == "chunk" && chunk.get("type")?.as_str()? == "usage")
            .then(|| chunk.get("usage"))
            .flatten()
    })
}

fn buckets_of(v: &Value) -> [f64; 4] {
    let o = v.as_object();
    BUCKETS.map(|k| {
        o.and_then(|o| o.get(k))
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
    })
}

/// `turns`: one entry per `turn/start`, closed by its `turn/end`: turn, start seq/time, end
/// seq/time and reason (`null` while open), and the number of steps started.
fn turns(state: &mut Value, seq: u64, event: &Value) {
    let Value::Array(list) = state else { return };
    let Some(d) = data(event) else { return };
    match event_type(event) {
        "turn/start" => list.push(Value::Object(
            Object::new()
                .with("turn", d.get("turn").cloned().unwrap_or(Value::Null))
                .with("startSeq", seq as f64)
                .with("startTime", time(event))
                .with("endSeq", Value::Null)
                .with("endTime", Value::Null)
                .with("reason", Value::Null)
                .with("steps", 0.0),
        )),
        "step/start" => {
            if let Some(Value::Object(t)) = list.last_mut() {
                let steps = t.get("steps").and_then(Value::as_f64).unwrap_or(0.0);
                t.insert(JsString::from_static("steps"), Value::from(steps + 1.0));
            }
        }
        "turn/end" => {
            let open = list.iter_mut().rev().find_map(|t| match t {
                Value::Object(o)
                    if o.get("endSeq") == Some(&Value::Null) && o.get("turn") == d.get("turn") =>
                {
                    Some(o)
                }
                _ => None,
            });
            if let Some(t) = open {
                t.insert(JsString::from_static("endSeq"), Value::from(seq as f64));
                t.insert(JsString::from_static("endTime"), time(event));
                t.insert(
                    "reason".into(),
                    d.get("reason").cloned().unwrap_or(Value::Null),
                );
            }
        }
        _ => {}
    }
}

/// `requestHeader`: DSH's canonical header of the latest `request/header`.
fn request_header(state: &mut Value, _: u64, event: &Value) {
    if event_type(event) != "request/header" {
        return;
    }
    let mut fold = RequestHeaderFold::new();
    if fold.apply(event).is_ok() {
        if let Some(h) = fold.header() {
            *state = h.clone();
        }
    }
}

/// `requestHeader` of a V4 log (DSH 0.2's `foldRequestHeader`): the latest header,
/// canonical: `{config, adapterDefaults?, tools?}`, `adapterDefaults` kept only when one of its
/// markers is `true`, an empty `tools` dropped; `reason` and `startsSeries` do not matter.
fn request_header_v4(state: &mut Value, _: u64, event: &Value) {
    if event_type(event) != "request/header" {
        return;
    }
    let Some(h) = data(event)
        .and_then(|d| d.get("header"))
        .and_then(Value::as_object)
    else {
        return;
    };
    let mut canonical = Object::new();
    if let Some(config) = h.get("config") {
        canonical = canonical.with("config", config.clone());
    }
    if let Some(defaults) = h.get("adapterDefaults").filter(|a| {
        a.as_object().is_some_and(|a| {
            a.get("reasoningEffort") == Some(&Value::Bool(true))
                || a.get("maxTokens") == Some(&Value::Bool(true))
        })
    }) {
        canonical = canonical.with("adapterDefaults", defaults.clone());
    }
    if let Some(tools) = h
        .get("tools")
        .filter(|t| t.as_array().is_some_and(|t| !t.is_empty()))
    {
        canonical = canonical.with("tools", tools.clone());
    }
    *state = Value::Object(canonical);
}

/// `requestContext`: the latest `request/context` payload (DSH's `Session.requestContext()`).
fn request_context(state: &mut Value, _: u64, event: &Value) {
    if event_type(event) == "request/context" {
        if let Some(d) = event.as_object().and_then(|o| o.get("data")) {
            *state = d.clone();
        }
    }
}

fn activity_init(_: u64) -> Value {
    Value::Object(
        Object::new()
            .with("blank", true)
            .with("lastPromptAt", Value::Null),
    )
}

/// `activity`: DSH's `sessionListMetadata` — `blank` until a `turn/start`, and `lastPromptAt`
/// the time of the latest `user/message` a human wrote (`source.kind == "user"`).
fn activity(state: &mut Value, _: u64, event: &Value) {
    let Value::Object(s) = state else { return };
    match event_type(event) {
        "turn/start" => s.insert(JsString::from_static("blank"), Value::Bool(false)),
        "user/message" => {
            let human = data(event)
                .and_then(|d| d.get("source"))
                .and_then(Value::as_object)
                .and_then(|s| s.get("kind"))
                .and_then(Value::as_str)
                == Some("user");
            if human {
                s.insert(JsString::from_static("lastPromptAt"), time(event));
            }
        }
        _ => {}
    }
}

fn inbox_init(seed_length: u64) -> Value {
    Value::Object(
        Object::new()
            .with("from", seed_length as f64)
            .with("next-turn", Value::Array(Vec::new()))
            .with("next-step", Value::Array(Vec::new())),
    )
}

fn inbox_view(state: &Value) -> Value {
    let o = state.as_object();
    let list = |k: &str| {
        o.and_then(|o| o.get(k))
            .cloned()
            .unwrap_or(Value::Array(Vec::new()))
    };
    Value::Object(
        Object::new()
            .with("next-turn", list("next-turn"))
            .with("next-step", list("next-step")),
    )
}

/// `inbox`: DSH's queue fold — `agent/inbox/spliced {target, start, removedCount?, inserted}`
/// splices the target list, from the header's `seedLength` on.
fn inbox(state: &mut Value, seq: u64, event: &Value) {
    if event_type(event) != "agent/inbox/spliced" {
        return;
    }
    let Value::Object(s) = state else { return };
    if (seq as f64) < s.get("from").and_then(Value::as_f64).unwrap_or(0.0) {
        return;
    }
    let Some(d) = data(event) else { return };
    let Some(target) = d
        .get("target")
        .and_then(Value::as_str)
        .filter(|t| *t == "next-turn" || *t == "next-step")
    else {
        return;
    };
    let index = |k: &str| {
        d.get(k)
            .and_then(Value::as_safe_integer)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0)
    };
    let inserted = d
        .get("inserted")
        .and_then(Value::as_array)
        .map(<[Value]>::to_vec)
        .unwrap_or_default();
    let mut list = s
        .get(target)
        .and_then(Value::as_array)
        .map(<[Value]>::to_vec)
        .unwrap_or_default();
    let start = index("start").min(list.len());
    let end = (start + index("removedCount")).min(list.len());
    list.splice(start..end, inserted);
    s.insert(target.into(), Value::Array(list));
}

/// `inbox` of a V4 log: as in V0, from the inherited cut on, which V4 marks with the
/// `{inherited:true}` end-seed (DSH 0.2 replays `ownEvents()`, from the last marker).
fn inbox_v4(state: &mut Value, seq: u64, event: &Value) {
    let inherited = event_type(event) == "session/end-seed"
        && data(event).and_then(|d| d.get("inherited")) == Some(&Value::Bool(true));
    if inherited {
        *state = inbox_init(seq);
    } else {
        inbox(state, seq, event);
    }
}

/// `openTurn`: the number of the turn a `turn/start` opened and no `turn/end` closed yet, else
/// `null` (DSH's fork open-turn rule: the last `turn/start` or `turn/end` decides).
fn open_turn(state: &mut Value, _: u64, event: &Value) {
    match event_type(event) {
        "turn/start" => {
            *state = data(event)
                .and_then(|d| d.get("turn"))
                .cloned()
                .unwrap_or(Value::Null)
        }
        "turn/end" => *state = Value::Null,
        _ => {}
    }
}
