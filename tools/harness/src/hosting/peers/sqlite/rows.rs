//! DSH's schema-17 row encoding (persistence-spec §5.2), both ways.
//!
//! | column | scalar event | packed chunk row |
//! |---|---|---|
//! | `seq`, `time` | the event's | `seq0`, `time0` |
//! | `type` | the event type | `text-chunks` / `reasoning-chunks` / `tool-call-chunks` |
//! | `data` | `JSON.stringify(data)`: TEXT below 4,096 UTF-8 bytes, else a zstd level-3 frame (content size, no checksum) as BLOB if strictly smaller, else TEXT | same rule for the row's `data` |
//! | `source_event_seqs` | BLOB: first seq as LEB128, then each delta ZigZag-LEB128; NULL if absent | NULL |
//! | `surface_op` | `JSON.stringify(surfaceOp)`; NULL if absent | NULL |
//! | `ignorable` | 1 if `ignorable: true`, else NULL | 0 (the packed discriminator) |
//!
//! Packing is `pack_chunk_runs` per batch. DSH's SQLite packer also caps rows at 1,024 members
//! and 1 MiB of data; generated batches hold at most 60 events, so the cap never applies.

use anyhow::{anyhow, bail, Context};
use rusqlite::types::Value as Sql;
use sessionlog_codec::format::chunk_rows::{decode_record, is_row_tag, pack_chunk_runs};
use sessionlog_codec::json::{parse, stringify, Object, Value};

/// `data` at or above this many bytes is offered to zstd.
const ZSTD_THRESHOLD: usize = 4_096;
/// DSH's zstd level for `data`.
const ZSTD_LEVEL: i32 = 3;
/// `ignorable` of a packed row.
const PACKED: i64 = 0;

/// One `events` row's columns after `session_id`.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub seq: i64,
    pub ty: String,
    pub time: i64,
    /// TEXT or BLOB.
    pub data: Sql,
    pub source_event_seqs: Option<Vec<u8>>,
    pub surface_op: Option<String>,
    pub ignorable: Option<i64>,
}

/// The rows of one batch, in insert order.
pub fn encode_batch(events: &[Value]) -> anyhow::Result<Vec<Row>> {
    pack_chunk_runs(events).iter().map(encode_record).collect()
}

fn encode_record(record: &Value) -> anyhow::Result<Row> {
    let o = record
        .as_object()
        .ok_or_else(|| anyhow!("a record is not an object"))?;
    let ty = str_field(o, "type")?.to_owned();
    if is_row_tag(&ty) && o.contains_key("seq0") && !o.contains_key("seq") {
        return Ok(Row {
            seq: int_field(o, "seq0")?,
            time: int_field(o, "time0")?,
            ty,
            data: encode_data(stringify(field(o, "data")?)),
            source_event_seqs: None,
            surface_op: None,
            ignorable: Some(PACKED),
        });
    }
    let source_event_seqs = match o.get("sourceEventSeqs") {
        None => None,
        Some(v) => Some(encode_seqs(v)?),
    };
    Ok(Row {
        seq: int_field(o, "seq")?,
        time: int_field(o, "time")?,
        ty,
        data: encode_data(stringify(field(o, "data")?)),
        source_event_seqs,
        surface_op: o.get("surfaceOp").map(stringify),
        ignorable: matches!(o.get("ignorable"), Some(Value::Bool(true))).then_some(1),
    })
}

fn encode_data(text: String) -> Sql {
    if text.len() >= ZSTD_THRESHOLD {
        if let Ok(frame) = zstd::bulk::compress(text.as_bytes(), ZSTD_LEVEL) {
            if frame.len() < text.len() {
                return Sql::Blob(frame);
            }
        }
    }
    Sql::Text(text)
}

fn encode_seqs(v: &Value) -> anyhow::Result<Vec<u8>> {
    let seqs = v
        .as_array()
        .ok_or_else(|| anyhow!("sourceEventSeqs is not an array"))?;
    let mut out = Vec::with_capacity(seqs.len() * 2);
    let mut previous = 0i128;
    for (i, s) in seqs.iter().enumerate() {
        let value = s
            .as_safe_integer()
            .filter(|&s| s >= 0)
            .ok_or_else(|| anyhow!("sourceEventSeqs holds a non-seq"))?;
        let value = i128::from(value);
        let encoded = if i == 0 {
            value
        } else if value >= previous {
            (value - previous) * 2
        } else {
            (previous - value) * 2 - 1
        };
        push_varint(&mut out, u64::try_from(encoded)?);
        previous = value;
    }
    Ok(out)
}

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The logical events one stored row holds (`decodeRow`): a packed row's members, or the one
/// scalar event with its envelope rebuilt in DSH's canonical key order.
pub fn decode_row(row: &Row) -> anyhow::Result<Vec<Value>> {
    let data = parse(&decode_data(&row.data)?)
        .map_err(|e| anyhow!("row {}: data is not JSON: {e}", row.seq))?;
    if row.ignorable == Some(PACKED) {
        let record = Object::new()
            .with("type", row.ty.as_str())
            .with("seq0", row.seq)
            .with("time0", row.time)
            .with("data", data);
        return decode_record(Value::Object(record)).map_err(|e| anyhow!("row {}: {e}", row.seq));
    }
    let mut event = Object::new()
        .with("type", row.ty.as_str())
        .with("seq", row.seq)
        .with("time", row.time)
        .with("data", data);
    if let Some(bytes) = &row.source_event_seqs {
        let seqs = decode_seqs(bytes).with_context(|| format!("row {}", row.seq))?;
        event = event.with(
            "sourceEventSeqs",
            Value::Array(seqs.into_iter().map(Value::from).collect()),
        );
    }
    if let Some(op) = &row.surface_op {
        let op = parse(op).map_err(|e| anyhow!("row {}: surface_op: {e}", row.seq))?;
        event = event.with("surfaceOp", op);
    }
    if row.ignorable == Some(1) {
        event = event.with("ignorable", true);
    }
    Ok(vec![Value::Object(event)])
}

fn decode_data(data: &Sql) -> anyhow::Result<String> {
    match data {
        Sql::Text(t) => Ok(t.clone()),
        Sql::Blob(b) => Ok(String::from_utf8(zstd::stream::decode_all(&b[..])?)?),
        other => bail!("data column holds {other:?}"),
    }
}

fn decode_seqs(bytes: &[u8]) -> anyhow::Result<Vec<i64>> {
    let mut out = Vec::new();
    let (mut i, mut previous) = (0, 0i64);
    while i < bytes.len() {
        let (mut v, mut shift) = (0u64, 0u32);
        loop {
            let b = *bytes
                .get(i)
                .ok_or_else(|| anyhow!("truncated source_event_seqs varint"))?;
            i += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 56 {
                bail!("source_event_seqs varint out of range");
            }
        }
        let v = i64::try_from(v)?;
        let value = if out.is_empty() {
            v
        } else if v % 2 == 0 {
            previous + v / 2
        } else {
            previous - (v + 1) / 2
        };
        out.push(value);
        previous = value;
    }
    Ok(out)
}

fn field<'a>(o: &'a Object, key: &str) -> anyhow::Result<&'a Value> {
    o.get(key).ok_or_else(|| anyhow!("record has no {key}"))
}

fn str_field<'a>(o: &'a Object, key: &str) -> anyhow::Result<&'a str> {
    field(o, key)?
        .as_str()
        .ok_or_else(|| anyhow!("record {key} is not a string"))
}

fn int_field(o: &Object, key: &str) -> anyhow::Result<i64> {
    field(o, key)?
        .as_safe_integer()
        .ok_or_else(|| anyhow!("record {key} is not a safe integer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seqs_varints_round_trip() {
        let v = Value::Array([5i64, 7, 3, 3, 300, 0].map(Value::from).to_vec());
        let bytes = encode_seqs(&v).expect("encodes");
        // 5; +2 -> 4; -4 -> 7; 0 -> 0; +297 -> 594 = [0xd2, 0x04]; -300 -> 599 = [0xd7, 0x04].
        assert_eq!(bytes, [5, 4, 7, 0, 0xd2, 0x04, 0xd7, 0x04]);
        assert_eq!(decode_seqs(&bytes).expect("decodes"), [5, 7, 3, 3, 300, 0]);
    }

    #[test]
    fn large_data_is_compressed_small_is_text() {
        assert_eq!(encode_data("x".repeat(10)), Sql::Text("x".repeat(10)));
        let big = "ab".repeat(4_000);
        let Sql::Blob(frame) = encode_data(big.clone()) else {
            panic!("8,000 repetitive bytes compress");
        };
        assert_eq!(decode_data(&Sql::Blob(frame)).expect("decodes"), big);
    }
}
