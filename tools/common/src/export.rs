//! Exporting many sessions into one stream, one worker per core: each worker exports whole
//! sessions into memory, and the calling thread writes them out in the given order, so the
//! output is byte for byte what exporting them one after another writes.

use std::io::Write;

use sessionlog_engine::{Error, ExportFormat, Result, Store};

/// Sessions larger than this are not buffered: the writing thread exports them itself, in
/// place, so memory stays bounded by a few sessions of ordinary size per worker.
const BUFFERED_SESSION_BYTES: u64 = 16 << 20;
/// Exported sessions each worker may hold ahead of the writer.
const SESSIONS_AHEAD: usize = 8;

/// One session's part of the stream.
enum Exported<'a> {
    /// Its id and bytes, exported by a worker.
    Buffered(&'a str, Vec<u8>),
    /// A session too large to buffer: the writer exports it.
    InPlace(&'a str),
}

/// Write sessions `ids`, in that order, to `out` in `format` (default: each one's source
/// encoding), as [`Store::export`] writes each; returns the bytes written. Each session is read
/// at its own snapshot, as `Store::export` reads it. The first failure ends the stream.
pub fn export_stream<'a>(
    store: &Store,
    ids: &'a [String],
    format: Option<ExportFormat>,
    out: &mut dyn Write,
) -> Result<u64> {
    let mut written = 0;
    crate::par::map_ordered(
        ids,
        SESSIONS_AHEAD,
        |id: &'a String| -> Result<Exported<'a>> {
            if store.summary(id)?.bytes > BUFFERED_SESSION_BYTES {
                return Ok(Exported::InPlace(id));
            }
            let mut bytes = Vec::new();
            store.export(id, format, &mut bytes)?;
            Ok(Exported::Buffered(id, bytes))
        },
        |exported| -> Result<()> {
            match exported? {
                Exported::Buffered(id, bytes) => {
                    out.write_all(&bytes).map_err(|source| Error::Io {
                        path: format!("export of session \"{id}\"").into(),
                        source,
                    })?;
                    written += bytes.len() as u64;
                }
                Exported::InPlace(id) => written += store.export(id, format, out)?,
            }
            Ok(())
        },
    )?;
    Ok(written)
}
