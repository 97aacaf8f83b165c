use proptest::prelude::*;

use super::*;
use crate::json::{parse, stringify};

fn chunk_event(
    seq: i64,
    time: i64,
    turn: i64,
    index: i64,
    kind: u8,
    text: &str,
    name: Option<&str>,
) -> Value {
    let chunk = match kind {
        0 => Object::new()
            .with("type", "text-delta")
            .with("index", index)
            .with("text", text),
        1 => Object::new()
            .with("type", "reasoning-delta")
            .with("index", index)
            .with("text", text),
        _ => {
            let mut c = Object::new()
                .with("type", "tool-call-delta")
                .with("index", index)
                .with("id", "call-1");
            if let Some(n) = name {
                c = c.with("name", n);
            }
            c.with("argumentsDelta", text)
        }
    };
    let data = Object::new()
        .with("turn", turn)
        .with("step", 1i64)
        .with("chunk", chunk);
    Value::Object(
        Object::new()
            .with("type", "assistant/chunk")
            .with("seq", seq)
            .with("time", time)
            .with("data", data),
    )
}

/// Pack, write each record as a line, read it back and expand: the events must come back.
fn round_trip(events: &[Value]) -> Vec<Value> {
    pack_chunk_runs(events)
        .iter()
        .flat_map(|record| {
            let line = stringify(record);
            decode_record(parse(&line).expect("parse")).expect("decode")
        })
        .collect()
}

#[test]
fn three_deltas_pack_into_one_row_with_dsh_key_order() {
    let events: Vec<Value> = (0..3)
        .map(|i| chunk_event(i, 100 + i * 2, 1, 0, 0, "t", None))
        .collect();
    let rows = pack_chunk_runs(&events);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        stringify(&rows[0]),
        r#"{"type":"text-chunks","seq0":0,"time0":100,"data":{"turn":1,"step":1,"index":0,"dt":[2,2],"texts":["t","t","t"]}}"#
    );
}

#[test]
fn two_deltas_stay_loose() {
    let events: Vec<Value> = (0..2)
        .map(|i| chunk_event(i, 100, 1, 0, 0, "t", None))
        .collect();
    assert_eq!(pack_chunk_runs(&events), events);
}

#[test]
fn malformed_rows_name_the_rule() {
    let bad = r#"{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a"]}}"#;
    let err = decode_record(parse(bad).expect("parse")).expect_err("arity");
    assert_eq!(
        err,
        "malformed text-chunks storage row: dt length 1 does not match 1 members"
    );
    let bad = r#"{"type":"tool-call-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"args":["a"]}}"#;
    let err = decode_record(parse(bad).expect("parse")).expect_err("id");
    assert!(
        err.contains("exactly {turn, step, index, id, name?, dt, args}"),
        "{err}"
    );
}

/// One generated chunk spec: kind, turn, index, time step, whether the tool is named, text.
type ChunkSpec = (u8, i64, i64, i64, bool, String);

/// The chunk events `spec` describes, at rising times from 1000; named tools are `tool`.
fn chunk_events(spec: &[ChunkSpec], tool: &str) -> Vec<Value> {
    let mut time = 1_000;
    spec.iter()
        .enumerate()
        .map(|(i, (kind, turn, index, dt, named, text))| {
            time += dt;
            chunk_event(
                i as i64,
                time,
                *turn,
                *index,
                *kind,
                text,
                named.then_some(tool),
            )
        })
        .collect()
}

proptest! {
    #[test]
    fn pack_then_expand_is_identity(
        spec in proptest::collection::vec((0u8..3, 0i64..2, 0i64..2, -5i64..50, any::<bool>(), "[a-z\"\\\\]{0,3}"), 0..40)
    ) {
        let events = chunk_events(&spec, "read");
        let back = round_trip(&events);
        prop_assert_eq!(back.iter().map(stringify).collect::<Vec<_>>(), events.iter().map(stringify).collect::<Vec<_>>());
    }

    /// A record's line written straight from the batch is the stringified record, byte for byte.
    #[test]
    fn written_lines_are_the_stringified_records(
        spec in proptest::collection::vec((0u8..3, 0i64..2, 0i64..2, -5i64..50, any::<bool>(), "[a-z\"\\\\\u{1}é😀]{0,3}"), 0..40)
    ) {
        let events = chunk_events(&spec, "read\n");
        for packed in pack_runs(&events) {
            let mut line = String::new();
            packed.write_json(&mut line);
            let members = packed.members();
            let value = packed.into_value();
            prop_assert_eq!(line, stringify(&value));
            let decoded = decode_record(value).expect("decode").len();
            prop_assert_eq!(members, decoded);
        }
    }
}
