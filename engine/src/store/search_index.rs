//! The session index's files: a tantivy index in the store directory's `search/` folder, with
//! one document per session (its row and the fields the filters read) and one per message that
//! has text (the full-text field), and the watermark of the change log it is caught up to.
//!
//! The index is derived, never a second truth: the log is the truth, and the index follows its
//! change log (`ops/search/`). The watermark is the commit payload of the tantivy commit that
//! holds the documents it covers, so the two are one atomic write: after a crash the index is
//! what its last commit holds, at that commit's watermark, and catching up from there
//! re-derives every session changed since (derivation is idempotent).
//!
//! Invariant: a session's documents all carry its id in `id`, so one term deletes them; its one
//! session document alone carries the id in `row`.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions, STORED,
    STRING,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument};

use crate::error::{Error, Result};

/// The index's folder inside the store directory.
pub(crate) const SEARCH_DIR: &str = "search";

/// The index's layout version: an index written with another is rebuilt, not read.
pub(crate) const INDEX_VERSION: u32 = 1;

/// The writer's memory budget: tantivy flushes a segment when it is used.
const WRITER_BYTES: usize = 32 << 20;

/// Every field of the index's schema.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fields {
    /// `session` or `message`.
    pub(crate) kind: Field,
    /// The session's id, on every document of the session.
    pub(crate) id: Field,
    /// The session's id, on its session document only.
    pub(crate) row: Field,
    /// The session's number (creation order): the results' order and the page cursor.
    pub(crate) number: Field,
    /// A message document's seq.
    pub(crate) seq: Field,
    /// A message document's text.
    pub(crate) text: Field,
    /// The session document's row and fold state, as JSON.
    pub(crate) record: Field,
    pub(crate) verdict: Field,
    pub(crate) model: Field,
    pub(crate) tool: Field,
    pub(crate) tool_error: Field,
    pub(crate) any_tool_error: Field,
    pub(crate) open: Field,
    pub(crate) parent: Field,
    pub(crate) created_at: Field,
    pub(crate) last_event_at: Field,
    pub(crate) tokens: Field,
}

impl Fields {
    fn schema() -> (Schema, Fields) {
        let mut b = Schema::builder();
        let number = NumericOptions::default()
            .set_indexed()
            .set_fast()
            .set_stored();
        let filter_u64 = NumericOptions::default().set_indexed().set_fast();
        let text = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("default")
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        );
        let fields = Fields {
            kind: b.add_text_field("kind", STRING),
            id: b.add_text_field("id", STRING),
            row: b.add_text_field("row", STRING),
            number: b.add_u64_field("number", number),
            seq: b.add_u64_field("seq", filter_u64.clone()),
            text: b.add_text_field("text", text),
            record: b.add_text_field("record", STORED),
            verdict: b.add_text_field("verdict", STRING),
            model: b.add_text_field("model", STRING),
            tool: b.add_text_field("tool", STRING),
            tool_error: b.add_text_field("tool_error", STRING),
            any_tool_error: b.add_u64_field("any_tool_error", filter_u64.clone()),
            open: b.add_u64_field("open", filter_u64.clone()),
            parent: b.add_text_field("parent", STRING),
            created_at: b.add_i64_field("created_at", filter_u64.clone()),
            last_event_at: b.add_i64_field("last_event_at", filter_u64.clone()),
            tokens: b.add_u64_field("tokens", filter_u64),
        };
        (b.build(), fields)
    }
}

/// What a commit of the index records beside its documents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Watermark {
    /// [`INDEX_VERSION`] of the index that wrote it.
    pub(crate) version: u32,
    /// The identity of the store it follows.
    pub(crate) store: String,
    /// The change-log position of the first change the index does not cover.
    pub(crate) position: u64,
}

/// The open index: its reader, and its writer unless the store is read-only.
pub(crate) struct SearchIndex {
    pub(crate) index: Index,
    pub(crate) fields: Fields,
    pub(crate) reader: IndexReader,
    /// `None` for a store opened beside another process (it reads what that one indexed).
    pub(crate) writer: Option<IndexWriter<TantivyDocument>>,
    pub(crate) path: PathBuf,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// A tantivy error as the store's error, saying what the index was doing.
pub(crate) fn index_error(doing: &str) -> impl FnOnce(tantivy::TantivyError) -> Error + '_ {
    move |e| Error::SearchIndex {
        detail: format!("{doing}: {e}"),
    }
}

impl SearchIndex {
    /// Open the index in `store_dir`, creating an empty one (no watermark) when there is none or
    /// the one there has another schema. `writable`: take the writer (one process at a time).
    pub(crate) fn open(store_dir: &Path, writable: bool) -> Result<SearchIndex> {
        let path = store_dir.join(SEARCH_DIR);
        let (schema, fields) = Fields::schema();
        let existing = match Index::open_in_dir(&path) {
            Ok(index) if index.schema() == schema => Some(index),
            _ => None,
        };
        let index = match existing {
            Some(index) => index,
            None if !writable => {
                return Err(Error::SearchIndex {
                    detail: format!(
                        "{} holds no session index; open the store for writing to build it",
                        path.display()
                    ),
                })
            }
            None => {
                if path.exists() {
                    std::fs::remove_dir_all(&path).map_err(|source| Error::Io {
                        path: path.clone(),
                        source,
                    })?;
                }
                std::fs::create_dir_all(&path).map_err(|source| Error::Io {
                    path: path.clone(),
                    source,
                })?;
                Index::create_in_dir(&path, schema).map_err(index_error("creating the index"))?
            }
        };
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(index_error("opening the index reader"))?;
        let writer = match writable {
            true => Some(
                index
                    .writer_with_num_threads(1, WRITER_BYTES)
                    .map_err(index_error("opening the index writer"))?,
            ),
            false => None,
        };
        Ok(SearchIndex {
            index,
            fields,
            reader,
            writer,
            path,
        })
    }

    /// The watermark of the last commit, or `None` when nothing was committed with one.
    pub(crate) fn watermark(&self) -> Result<Option<Watermark>> {
        let metas = self
            .index
            .load_metas()
            .map_err(index_error("reading the index's commit"))?;
        Ok(metas
            .payload
            .and_then(|p| serde_json::from_str::<Watermark>(&p).ok())
            .filter(|w| w.version == INDEX_VERSION))
    }

    /// The index's size on disk.
    pub(crate) fn bytes(&self) -> u64 {
        std::fs::read_dir(&self.path).map_or(0, |entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
    }
}

/// The store's slot for its index, opened on first use.
#[derive(Default)]
pub(crate) struct SearchSlot(Mutex<Option<SearchIndex>>);

impl SearchSlot {
    /// The slot, locked: one catch-up or query at a time (the index is behind the lock's
    /// holder only while it catches up; queries are short).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<SearchIndex>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
