//! Projection units at any seq (nearest checkpoint + tail fold) against a naive fold of the
//! prefix, for imported and live-appended sessions; DSH's request-header fold on the corpus;
//! request reconstruction and its mismatch check.

use proptest::prelude::*;
use sessionlog::codec::format::event::event_type;
use sessionlog::codec::json::{self, Object, Value};
use sessionlog::codec::rules::projection::{fold, unit_at, UNITS};
use sessionlog::codec::rules::surface::SurfaceModel;
use sessionlog::engine::{Error, CHECKPOINT_EVERY};
use sessionlog_harness::gen::{session_batches, session_bytes, GenOptions};

use crate::fixtures::{all_events, fixtures, import_bytes, temp_host_store, temp_store};

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]
    #[test]
    fn every_unit_at_every_seq_equals_a_naive_fold(index in 0u64..300, events in 600u64..1200) {
        let opts = GenOptions { sessions: 1, events_per_session: events, seed: 9, torn_fraction: 0.0 };
        let (_d, store) = temp_store();
        let r = import_bytes(&store, "gen", &session_bytes(index, &opts), false).expect("import");
        let feed = session_batches(index, &opts);
        let (_d2, live) = temp_store();
        crate::fixtures::host_feed(&live, &feed);
        let log = all_events(&store, &r.id);
        prop_assert!(log.len() as u64 > CHECKPOINT_EVERY);
        for unit in &UNITS {
            for n in (0..log.len()).step_by(11).chain([log.len() - 1]) {
                let naive = json::stringify(&fold(unit.key, 0, &log[..=n]).expect("unit"));
                let ours = json::stringify(&store.state_at(&r.id, unit.key, Some(n as u64)).expect("state"));
                prop_assert_eq!(&ours, &naive, "{} at {}", unit.key, n);
                let live_state = json::stringify(&live.state_at(&feed.id, unit.key, Some(n as u64)).expect("live state"));
                prop_assert_eq!(&live_state, &naive, "live {} at {}", unit.key, n);
            }
        }
    }
}

/// Every unit answers for V4 sessions by DSH 0.2's folds (the reshaped ones: tokenUsage,
/// requestHeader, inbox), at any seq, for live-appended and imported copies alike.
#[test]
fn v4_units_equal_a_naive_fold() {
    use sessionlog::codec::rules::projection::fold_in;

    let opts = GenOptions {
        sessions: 3,
        events_per_session: 20_000,
        seed: 10,
        torn_fraction: 0.0,
    };
    for index in 0..opts.sessions {
        let feed = sessionlog_harness::gen::session_batches_v4(index, &opts);
        let (_d, live) = temp_host_store();
        crate::fixtures::host_feed(&live, &feed);
        let log = all_events(&live, &feed.id);
        assert!(log.len() as u64 > CHECKPOINT_EVERY, "{} events", log.len());
        let mut file = feed.header_line.clone() + "\n";
        for b in &feed.batches {
            file += &b.text;
        }
        let (_d2, imported) = temp_host_store();
        import_bytes(&imported, "v4", file.as_bytes(), true).expect("import");
        for unit in &UNITS {
            for n in (0..log.len()).step_by(13).chain([log.len() - 1]) {
                let naive = json::stringify(
                    &fold_in(SurfaceModel::V4, unit.key, 0, &log[..=n]).expect("unit"),
                );
                for store in [&live, &imported] {
                    let ours = json::stringify(
                        &store
                            .state_at(&feed.id, unit.key, Some(n as u64))
                            .expect("state"),
                    );
                    assert_eq!(ours, naive, "{} at {n}", unit.key);
                }
            }
        }
        let usage = live.state_at(&feed.id, "tokenUsage", None).expect("usage");
        assert_ne!(
            json::stringify(&usage),
            json::stringify(&fold_in(SurfaceModel::V4, "tokenUsage", 0, &[]).expect("zero"))
        );
        let header = live
            .state_at(&feed.id, "requestHeader", None)
            .expect("header");
        assert!(header
            .as_object()
            .is_some_and(|h| h.contains_key("config") && !h.contains_key("system")));
        let at = live.dispatch_point(&feed.id, 1, 1).expect("dispatch point");
        let request = live.request(&feed.id, 1, 1).expect("request");
        let o = request.as_object().expect("object");
        assert_eq!(
            o.get("messages"),
            Some(&Value::Array(
                live.messages_at(&feed.id, Some(at)).expect("messages")
            ))
        );
        assert_eq!(
            o.get("header"),
            Some(
                &live
                    .state_at(&feed.id, "requestHeader", Some(at))
                    .expect("header")
            )
        );
    }
}

/// Fold `log` into every unit of `model`, checking that an event of a type a unit does not
/// declare in `touches` leaves its state as it was; returns, per unit, how many events did.
fn check_untouched(model: SurfaceModel, log: &[Value], name: &str, checked: &mut [u64]) {
    for (i, checked) in checked.iter_mut().enumerate() {
        let unit = unit_at(model, i);
        let mut state = unit.init(0);
        for (seq, e) in log.iter().enumerate() {
            if unit.touches(event_type(e)) {
                unit.apply(&mut state, seq as u64, e);
                continue;
            }
            let before = state.clone();
            unit.apply(&mut state, seq as u64, e);
            assert_eq!(
                state,
                before,
                "{name}: unit {} changed at seq {seq} by a {} it does not declare",
                unit.key,
                event_type(e)
            );
            *checked += 1;
        }
    }
}

/// The writer checkpoints a unit no event touched as a reference to its last whole checkpoint,
/// trusting each unit's `touches`: every fold leaves its state as it is for every other type,
/// on generated V0 and V4 logs and on DSH's own corpus.
#[test]
fn a_unit_changes_only_on_the_event_types_it_declares() {
    let opts = GenOptions {
        sessions: 4,
        events_per_session: 3000,
        seed: 21,
        torn_fraction: 0.0,
    };
    for model in [SurfaceModel::V0, SurfaceModel::V4] {
        let mut checked = vec![0u64; UNITS.len()];
        for index in 0..opts.sessions {
            let feed = match model {
                SurfaceModel::V0 => session_batches(index, &opts),
                SurfaceModel::V4 => sessionlog_harness::gen::session_batches_v4(index, &opts),
            };
            let log: Vec<Value> = feed.batches.iter().flat_map(|b| b.events.clone()).collect();
            check_untouched(model, &log, &feed.id, &mut checked);
        }
        for (i, n) in checked.iter().enumerate() {
            assert!(
                *n > 100,
                "{model:?} {}: only {n} events checked",
                UNITS[i].key
            );
        }
    }
    let Some(dir) = fixtures() else { return };
    let dsh = dir.join("dsh");
    let mut logs = 0;
    let mut checked = vec![0u64; UNITS.len()];
    for name in crate::fixtures::names_ending(&dsh, &[".jsonl"]) {
        let (_d, store) = temp_store();
        let bytes = std::fs::read(dsh.join(&name)).expect("fixture");
        let Ok(r) = import_bytes(&store, &name, &bytes, false) else {
            continue;
        };
        let mut log = Vec::new();
        if store
            .events(&r.id, 0, None, &mut |_, e| {
                log.push(e.clone());
                Ok(())
            })
            .is_ok()
        {
            check_untouched(SurfaceModel::V0, &log, &name, &mut checked);
            logs += 1;
        }
    }
    assert!(logs >= 150, "only {logs} corpus logs were read");
}

#[test]
fn the_request_header_unit_equals_dsh_s_fold_on_the_corpus() {
    let Some(dir) = fixtures() else { return };
    let expected = dir.join("dsh-expected");
    let mut checked = 0;
    for entry in std::fs::read_dir(&expected).expect("dir") {
        let name = entry.expect("e").file_name().into_string().expect("utf8");
        let Some(stem) = name.strip_suffix(".request-header.json") else {
            continue;
        };
        let want = std::fs::read_to_string(expected.join(&name)).expect("expected");
        let bytes = std::fs::read(dir.join("dsh").join(format!("{stem}.jsonl"))).expect("fixture");
        let (_d, store) = temp_store();
        let r = import_bytes(&store, stem, &bytes, false).expect("import");
        let got =
            json::stringify(&store.state_at(&r.id, "requestHeader", None).expect("state")) + "\n";
        assert_eq!(got, want, "{stem}");
        checked += 1;
    }
    assert_eq!(checked, 159);
}

#[test]
fn a_recorded_request_checks_against_the_log() {
    let opts = GenOptions {
        sessions: 1,
        events_per_session: 400,
        seed: 4,
        torn_fraction: 0.0,
    };
    let (_d, store) = temp_store();
    let r = import_bytes(&store, "gen", &session_bytes(3, &opts), false).expect("import");
    let request = store.request(&r.id, 1, 1).expect("request");
    store
        .check_request(&r.id, 1, 1, &request)
        .expect("the reconstruction checks against itself");
    let o = request.as_object().expect("object");
    let mut messages = o
        .get("messages")
        .and_then(Value::as_array)
        .expect("messages")
        .to_vec();
    assert!(!messages.is_empty());
    messages.push(Value::Null);
    let tampered = Value::Object(
        Object::new()
            .with("header", o.get("header").cloned().expect("header"))
            .with("messages", Value::Array(messages.clone())),
    );
    match store.check_request(&r.id, 1, 1, &tampered) {
        Err(Error::ReconstructionMismatch { what, .. }) => {
            assert_eq!(what, format!("messages[{}]", messages.len() - 1))
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    let header = Value::Object(Object::new().with("config", Value::Null));
    let tampered = Value::Object(
        Object::new()
            .with("header", header)
            .with("messages", o.get("messages").cloned().expect("m")),
    );
    match store.check_request(&r.id, 1, 1, &tampered) {
        Err(Error::ReconstructionMismatch { what, .. }) => assert_eq!(what, "header.config"),
        other => panic!("expected a mismatch, got {other:?}"),
    }
    assert!(matches!(
        store.state_at(&r.id, "nope", None),
        Err(Error::UnknownUnit { .. })
    ));
}
