//! DSH's JSONL backend as a hosting peer (persistence-spec §6.1).
//!
//! Layout: `<root>/<session id>/session.jsonl` (DSH nests session directories under a project
//! directory; one project is modelled). Per session, as DSH does:
//! - **materialize** (with the first batch): `mkdir` the session directory and fsync `<root>`;
//!   write header line + first batch to a fresh temp file and fsync it; `link` it to
//!   `session.jsonl`; fsync the session directory; remove the temp file (unsynced). DSH also
//!   fsyncs the root's and project's parents on every materialization; those two are left out
//!   (in the peer's favour).
//! - **append**: open for append, note the size, write the batch text, `fdatasync`, close; on a
//!   failed write or sync, truncate back to the noted size. DSH calls `fsync` (`FileHandle.sync`);
//!   for an append both must commit the new size, so `fdatasync` costs the same or less.
//!
//! Batches are written one by one, each synced before the next: one DSH process cannot share a
//! sync between sessions' files. Each batch is serialized by the peer, as DSH's backend
//! serializes the events its coordinator hands it (V0: `packChunkRuns`, then `JSON.stringify`
//! per record; V4: one row per event), through the same JS-exact writer the store authors its
//! lines with (`sessionlog_codec::format::lines`), so both spend the same work turning events into text;
//! and it serializes the fresh copy of the events every system gets ([`Item::built`]).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};

use sessionlog_codec::format::lines::author_lines;

use super::super::{Durability, Host, Item, PendingSessions, SessionStart};
use crate::gen::LogFormat;

/// File name of a session log inside its directory.
const LOG_NAME: &str = "session.jsonl";
/// Temp name used while materializing.
const TMP_NAME: &str = "session.jsonl.tmp";

/// DSH's JSONL backend over a root directory.
#[derive(Debug)]
pub struct JsonlPeer {
    root: PathBuf,
    durability: Durability,
    /// The format version whose lines the sessions hold (0 or 4).
    version: u32,
    /// Header lines of created sessions not yet materialized, by id.
    pending: PendingSessions<String>,
}

impl JsonlPeer {
    /// A peer writing sessions of `format` under `root` (created if missing).
    pub fn open(root: &Path, durability: Durability, format: LogFormat) -> anyhow::Result<Self> {
        fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
        Ok(JsonlPeer {
            root: root.to_owned(),
            durability,
            version: format.version(),
            pending: PendingSessions::new(),
        })
    }

    /// Where session `id`'s log lives.
    pub fn log_path(&self, id: &str) -> PathBuf {
        self.root.join(id).join(LOG_NAME)
    }

    fn sync(&self, file: &File) -> std::io::Result<()> {
        match self.durability {
            Durability::Sync => file.sync_data(),
            Durability::Buffered => Ok(()),
        }
    }

    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        match self.durability {
            Durability::Sync => File::open(dir)?.sync_all(),
            Durability::Buffered => Ok(()),
        }
    }

    /// Publish a new session file holding the header and its first batch.
    fn materialize(&self, id: &str, header_line: &str, text: &str) -> anyhow::Result<()> {
        let dir = self.root.join(id);
        fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        self.sync_dir(&self.root)?;
        let tmp = dir.join(TMP_NAME);
        let mut bytes = String::with_capacity(header_line.len() + 1 + text.len());
        bytes.push_str(header_line);
        bytes.push('\n');
        bytes.push_str(text);
        {
            let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            file.write_all(bytes.as_bytes())?;
            self.sync(&file)?;
        }
        fs::hard_link(&tmp, dir.join(LOG_NAME))?;
        self.sync_dir(&dir)?;
        // Best effort, unsynced, as DSH does.
        let _ = fs::remove_file(&tmp);
        Ok(())
    }

    /// Append one batch to an existing session file.
    fn append_one(&self, id: &str, text: &str) -> anyhow::Result<()> {
        let path = self.log_path(id);
        let mut file = OpenOptions::new().append(true).open(&path)?;
        let prior = file.metadata()?.len();
        if let Err(e) = file
            .write_all(text.as_bytes())
            .and_then(|()| self.sync(&file))
        {
            // Roll back the partial append, as DSH does, and report the write error.
            let rollback = file.set_len(prior).and_then(|()| file.sync_all());
            return Err(match rollback {
                Ok(()) => anyhow!(e),
                Err(r) => anyhow!(e).context(format!("rolling back also failed: {r}")),
            });
        }
        Ok(())
    }
}

impl Host for JsonlPeer {
    fn name(&self) -> &'static str {
        "jsonl"
    }

    fn create(&self, start: &SessionStart<'_>) -> anyhow::Result<()> {
        self.pending.hold(start.id, start.header_line.to_owned())
    }

    fn append(&self, items: Vec<Item<'_>>, acked: &mut dyn FnMut(usize)) -> anyhow::Result<()> {
        for (i, item) in items.iter().enumerate() {
            let header = self.pending.take_first(item)?;
            let mut text = String::with_capacity(item.batch.text.len());
            author_lines(self.version, &item.events, &mut text, &mut Vec::new());
            match header {
                Some(header) => self.materialize(item.id, &header, &text),
                None => self.append_one(item.id, &text),
            }
            .with_context(|| format!("session {}", item.id))?;
            acked(i);
        }
        Ok(())
    }
}
