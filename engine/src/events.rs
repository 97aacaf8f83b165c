//! Logical events: the committed region decoded line by line (packed rows expanded).

use sessionlog_codec::chunk_rows::decode_record;
use sessionlog_codec::json::{self, Value};
use sessionlog_codec::stored::decode_block;

use crate::export::corrupt;
use crate::keys;
use crate::meta::SessionMeta;
use crate::store::Store;
use crate::{Error, Result};

impl Store {
    /// The logical event at `seq` of a session, if the committed region holds it.
    pub(crate) fn event_at(&self, meta: &SessionMeta, seq: u64) -> Result<Option<Value>> {
        if seq >= meta.events {
            return Ok(None);
        }
        let mut it = self.session_iter(meta.number)?;
        it.seek_for_prev(keys::event_key(meta.number, keys::BLOCK, seq));
        let (Some(k), Some(v)) = (it.key(), it.value()) else {
            return Ok(None);
        };
        let Some((_, keys::BLOCK, first)) = keys::parse_event_key(k) else {
            return Ok(None);
        };
        let block =
            decode_block(v).map_err(|e| corrupt(meta, format!("block at seq {first}: {e}")))?;
        let mut line_seq = first;
        for (line, members) in block.lines() {
            let end = line_seq + u64::from(members);
            if seq < end {
                let value = json::parse(&String::from_utf8_lossy(line))?;
                let events = decode_record(value)
                    .map_err(|e| corrupt(meta, format!("line at seq {line_seq}: {e}")))?;
                return Ok(usize::try_from(seq - line_seq)
                    .ok()
                    .and_then(|i| events.into_iter().nth(i)));
            }
            line_seq = end;
        }
        Ok(None)
    }

    /// Call `each` with every logical event of `id` whose seq is in `from..=to` (in order).
    /// Events are served for any stored session: the committed region is DSH's valid prefix.
    pub fn events(
        &self,
        id: &str,
        from: u64,
        to: Option<u64>,
        each: &mut dyn FnMut(u64, &Value) -> Result<()>,
    ) -> Result<()> {
        let meta = self.require_meta(id.as_bytes())?;
        let end = to.map_or(meta.events, |t| t.saturating_add(1).min(meta.events));
        if from >= end {
            return Ok(());
        }
        let mut it = self.session_iter(meta.number)?;
        // The block holding `from` is the last block whose first seq is ≤ from.
        it.seek_for_prev(keys::event_key(meta.number, keys::BLOCK, from));
        if !it.valid() {
            it.seek(keys::session_start(meta.number));
        }
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            let Some((_, keys::BLOCK, first)) = keys::parse_event_key(k) else {
                break;
            };
            if first >= end {
                break;
            }
            let block = decode_block(v)
                .map_err(|e| corrupt(&meta, format!("block at seq {first}: {e}")))?;
            let mut line_seq = first;
            for (line, members) in block.lines() {
                let line_end = line_seq + u64::from(members);
                if line_end > from && line_seq < end {
                    let value = json::parse(&String::from_utf8_lossy(line))?;
                    let events = decode_record(value)
                        .map_err(|e| corrupt(&meta, format!("line at seq {line_seq}: {e}")))?;
                    for (k, event) in events.iter().enumerate() {
                        let seq = line_seq + k as u64;
                        if seq >= from && seq < end {
                            each(seq, event)?;
                        }
                    }
                }
                line_seq = line_end;
            }
            it.next();
        }
        it.status()
            .map_err(Error::storage(format!("reading session \"{id}\"")))?;
        Ok(())
    }
}
