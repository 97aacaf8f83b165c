//! V4 logs DSH 0.2 refuses when it loads them: its reader refuses a row (deferLoading) or an
//! unknown required type, and the `Session` it restores from the rows refuses an event's message
//! shape or surface transition. The import verdict is DSH's, with DSH's text and the committed
//! prefix DSH's scanner keeps; the bytes are stored unchanged. Plugin records keep their surface
//! metadata opaque, as DSH does. Logs are generated V4 sessions with one row rewritten.

use std::sync::Arc;

use proptest::prelude::*;
use sessionlog::codec::json::{self, Object, Value};
use sessionlog::codec::rules::surface::{replay_with, ImageOffload, SurfaceModel};
use sessionlog::engine::{BuiltinProjection, ImportReport, Options, Store, Verdict};
use sessionlog_harness::gen::{session_batches_v4, GenOptions};

use crate::fixtures::{all_events, export_bytes, import_bytes, temp_store, temp_store_with};

/// A V4 log as rows of text (row i holds seq i).
#[derive(Clone)]
struct Log {
    header: String,
    rows: Vec<String>,
}

impl Log {
    /// Generated session `index` with about `events` events, never torn.
    fn generated(index: u64, events: u64) -> Log {
        let opts = GenOptions {
            sessions: index + 1,
            events_per_session: events,
            seed: 18,
            torn_fraction: 0.0,
        };
        let feed = session_batches_v4(index, &opts);
        let rows: Vec<String> = feed
            .batches
            .iter()
            .flat_map(|b| b.text.lines().map(str::to_owned))
            .collect();
        assert_eq!(rows.len() as u64, feed.events(), "one row per event");
        Log {
            header: feed.header_line,
            rows,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut text = self.header.clone() + "\n";
        for row in &self.rows {
            text.push_str(row);
            text.push('\n');
        }
        text.into_bytes()
    }

    fn row(&self, seq: usize) -> Value {
        json::parse(&self.rows[seq]).expect("rows are JSON")
    }

    fn ty(&self, seq: usize) -> String {
        let row = self.row(seq);
        row.as_object()
            .and_then(|o| o.get("type"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    }

    /// The first seq whose row satisfies `pred`.
    fn find(&self, pred: impl Fn(&Value) -> bool) -> Option<usize> {
        (0..self.rows.len()).find(|&i| pred(&self.row(i)))
    }

    /// This log with row `seq` rewritten by `edit`.
    fn with_row(&self, seq: usize, edit: impl FnOnce(&mut Object)) -> Log {
        let mut row = self.row(seq);
        edit(row.as_object_mut().expect("rows are objects"));
        let mut log = self.clone();
        log.rows[seq] = json::stringify(&row);
        log
    }
}

/// Object member `path` (keys, outermost first), mutably.
fn at<'a>(o: &'a mut Object, path: &[&str]) -> &'a mut Object {
    let mut cur = o;
    for key in path {
        cur = cur
            .get_mut(key)
            .and_then(Value::as_object_mut)
            .unwrap_or_else(|| panic!("no object at {key}"));
    }
    cur
}

fn of_type(ty: &'static str) -> impl Fn(&Value) -> bool {
    move |v| {
        v.as_object()
            .and_then(|o| o.get("type"))
            .and_then(Value::as_str)
            == Some(ty)
    }
}

/// Import `log`; its verdict, and the stored bytes must be the file's.
fn import(log: &Log) -> (tempfile::TempDir, Store, ImportReport) {
    let (dir, store) = temp_store();
    let bytes = log.bytes();
    let report = import_bytes(&store, "v4", &bytes, false).expect("stored");
    assert_eq!(
        export_bytes(&store, &report.id),
        bytes,
        "export is the file"
    );
    (dir, store, report)
}

/// The import says `verdict` and keeps `events` logical events.
fn assert_verdict(log: &Log, verdict: Verdict, events: usize) {
    let (_d, _s, r) = import(log);
    assert_eq!(r.verdict, verdict);
    assert_eq!(r.events, events as u64, "committed prefix");
}

fn corrupt(text: String) -> Verdict {
    Verdict::Corrupt(text)
}

/// Generated session `index` (about 400 events), which must import clean.
fn base(index: u64) -> Log {
    let log = Log::generated(index, 400);
    let (_d, _s, r) = import(&log);
    assert_eq!(
        r.verdict,
        Verdict::Clean,
        "generated session {index} is clean"
    );
    log
}

#[test]
fn surface_op_on_an_event_that_cannot_join_the_surface() {
    let log = base(0);
    let r = log.find(of_type("step/start")).expect("a step");
    let broken = log.with_row(r, |o| o.insert("surfaceOp".into(), Value::from("append")));
    assert_verdict(
        &broken,
        corrupt(format!("invalid seed event at index {r}: session event \"step/start\" is not surface-eligible and cannot carry surfaceOp")),
        log.rows.len(),
    );
}

#[test]
fn assistant_messages_need_a_model_source_and_no_source_seqs() {
    let log = base(0);
    let r = log
        .find(of_type("assistant/message"))
        .expect("an assistant message");
    let no_model = log.with_row(r, |o| {
        at(o, &["data", "message", "source"]).remove("model");
    });
    assert_verdict(
        &no_model,
        corrupt(format!(
            "seed assistant/message at index {r} message must have model source"
        )),
        log.rows.len(),
    );
    let cites = log.with_row(r, |o| {
        o.insert(
            "sourceEventSeqs".into(),
            Value::Array(vec![Value::from(0i64)]),
        )
    });
    assert_verdict(
        &cites,
        corrupt(format!("invalid seed event at index {r}: format v4 assistant/message at seq {r} embeds its stream and cannot carry sourceEventSeqs")),
        log.rows.len(),
    );
}

#[test]
fn a_tool_result_replacement_may_change_only_its_content() {
    // Cut the log inside the turn of its first tool result and replace that result there.
    let log = base(0);
    let t = log.find(of_type("tool/result")).expect("a tool result");
    let end = (t..log.rows.len())
        .find(|&i| log.ty(i) == "turn/end")
        .expect("its turn ends");
    let mut cut = log.clone();
    cut.rows.truncate(end);
    let replacement = |edit: &dyn Fn(&mut Object)| {
        let mut row = log.row(t);
        let o = row.as_object_mut().expect("object");
        o.insert("seq".into(), Value::from(end as i64));
        o.insert(
            "sourceEventSeqs".into(),
            Value::Array(vec![Value::from(t as i64)]),
        );
        let op = Object::new()
            .with("op", "replace")
            .with("startSeq", t as i64)
            .with("endSeq", t as i64);
        o.insert("surfaceOp".into(), Value::Object(op));
        edit(o);
        let mut log = cut.clone();
        log.rows.push(json::stringify(&row));
        log
    };
    let content_only = replacement(&|o| {
        let text = Object::new().with("type", "text").with("text", "[pruned]");
        at(o, &["data", "message"])
            .insert("content".into(), Value::Array(vec![Value::Object(text)]));
    });
    assert_verdict(&content_only, Verdict::Clean, end + 1);
    let more = replacement(&|o| {
        at(o, &["data"]).insert("meta".into(), Value::Object(Object::new().with("x", 1i64)));
    });
    assert_verdict(
        &more,
        corrupt(format!("invalid seed event at index {end}: tool/result surface replacement may change only content")),
        end + 1,
    );
}

#[test]
fn an_unknown_required_event_type_is_unsupported_and_an_ignorable_one_is_kept() {
    let log = base(0);
    let r = log.find(of_type("turn/start")).expect("a turn");
    let unknown = log.with_row(r, |o| o.insert("type".into(), Value::from("x/unknown")));
    assert_verdict(
        &unknown,
        Verdict::Unsupported(format!(
            "format v4 contains unknown event type \"x/unknown\" at seq {r}"
        )),
        log.rows.len(),
    );
}

#[test]
fn a_tool_whose_defer_loading_is_not_true_refuses_the_log_at_its_row() {
    let log = base(0);
    let r = log
        .find(|v| {
            of_type("request/header")(v)
                && v.as_object()
                    .and_then(|o| o.get("data")?.as_object()?.get("header")?.as_object())
                    .is_some_and(|h| h.contains_key("tools"))
        })
        .expect("a request/header with tools");
    let broken = log.with_row(r, |o| {
        let header = at(o, &["data", "header"]);
        if let Some(Value::Array(tools)) = header.get_mut("tools") {
            if let Some(Value::Object(tool)) = tools.first_mut() {
                tool.insert("deferLoading".into(), Value::Bool(false));
            }
        }
    });
    assert_verdict(
        &broken,
        corrupt("format v4 tool deferLoading must be true when present".into()),
        r,
    );
}

/// Case 26: DSH 0.2's `SessionStore` registers no message projection, so its restore refuses a
/// log holding an `image/offload` event unless the image-offload plugin registered one. The
/// store's verdict follows its own registered projections the same way: refused by default,
/// clean with `image/offload` registered (at open or by one call), the bytes kept either way.
#[test]
fn an_image_offload_log_is_refused_by_default_and_clean_once_its_projection_is_registered() {
    let log = (0..6)
        .map(|i| Log::generated(i, 3000))
        .find(|l| l.find(of_type("image/offload")).is_some())
        .expect("a generated session offloads an image");
    let r = log.find(of_type("image/offload")).expect("offload");
    let missing = "session event \"image/offload\" requires a message projection; load its owning plugin or supply its projection definition";

    let (_d, default) = temp_store();
    let report = import_bytes(&default, "v4", &log.bytes(), false).expect("stored");
    assert_eq!(
        report.verdict,
        corrupt(format!("invalid seed event at index {r}: {missing}"))
    );
    assert_eq!(export_bytes(&default, &report.id), log.bytes());
    let e = default
        .messages_at(&report.id, None)
        .expect_err("DSH does not restore it");
    assert!(e.to_string().contains(missing), "{e}");
    let (_d, fresh) = temp_store();
    let strict = import_bytes(&fresh, "v4", &log.bytes(), true).expect_err("strict");
    assert!(strict.to_string().contains(missing), "{strict}");

    let (_d, opened_with) = temp_store_with(Options {
        message_projections: vec![BuiltinProjection::ImageOffload],
        ..Options::default()
    });
    let (_d, registered) = temp_store();
    registered
        .register_message_projection(Arc::new(ImageOffload))
        .expect("register");
    for store in [&opened_with, &registered] {
        let report = import_bytes(store, "v4", &log.bytes(), true).expect("clean");
        assert_eq!(report.verdict, Verdict::Clean);
        let naive = replay_with(SurfaceModel::V4, &all_events(store, &report.id)).expect("replay");
        assert_eq!(
            store.messages_at(&report.id, None).expect("messages"),
            naive.messages
        );
    }
}

#[test]
fn plugin_records_keep_their_surface_metadata_opaque() {
    let log = base(0);
    let (_d, plain, r0) = import(&log);
    // A plugin record in place of a log-only event, carrying surface metadata DSH never reads.
    let r = (1..log.rows.len())
        .find(|&i| {
            matches!(
                log.ty(i).as_str(),
                "agent/inbox/spliced" | "todo/write" | "plan/mode" | "sandbox/mode" | "goal/change"
            )
        })
        .unwrap_or_else(|| {
            let types: std::collections::BTreeSet<String> =
                (0..log.rows.len()).map(|i| log.ty(i)).collect();
            panic!("no log-only row to turn into a plugin record among {types:?}")
        });
    let record = log.with_row(r, |o| {
        o.insert("type".into(), Value::from("plugin:fidelity/note"));
        o.insert("ignorable".into(), Value::Bool(true));
        o.insert(
            "sourceEventSeqs".into(),
            Value::Array(vec![Value::from(0i64)]),
        );
        o.insert("surfaceOp".into(), Value::from("append"));
    });
    let (_d2, store, report) = import(&record);
    assert_eq!(report.verdict, Verdict::Clean);
    for at in (r.saturating_sub(2)..log.rows.len()).step_by(7) {
        let at = Some(at as u64);
        assert_eq!(
            store.messages_at(&report.id, at).expect("messages"),
            plain.messages_at(&r0.id, at).expect("messages"),
            "messages at {at:?}"
        );
        assert_eq!(
            store.surface_at(&report.id, at).expect("surface").to_json(),
            plain.surface_at(&r0.id, at).expect("surface").to_json()
        );
    }
}

/// One rule break of family `kind` injected into one row of `log` (the `pick`th candidate): the
/// log, the verdict DSH gives it, and the events its scanner commits.
fn inject(log: &Log, kind: usize, pick: usize) -> Option<(Log, Verdict, usize)> {
    let candidates = |ty: &'static str| -> Vec<usize> {
        (0..log.rows.len()).filter(|&i| log.ty(i) == ty).collect()
    };
    let all = log.rows.len();
    let choose = |c: Vec<usize>| (!c.is_empty()).then(|| c[pick % c.len()]);
    match kind {
        0 => {
            let r = choose(candidates("assistant/message"))?;
            let log = log.with_row(r, |o| {
                at(o, &["data", "message", "source"]).insert("kind".into(), Value::from("user"));
            });
            let text =
                format!("seed assistant/message at index {r} message must have model source");
            Some((log, corrupt(text), all))
        }
        1 => {
            let r = choose(candidates("step/end"))?;
            let log = log.with_row(r, |o| o.insert("surfaceOp".into(), Value::from("append")));
            let text = format!("invalid seed event at index {r}: session event \"step/end\" is not surface-eligible and cannot carry surfaceOp");
            Some((log, corrupt(text), all))
        }
        2 => {
            // Not a developer message (row admission refuses its role first) nor the inherited
            // cut (the scanner refuses a seeded log without it first).
            let kept = |i: &usize| {
                !matches!(
                    log.ty(*i).as_str(),
                    "developer/message" | "session/end-seed"
                )
            };
            let r = choose((0..all).filter(kept).collect())?;
            let log = log.with_row(r, |o| o.insert("type".into(), Value::from("future/event")));
            let text = format!("format v4 contains unknown event type \"future/event\" at seq {r}");
            Some((log, Verdict::Unsupported(text), all))
        }
        3 => {
            let r = choose(
                candidates("assistant/message")
                    .into_iter()
                    .filter(|&r| r > 0)
                    .collect(),
            )?;
            let log = log.with_row(r, |o| {
                o.insert(
                    "sourceEventSeqs".into(),
                    Value::Array(vec![Value::from(0i64)]),
                );
            });
            let text = format!("invalid seed event at index {r}: format v4 assistant/message at seq {r} embeds its stream and cannot carry sourceEventSeqs");
            Some((log, corrupt(text), all))
        }
        4 => {
            let with_tools = |i: &usize| {
                log.row(*i)
                    .as_object()
                    .and_then(|o| o.get("data")?.as_object()?.get("header")?.as_object())
                    .and_then(|h| h.get("tools")?.as_array().map(|t| !t.is_empty()))
                    == Some(true)
            };
            let r = choose(
                candidates("request/header")
                    .into_iter()
                    .filter(with_tools)
                    .collect(),
            )?;
            let log = log.with_row(r, |o| {
                if let Some(Value::Array(tools)) = at(o, &["data", "header"]).get_mut("tools") {
                    if let Some(Value::Object(tool)) = tools.first_mut() {
                        tool.insert("deferLoading".into(), Value::from("yes"));
                    }
                }
            });
            let text = "format v4 tool deferLoading must be true when present".to_owned();
            Some((log, corrupt(text), r))
        }
        _ => {
            let r = choose(candidates("user/message"))?;
            let log = log.with_row(r, |o| {
                at(o, &["data"]).remove("id");
            });
            let text = format!("seed user/message at index {r} lacks an identified message");
            Some((log, corrupt(text), all))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(36))]

    /// Random generated V4 logs with one rule broken at a random row: the verdict is DSH's and
    /// names that row, the committed prefix is DSH's, and the stored bytes are the file's.
    #[test]
    fn one_broken_row_is_named_by_the_verdict(index in 0u64..4, kind in 0usize..6, pick in 0usize..1000) {
        let log = Log::generated(index, 150);
        let (_d0, _s0, clean) = import(&log);
        prop_assert_eq!(clean.verdict, Verdict::Clean);
        let Some((broken, verdict, events)) = inject(&log, kind, pick) else {
            return Ok(());
        };
        let (_d, _s, r) = import(&broken);
        prop_assert_eq!(r.verdict, verdict);
        prop_assert_eq!(r.events, events as u64);
    }
}
