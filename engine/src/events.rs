//! Logical events: the committed region decoded line by line (packed rows expanded).

use sessionlog_codec::chunk_rows::decode_record;
use sessionlog_codec::json::{self, Value};
use sessionlog_codec::stored::decode_line;

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
        it.seek_for_prev(keys::event_key(meta.number, keys::LINE, seq));
        let (Some(k), Some(v)) = (it.key(), it.value()) else {
            return Ok(None);
        };
        let Some((_, keys::LINE, first)) = keys::parse_event_key(k) else {
            return Ok(None);
        };
        let line =
            decode_line(v).map_err(|e| corrupt(meta, format!("line at seq {first}: {e}")))?;
        let value = json::parse(&String::from_utf8_lossy(line.bytes))?;
        let members =
            decode_record(value).map_err(|e| corrupt(meta, format!("line at seq {first}: {e}")))?;
        Ok(usize::try_from(seq - first)
            .ok()
            .and_then(|i| members.into_iter().nth(i)))
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
        // The line holding `from` is the last line whose first seq is ≤ from.
        it.seek_for_prev(keys::event_key(meta.number, keys::LINE, from));
        if !it.valid() {
            it.seek(keys::session_start(meta.number));
        }
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            let Some((_, keys::LINE, first)) = keys::parse_event_key(k) else {
                break;
            };
            if first >= end {
                break;
            }
            let line =
                decode_line(v).map_err(|e| corrupt(&meta, format!("line at seq {first}: {e}")))?;
            let value = json::parse(&String::from_utf8_lossy(line.bytes))?;
            let members = decode_record(value)
                .map_err(|e| corrupt(&meta, format!("line at seq {first}: {e}")))?;
            for (k, event) in members.iter().enumerate() {
                let seq = first + k as u64;
                if seq >= from && seq < end {
                    each(seq, event)?;
                }
            }
            it.next();
        }
        it.status()
            .map_err(Error::storage(format!("reading session \"{id}\"")))?;
        Ok(())
    }
}
