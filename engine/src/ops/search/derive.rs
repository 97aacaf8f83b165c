//! What the index holds of a session, derived from its log: the row a search answers with, and
//! the text of each message. The projection units' folds (title, token usage, turns, open turn)
//! are read through [`Store::state_at`], the engine's one fold of each; what no unit folds
//! (tools called and their errors, models and providers) is folded here, incrementally, from
//! the events after the ones already indexed ([`Fold`]). Most stored lines carry nothing this
//! fold reads but their events' times (chunk rows, turn and step markers): those are folded
//! from their text by the indexing skim, and only the others are decoded ([`Folding`]).
//!
//! Invariants: deriving a session from its whole log, or from a prefix's fold and then the
//! rest, gives the same row (the fold only adds, and keeps the calls still waiting for a
//! result); a line folded from its text folds as its decoded events do (`verify` folds every
//! event decoded and compares).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sessionlog_codec::format::chunk_rows::{is_row_tag, member_times};
use sessionlog_codec::format::event::{event_type, opened_type};
use sessionlog_codec::json::skim::{skim, Envelope, Level, Skim};
use sessionlog_codec::json::{Object, Value};

use crate::error::Result;
use crate::layout::meta::{SessionMeta, Verdict};
use crate::read::events::LineReader;
use crate::store::Store;

/// Token usage totals (the `tokenUsage` unit's view).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenTotals {
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Cache-read input tokens.
    pub cache_read: u64,
    /// Cache-write input tokens.
    pub cache_write: u64,
    /// The four summed: what `--min-tokens` compares.
    pub total: u64,
}

/// What the index knows of a session: a search result's fields.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    /// Session id.
    pub id: String,
    /// The exact header record (lossy UTF-8, without its newline).
    pub header: String,
    /// Header `cwd`.
    pub cwd: Option<String>,
    /// The `title` unit: the latest `session/title`.
    pub title: Option<String>,
    /// DSH's verdict (`clean`, `torn`, `corrupt: …`, `unsupported: …`).
    pub verdict: String,
    /// The served generation's format version.
    pub format: u32,
    /// Header `createdAt`, epoch ms.
    pub created_at: Option<i64>,
    /// The last human prompt's time (the listing's activity), epoch ms.
    pub activity_at: Option<i64>,
    /// The last event's time, epoch ms.
    pub last_event_at: Option<i64>,
    /// Logical events.
    pub events: u64,
    /// Turns started (the `turns` unit).
    pub turns: u64,
    /// Token usage totals (the `tokenUsage` unit).
    pub tokens: TokenTotals,
    /// Models seen (`model` and `provider/model`), sorted.
    pub models: Vec<String>,
    /// Providers seen, sorted.
    pub providers: Vec<String>,
    /// Tools called, by name, sorted.
    pub tools: Vec<String>,
    /// Tools whose result was an error (`isError`), by name (`?` when the call is not in the
    /// log), sorted.
    pub tool_errors: Vec<String>,
    /// Whether a turn is open (the `openTurn` unit: started, not ended).
    pub open: bool,
    /// The session it was forked from.
    pub parent: Option<String>,
    /// Forks between it and its root (0 for a session that is no fork).
    pub depth: u64,
}

/// The fold of what no projection unit folds, kept with the row so an append is indexed from
/// its events alone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Fold {
    /// Events folded (and their messages indexed): the next seq to fold.
    pub(crate) indexed: u64,
    /// The session's number when it was folded: another number is another session.
    pub(crate) number: u64,
    pub(crate) tools: BTreeSet<String>,
    pub(crate) tool_errors: BTreeSet<String>,
    pub(crate) models: BTreeSet<String>,
    pub(crate) providers: BTreeSet<String>,
    /// Calls without a result yet: call id → tool name.
    pub(crate) pending: BTreeMap<String, String>,
    pub(crate) last_event_at: Option<i64>,
}

/// What a session document stores: the row and the fold it was derived with.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(crate) row: SessionRow,
    pub(crate) fold: Fold,
}

/// Marks a tool error whose call the log does not hold.
const UNKNOWN_TOOL: &str = "?";

/// The message types whose text is searched.
fn is_message(ty: &str) -> bool {
    matches!(ty, "user/message" | "assistant/message" | "tool/result")
}

/// The types whose events the fold reads more of than their times: messages, tool calls and
/// request headers.
fn decoded_whole(ty: &str) -> bool {
    is_message(ty) || matches!(ty, "tool/call" | "request/header")
}

fn data(event: &Value) -> Option<&Object> {
    event.as_object()?.get("data")?.as_object()
}

fn text_of(o: &Object, key: &str) -> Option<String> {
    o.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Every `text` string under `v`, in order, joined by newlines into `out`.
fn collect_text(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => items.iter().for_each(|i| collect_text(i, out)),
        Value::Object(o) => {
            for (k, value) in o.iter() {
                match value {
                    Value::String(s) if k.eq_str("text") => {
                        if !out.is_empty() {
                            out.push('\n');
                        }
                        out.push_str(&s.to_string_lossy());
                    }
                    Value::Array(_) | Value::Object(_) => collect_text(value, out),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The searched text of a message event (user, assistant text and reasoning, tool results),
/// or `None` for other events and messages without text.
pub(crate) fn message_text(event: &Value) -> Option<String> {
    if !is_message(event_type(event)) {
        return None;
    }
    let d = data(event)?;
    let mut out = String::new();
    for key in ["content", "message"] {
        if let Some(v) = d.get(key) {
            collect_text(v, &mut out);
        }
    }
    Some(out).filter(|t| !t.is_empty())
}

impl Fold {
    /// Fold one event; its message text, if it has one, is returned for the index.
    pub(crate) fn apply(&mut self, seq: u64, event: &Value) -> Option<String> {
        self.indexed = seq + 1;
        if let Some(t) = event
            .as_object()
            .and_then(|o| o.get("time"))
            .and_then(Value::as_f64)
        {
            self.last_event_at = Some(t as i64);
        }
        let ty = event_type(event);
        if let Some(d) = data(event) {
            if ty == "tool/call" {
                self.call(d, "callId");
            }
            if ty == "request/header" {
                if let Some(config) = d
                    .get("header")
                    .and_then(Value::as_object)
                    .and_then(|h| h.get("config"))
                    .and_then(Value::as_object)
                {
                    self.model(config);
                }
            }
            if let Some(source) = d
                .get("message")
                .and_then(Value::as_object)
                .and_then(|m| m.get("source"))
                .and_then(Value::as_object)
                .filter(|s| s.get("kind").and_then(Value::as_str) == Some("model"))
            {
                self.model(source);
            }
            for key in ["content", "message"] {
                if let Some(v) = d.get(key) {
                    self.blocks(v);
                }
            }
        }
        message_text(event)
    }

    /// Fold the events of one stored line (`members` events from seq `first`) from its text
    /// alone, when they carry nothing the fold reads but their times: a V0/V1 chunk row (its
    /// members' times are `time0` plus the running sum of `dt`), or a single event that is no
    /// message, tool call or request header and whose `data` holds no `content` or `message`.
    /// Returns false, folding nothing, for any other line (fold its decoded events with
    /// [`Fold::apply`]), and for anything the skim does not index plainly. Invariant: a line
    /// taken here folds exactly as its decoded events do (a committed line was read by DSH's
    /// reader, so a row's shape is valid).
    pub(crate) fn take_line(
        &mut self,
        version: u32,
        first: u64,
        members: u32,
        line: &[u8],
    ) -> bool {
        // DSH writes the type first: a line opening with a type folded whole is decoded
        // without being skimmed first.
        if opened_type(line).is_some_and(decoded_whole) {
            return false;
        }
        let Ok(Skim::Indexed(env)) = skim(line) else {
            return false;
        };
        let Some(ty) = env.get(Level::Top, "type").and_then(|s| env.str(s)) else {
            return false;
        };
        let last_time = if version < 2 && is_row_tag(&ty) {
            let Some(t) = row_last_time(&env, members) else {
                return false;
            };
            Some(t)
        } else if members == 1 {
            let whole = decoded_whole(&ty)
                || env.get(Level::Data, "content").is_some()
                || env.get(Level::Data, "message").is_some();
            if whole {
                return false;
            }
            env.get(Level::Top, "time").and_then(|s| env.number(s))
        } else {
            return false;
        };
        self.indexed = first + u64::from(members);
        if let Some(t) = last_time {
            self.last_event_at = Some(t as i64);
        }
        true
    }

    fn model(&mut self, o: &Object) {
        let provider = text_of(o, "provider");
        if let Some(model) = text_of(o, "model") {
            if let Some(p) = &provider {
                self.models.insert(format!("{p}/{model}"));
            }
            self.models.insert(model);
        }
        if let Some(p) = provider {
            self.providers.insert(p);
        }
    }

    /// A tool call (`tool/call` data, or a `tool-call` content block).
    fn call(&mut self, o: &Object, id_key: &str) {
        let name = text_of(o, "name").or_else(|| text_of(o, "toolName"));
        if let Some(name) = name {
            if let Some(id) = text_of(o, id_key) {
                self.pending.insert(id, name.clone());
            }
            self.tools.insert(name);
        }
    }

    /// Tool-call and tool-result content blocks anywhere under `v`.
    fn blocks(&mut self, v: &Value) {
        match v {
            Value::Array(items) => items.iter().for_each(|i| self.blocks(i)),
            Value::Object(o) => {
                match o.get("type").and_then(Value::as_str) {
                    Some("tool-call") => self.call(o, "toolCallId"),
                    Some("tool-result") => {
                        let call = text_of(o, "toolCallId");
                        let name = call.as_ref().and_then(|c| self.pending.remove(c));
                        if o.get("isError") == Some(&Value::Bool(true)) {
                            let name = name
                                .or_else(|| text_of(o, "toolName"))
                                .unwrap_or_else(|| UNKNOWN_TOOL.to_owned());
                            self.tool_errors.insert(name);
                        }
                    }
                    _ => {}
                }
                for (_, value) in o.iter() {
                    if matches!(value, Value::Array(_) | Value::Object(_)) {
                        self.blocks(value);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A [`LineReader`] folding a session's events into a [`Fold`] (whole lines from their text
/// where [`Fold::take_line`] can) and collecting its messages' texts.
pub(crate) struct Folding<'a> {
    pub(crate) fold: &'a mut Fold,
    /// The session's format version (how its lines are decoded).
    pub(crate) version: u32,
    /// Seq and text of each message folded.
    pub(crate) messages: Vec<(u64, String)>,
}

impl LineReader for Folding<'_> {
    fn line(&mut self, first: u64, members: u32, line: &[u8]) -> Result<bool> {
        Ok(self.fold.take_line(self.version, first, members, line))
    }

    fn event(&mut self, seq: u64, event: &Value) -> Result<()> {
        if let Some(text) = self.fold.apply(seq, event) {
            self.messages.push((seq, text));
        }
        Ok(())
    }
}

/// The time of a chunk row's last member, as the row's expansion computes it
/// ([`member_times`]); `None` unless the row holds `members` members' gaps as safe integers.
fn row_last_time(env: &Envelope<'_>, members: u32) -> Option<f64> {
    let time0 = env
        .get(Level::Top, "time0")
        .and_then(|s| env.value(s).ok())?
        .as_safe_integer()?;
    let Value::Array(gaps) = env.get(Level::Data, "dt").and_then(|s| env.value(s).ok())? else {
        return None;
    };
    let dt: Vec<i64> = gaps
        .iter()
        .map(Value::as_safe_integer)
        .collect::<Option<_>>()?;
    if dt.len() + 1 != usize::try_from(members).ok()? {
        return None;
    }
    let times = member_times(time0, &dt).ok()?;
    times.last().map(|&t| t as f64)
}

/// A verdict as its text.
pub(crate) fn verdict_text(v: &Verdict) -> String {
    match v {
        Verdict::Clean => "clean".into(),
        Verdict::Torn => "torn".into(),
        Verdict::Corrupt(why) => format!("corrupt: {why}"),
        Verdict::Unsupported(why) => format!("unsupported: {why}"),
    }
}

/// A verdict's kind: what `--verdict` matches.
pub(crate) fn verdict_kind(v: &str) -> &str {
    v.split(':').next().unwrap_or(v)
}

impl Store {
    /// Session `meta`'s row, from the fold of its events and the projection units' states.
    /// A unit whose state the session cannot answer (a log DSH's fold refuses) counts as empty.
    pub(crate) fn search_row(&self, meta: &SessionMeta, fold: &Fold) -> Result<SessionRow> {
        let id = meta.id_lossy();
        let unit = |name: &str| self.state_at(&id, name, None).ok();
        let num = |v: &Value, k: &str| {
            v.as_object()
                .and_then(|o| o.get(k))
                .and_then(Value::as_f64)
                .map_or(0, |n| n.max(0.0) as u64)
        };
        let tokens = unit("tokenUsage").map_or_else(TokenTotals::default, |u| {
            let (input, output, cache_read, cache_write) = (
                num(&u, "uncachedInputTokens"),
                num(&u, "outputTokens"),
                num(&u, "cacheReadTokens"),
                num(&u, "cacheWriteTokens"),
            );
            TokenTotals {
                input,
                output,
                cache_read,
                cache_write,
                total: input + output + cache_read + cache_write,
            }
        });
        let turns = unit("turns")
            .and_then(|t| t.as_array().map(|a| a.len() as u64))
            .unwrap_or(0);
        let open = unit("openTurn").is_some_and(|t| !matches!(t, Value::Null));
        let title = unit("title").and_then(|t| t.as_str().map(str::to_owned));
        let (mut depth, mut parent_meta) = (0, meta.fork_of.clone());
        while let Some(base) = parent_meta {
            depth += 1;
            parent_meta = self.meta(&base.id)?.and_then(|m| m.fork_of);
        }
        let sorted = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>();
        Ok(SessionRow {
            id,
            header: String::from_utf8_lossy(
                meta.header.strip_suffix(b"\n").unwrap_or(&meta.header),
            )
            .into_owned(),
            cwd: meta.cwd.clone(),
            title,
            verdict: verdict_text(&meta.verdict),
            format: meta.version,
            created_at: meta.created_at,
            activity_at: meta.activity_ms,
            last_event_at: fold.last_event_at,
            events: meta.events,
            turns,
            tokens,
            models: sorted(&fold.models),
            providers: sorted(&fold.providers),
            tools: sorted(&fold.tools),
            tool_errors: sorted(&fold.tool_errors),
            open,
            parent: meta
                .fork_of
                .as_ref()
                .map(|b| String::from_utf8_lossy(&b.id).into_owned()),
            depth,
        })
    }
}
