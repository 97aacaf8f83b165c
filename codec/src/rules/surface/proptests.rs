//! Property tests: on generated logs (appends of every surface type, non-surface events, replaces
//! over current nodes or arbitrary earlier seqs, so reversed, overlapping, nested and stale
//! ranges, and `tool/result` rewrites keeping or changing the message id):
//! - folding with a serde (bincode) snapshot/restore at any point accepts and rejects exactly the
//!   same events, with the same errors and the same state, as folding straight through;
//! - at every step the incrementally folded surface derives the same messages as a from-scratch
//!   [`replay`] of the prefix;
//! - nodes and shadowed seqs partition the accepted surface events, and the generation counts the
//!   replacements.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::json::{parse, stringify};

#[derive(Clone, Debug)]
enum Target {
    /// The i-th current node (mod the node count).
    Node(u8),
    /// Any earlier seq (mod the log length), surface or not, shadowed or not.
    Seq(u8),
}

#[derive(Clone, Debug)]
enum Action {
    User,
    Assistant {
        empty: bool,
    },
    ToolResult,
    Other,
    Replace {
        start: Target,
        end: Target,
        tool: bool,
        exact_sources: bool,
    },
    Rewrite {
        target: Target,
        same_id: bool,
    },
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![3 => any::<u8>().prop_map(Target::Node), 1 => any::<u8>().prop_map(Target::Seq)]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => Just(Action::User),
        2 => any::<bool>().prop_map(|empty| Action::Assistant { empty }),
        3 => Just(Action::ToolResult),
        1 => Just(Action::Other),
        3 => (target(), target(), any::<bool>(), any::<bool>()).prop_map(
            |(start, end, tool, exact_sources)| Action::Replace { start, end, tool, exact_sources }
        ),
        2 => (target(), any::<bool>())
            .prop_map(|(target, same_id)| Action::Rewrite { target, same_id }),
    ]
}

fn pick(t: &Target, nodes: &[u64], seq: u64) -> u64 {
    match t {
        Target::Node(i) if !nodes.is_empty() => nodes[usize::from(*i) % nodes.len()],
        Target::Node(i) | Target::Seq(i) => u64::from(*i) % seq.max(1),
    }
}

fn ev(text: &str) -> Value {
    parse(text).unwrap_or_else(|e| panic!("bad generated JSON {text}: {e}"))
}

fn tool_data(seq: u64, id: &str) -> String {
    format!(
        r#"{{"turn":1,"step":1,"message":{{"id":"{id}","role":"user","source":{{"kind":"tool","callId":"c{seq}"}},"content":[{{"type":"tool-result","toolCallId":"c{seq}","content":[{{"type":"text","text":"out {seq}"}}]}}]}}}}"#
    )
}

/// The candidate event for `action` at `seq`, given the current surface and the accepted log.
fn build(action: &Action, seq: u64, nodes: &[u64], log: &[Value]) -> Value {
    let user = |extra: &str| {
        format!(
            r#"{{"type":"user/message","seq":{seq},"time":{seq},"data":{{"content":[{{"type":"text","text":"u{seq}"}}],"source":{{"kind":"user"}},"role":"user","id":"m{seq}"}}{extra}}}"#
        )
    };
    let text = match action {
        Action::User => user(r#","surfaceOp":"append""#),
        Action::Assistant { empty } => {
            let content = if *empty {
                "[]"
            } else {
                r#"[{"type":"text","text":"a"}]"#
            };
            format!(
                r#"{{"type":"assistant/message","seq":{seq},"time":0,"data":{{"turn":1,"step":1,"message":{{"role":"assistant","content":{content},"source":{{"kind":"model","provider":"p","model":"m"}},"id":"a{seq}"}}}},"sourceEventSeqs":[],"surfaceOp":"append"}}"#
            )
        }
        Action::ToolResult => format!(
            r#"{{"type":"tool/result","seq":{seq},"time":0,"data":{},"surfaceOp":"append"}}"#,
            tool_data(seq, &format!("r{seq}"))
        ),
        Action::Other => format!(r#"{{"type":"step/start","seq":{seq},"time":0,"data":{{}}}}"#),
        Action::Replace {
            start,
            end,
            tool,
            exact_sources,
        } => {
            let (s, e) = (pick(start, nodes, seq), pick(end, nodes, seq));
            let sources: Vec<String> = if *exact_sources {
                BTreeSet::from([s, e]).iter().map(u64::to_string).collect()
            } else {
                (0..seq).map(|x| x.to_string()).collect()
            };
            let extra = format!(
                r#","sourceEventSeqs":[{}],"surfaceOp":{{"op":"replace","start":{s},"end":{e}}}"#,
                sources.join(",")
            );
            if *tool {
                format!(
                    r#"{{"type":"tool/result","seq":{seq},"time":0,"data":{}{extra}}}"#,
                    tool_data(seq, "x")
                )
            } else {
                user(&extra)
            }
        }
        Action::Rewrite { target, same_id } => {
            let t = pick(target, nodes, seq);
            let original = usize::try_from(t).ok().and_then(|i| log.get(i));
            let data = original
                .and_then(Value::as_object)
                .and_then(|o| o.get("data"));
            let mut data = data.map_or_else(|| "{}".to_owned(), stringify);
            data = data.replacen("\"text\":\"out", "\"text\":\"pruned", 1);
            if !same_id {
                data = data.replacen("\"id\":\"", "\"id\":\"new-", 1);
            }
            format!(
                r#"{{"type":"tool/result","seq":{seq},"time":0,"data":{data},"sourceEventSeqs":[{t}],"surfaceOp":{{"op":"replace","start":{t},"end":{t}}}}}"#
            )
        }
    };
    ev(&text)
}

/// Generate the candidate events (each with whether the fold accepted it) and the accepted log.
fn generate(actions: &[Action]) -> (Vec<(Value, bool)>, Vec<Value>) {
    let mut fold = SurfaceFold::new();
    let mut log: Vec<Value> = Vec::new();
    let mut candidates = Vec::new();
    for action in actions {
        let seq = fold.next_seq();
        let event = build(action, seq, fold.nodes(), &log);
        let accepted = fold
            .apply(&event, |s| usize::try_from(s).ok().and_then(|i| log.get(i)))
            .is_ok();
        if accepted {
            log.push(event.clone());
        }
        candidates.push((event, accepted));
    }
    (candidates, log)
}

fn snapshot(fold: &SurfaceFold) -> SurfaceFold {
    let config = bincode::config::standard();
    let bytes = bincode::serde::encode_to_vec(fold, config)
        .unwrap_or_else(|e| panic!("encode fold state: {e}"));
    let (back, used): (SurfaceFold, usize) = bincode::serde::decode_from_slice(&bytes, config)
        .unwrap_or_else(|e| panic!("decode fold state: {e}"));
    assert_eq!(used, bytes.len());
    back
}

fn outcome(
    fold: &mut SurfaceFold,
    event: &Value,
    log: &[Value],
) -> std::result::Result<SurfaceChange, String> {
    fold.apply(event, |s| usize::try_from(s).ok().and_then(|i| log.get(i)))
        .map_err(|e| e.to_string())
}

proptest! {
    #[test]
    fn snapshot_restore_folds_like_straight_through(
        actions in prop::collection::vec(action(), 1..40),
        split in any::<prop::sample::Index>(),
    ) {
        let (candidates, log) = generate(&actions);
        let split = split.index(candidates.len() + 1);
        let mut straight = SurfaceFold::new();
        let mut restored = SurfaceFold::new();
        let mut accepted = Vec::new();
        for (i, (event, was_accepted)) in candidates.iter().enumerate() {
            if i == split {
                restored = snapshot(&restored);
            }
            let a = outcome(&mut straight, event, &log);
            let b = outcome(&mut restored, event, &log);
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(a.is_ok(), *was_accepted);
            prop_assert_eq!(&straight, &restored);
            if a.is_ok() {
                accepted.push(event.clone());
                let lookup = |s: u64| usize::try_from(s).ok().and_then(|j| accepted.get(j));
                let incremental = derive_messages(straight.nodes(), lookup);
                let full = replay(&accepted);
                prop_assert!(incremental.is_ok() && full.is_ok());
                let full = full.unwrap_or_else(|e| panic!("{e}"));
                prop_assert_eq!(incremental.ok(), Some(full.messages));
                prop_assert_eq!(&full.surface, &straight);
            }
        }
        if split == candidates.len() {
            restored = snapshot(&restored);
        }
        prop_assert_eq!(&straight, &restored);
        check_partition(&straight, &log)?;
    }
}

proptest! {
    /// Undoing the last k accepted events, newest first, gives exactly the fold of the prefix.
    #[test]
    fn undo_restores_the_prefix_fold(
        actions in prop::collection::vec(action(), 1..40),
        keep in any::<prop::sample::Index>(),
    ) {
        let (candidates, log) = generate(&actions);
        let mut fold = SurfaceFold::new();
        let mut states = vec![fold.clone()];
        let mut changes = Vec::new();
        let mut accepted: Vec<Value> = Vec::new();
        for (event, _) in &candidates {
            let lookup = |s: u64| usize::try_from(s).ok().and_then(|j| log.get(j));
            if let Ok(change) = fold.apply(event, lookup) {
                accepted.push(event.clone());
                changes.push(change);
                states.push(fold.clone());
            }
        }
        let keep = keep.index(changes.len() + 1);
        while changes.len() > keep {
            let change = changes.pop().unwrap_or(SurfaceChange::Unchanged);
            fold.undo(&change);
        }
        prop_assert_eq!(&fold, &states[keep]);
    }
}

/// Nodes and shadowed seqs are disjoint and together are exactly the accepted surface events.
fn check_partition(fold: &SurfaceFold, log: &[Value]) -> std::result::Result<(), TestCaseError> {
    let surface: BTreeSet<u64> = log
        .iter()
        .enumerate()
        .filter(|(_, e)| is_surface_event(e))
        .filter_map(|(i, _)| u64::try_from(i).ok())
        .collect();
    let nodes: BTreeSet<u64> = fold.nodes().iter().copied().collect();
    prop_assert_eq!(nodes.len(), fold.nodes().len(), "nodes are distinct");
    let shadowed: Vec<u64> = fold
        .replacements()
        .iter()
        .flat_map(|r| r.shadowed_seqs.clone())
        .collect();
    let shadowed_set: BTreeSet<u64> = shadowed.iter().copied().collect();
    prop_assert_eq!(
        shadowed_set.len(),
        shadowed.len(),
        "a node is shadowed once"
    );
    prop_assert!(nodes.is_disjoint(&shadowed_set));
    let all: BTreeSet<u64> = nodes.union(&shadowed_set).copied().collect();
    prop_assert_eq!(all, surface);
    prop_assert_eq!(
        usize::try_from(fold.replace_generation()).ok(),
        Some(fold.replacements().len())
    );
    Ok(())
}

/// The generator reaches the interesting cases (guards against a strategy that only appends):
/// a kept-id rewrite, a changed-id rewrite, ranges reversed in surface order, and a range whose
/// start seq is larger than its end seq but sits first on the surface.
#[test]
fn generator_covers_replaces_and_rejections() {
    let replace = |start, end| Action::Replace {
        start: Target::Node(start),
        end: Target::Node(end),
        tool: false,
        exact_sources: true,
    };
    let actions = [
        Action::ToolResult,
        Action::User,
        Action::User,
        Action::Rewrite {
            target: Target::Node(0),
            same_id: true,
        }, // [3,1,2]
        Action::Rewrite {
            target: Target::Node(0),
            same_id: false,
        }, // id changed: rejected
        replace(2, 1), // 2 after 1: rejected
        replace(0, 1), // (3..1) → [4,2]
        replace(1, 0), // 2 after 4: rejected
        replace(0, 1), // (4..2) → [5]
    ];
    let (candidates, log) = generate(&actions);
    let accepted: Vec<bool> = candidates.iter().map(|(_, a)| *a).collect();
    assert_eq!(
        accepted,
        [true, true, true, true, false, false, true, false, true]
    );
    let r = replay(&log).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.surface.nodes(), [5]);
    let shadowed: Vec<&[u64]> = r
        .surface
        .replacements()
        .iter()
        .map(|x| &x.shadowed_seqs[..])
        .collect();
    assert_eq!(shadowed, [&[0][..], &[3, 1], &[4, 2]]);
}
