//! Keeping the session index caught up with the log: it follows the store's change log
//! (`layout/changes.rs`, the store-wide feed's source) from its watermark, re-derives each
//! session a change named, and commits the documents with the new watermark in one tantivy
//! commit. Or it rebuilds from every stored session ([`Store::reindex`]).
//!
//! An append is indexed from its own events (the session's fold is read back from its
//! document); any other change (import, fork, migration, repair, restore, undelete, a session
//! made again under a purged id) re-derives the session whole; a delete, purge or archive
//! removes its documents. Derivation is idempotent, so a change seen twice (a rebuild that ran
//! while sessions were appended, a crash after the documents and before the watermark could
//! not happen, as they commit together) changes nothing.
//!
//! Invariant: the watermark's position is never past a change whose session is not derived
//! from a read made after that change committed. A watermark behind the change log's retained
//! start (changes trimmed before the index read them) rebuilds the index.

use std::collections::BTreeMap;

use tantivy::query::TermQuery;
use tantivy::schema::{IndexRecordOption, Value as _};
use tantivy::{collector::TopDocs, doc, TantivyDocument, Term};

use super::derive::{verdict_kind, Fold, Folding, Record};
use crate::error::{Error, Result};
use crate::layout::changes::ChangeKind;
use crate::layout::meta::SessionMeta;
use crate::store::search_index::{index_error, SearchIndex, Watermark, INDEX_VERSION};
use crate::store::Store;

/// How many change records a catch-up reads at once.
const CHANGES_READ: usize = 4096;

/// How a session named by changes is brought up to date.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Redo {
    /// Only appends: fold the events after the indexed ones.
    Appends,
    /// Derive it again from its whole log.
    Whole,
}

/// A session document's record, read back from the index.
fn stored_record(ix: &SearchIndex, id: &str) -> Result<Option<Record>> {
    let searcher = ix.reader.searcher();
    let query = TermQuery::new(
        Term::from_field_text(ix.fields.row, id),
        IndexRecordOption::Basic,
    );
    let top = searcher
        .search(&query, &TopDocs::with_limit(1).order_by_score())
        .map_err(index_error("reading a session's document"))?;
    let Some((_, address)) = top.first() else {
        return Ok(None);
    };
    let doc: TantivyDocument = searcher
        .doc(*address)
        .map_err(index_error("reading a session's document"))?;
    Ok(doc
        .get_first(ix.fields.record)
        .and_then(|v| v.as_str())
        .and_then(|s| serde_json::from_str(s).ok()))
}

impl Store {
    /// Whether session `meta` is searched: stored here, not deleted, not archived.
    fn searched(meta: &SessionMeta) -> bool {
        meta.deleted_at_ms.is_none() && meta.archived.is_none()
    }

    /// Bring the index up to the change log's end; returns the watermark it is at. A store
    /// opened beside another process only reads the index that one keeps.
    pub(crate) fn catch_up_index(&self, ix: &mut SearchIndex) -> Result<Watermark> {
        let store = self.identity()?;
        if ix.writer.is_none() {
            // Another process keeps the index: read its last commit.
            ix.reader
                .reload()
                .map_err(index_error("reloading the index"))?;
        }
        let mark = ix.watermark()?.filter(|w| w.store == store);
        if ix.writer.is_none() {
            return mark.ok_or_else(|| Error::SearchIndex {
                detail:
                    "the index holds no watermark of this store; open it for writing to build it"
                        .into(),
            });
        }
        let Some(mark) = mark else {
            return self.rebuild_index(ix);
        };
        let mut position = mark.position;
        let mut sessions: BTreeMap<Vec<u8>, Redo> = BTreeMap::new();
        loop {
            let changes = self.read_changes(position, CHANGES_READ)?;
            let Some((last, _)) = changes.last() else {
                break;
            };
            position = last + 1;
            for (_, change) in changes {
                let redo = match change.kind {
                    ChangeKind::Appended => Redo::Appends,
                    _ => Redo::Whole,
                };
                let entry = sessions.entry(change.session).or_insert(redo);
                if redo == Redo::Whole {
                    *entry = Redo::Whole;
                }
            }
        }
        // The log trims its oldest changes; the retained start only rises, so a start at or
        // before the watermark after every read means no change the index needed went unread.
        if self.retained_start()? > mark.position {
            return self.rebuild_index(ix);
        }
        if sessions.is_empty() {
            return Ok(mark);
        }
        for (id, redo) in sessions {
            self.index_session(ix, &id, redo)?;
        }
        self.commit_index(ix, position)
    }

    /// Rebuild the index from every stored session; its watermark is the change log's end as
    /// it was before the sessions were read, so a catch-up re-derives whatever changed meanwhile.
    pub(crate) fn rebuild_index(&self, ix: &mut SearchIndex) -> Result<Watermark> {
        let position = self.feed_end();
        let writer = ix.writer.as_ref().ok_or_else(read_only)?;
        writer
            .delete_all_documents()
            .map_err(index_error("clearing the index"))?;
        let mut ids = Vec::new();
        self.for_each_meta(&mut |m| {
            ids.push(m.id.clone());
            Ok(())
        })?;
        for id in ids {
            self.index_session(ix, &id, Redo::Whole)?;
        }
        self.commit_index(ix, position)
    }

    /// Commit what was staged with the watermark `position`, and read from it on.
    fn commit_index(&self, ix: &mut SearchIndex, position: u64) -> Result<Watermark> {
        let mark = Watermark {
            version: INDEX_VERSION,
            store: self.identity()?,
            position,
        };
        let payload = serde_json::to_string(&mark).map_err(|e| Error::SearchIndex {
            detail: format!("writing the watermark: {e}"),
        })?;
        let writer = ix.writer.as_mut().ok_or_else(read_only)?;
        let mut prepared = writer
            .prepare_commit()
            .map_err(index_error("committing the index"))?;
        prepared.set_payload(&payload);
        prepared
            .commit()
            .map_err(index_error("committing the index"))?;
        ix.reader
            .reload()
            .map_err(index_error("reloading the index"))?;
        Ok(mark)
    }

    /// Stage session `id`'s documents as its log now is.
    fn index_session(&self, ix: &mut SearchIndex, id: &[u8], redo: Redo) -> Result<()> {
        let f = ix.fields;
        let text_id = String::from_utf8_lossy(id).into_owned();
        let meta = self.meta(id)?.filter(Self::searched);
        let prior = match (&meta, redo) {
            (Some(meta), Redo::Appends) => stored_record(ix, &text_id)?
                .map(|r| r.fold)
                .filter(|fold| fold.number == meta.number && fold.indexed <= meta.events),
            _ => None,
        };
        let writer = ix.writer.as_ref().ok_or_else(read_only)?;
        let Some(meta) = meta else {
            writer.delete_term(Term::from_field_text(f.id, &text_id));
            return Ok(());
        };
        let mut fold = match prior {
            Some(fold) => {
                writer.delete_term(Term::from_field_text(f.row, &text_id));
                fold
            }
            None => {
                writer.delete_term(Term::from_field_text(f.id, &text_id));
                Fold {
                    number: meta.number,
                    ..Fold::default()
                }
            }
        };
        let mut folding = Folding {
            fold: &mut fold,
            version: meta.version,
            messages: Vec::new(),
        };
        if folding.fold.indexed < meta.events {
            let from = folding.fold.indexed;
            match self.lines_or_events(&meta, from, None, &mut folding) {
                Ok(()) => {}
                // A parent purged under a fork, an archived ancestor: index what was read.
                Err(Error::UnknownSession { .. } | Error::Archived { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        for (seq, text) in folding.messages {
            writer
                .add_document(doc!(
                    f.kind => "message",
                    f.id => text_id.as_str(),
                    f.number => meta.number,
                    f.seq => seq,
                    f.text => text,
                ))
                .map_err(index_error("adding a message"))?;
        }
        let row = self.search_row(&meta, &fold)?;
        let mut d = doc!(
            f.kind => "session",
            f.id => text_id.as_str(),
            f.row => text_id.as_str(),
            f.number => meta.number,
            f.verdict => verdict_kind(&row.verdict),
            f.any_tool_error => u64::from(!row.tool_errors.is_empty()),
            f.open => u64::from(row.open),
            f.created_at => row.created_at.unwrap_or(i64::MIN),
            f.last_event_at => row.last_event_at.or(row.created_at).unwrap_or(i64::MIN),
            f.tokens => row.tokens.total,
        );
        for m in &row.models {
            d.add_text(f.model, m);
        }
        for t in &row.tools {
            d.add_text(f.tool, t);
        }
        for t in &row.tool_errors {
            d.add_text(f.tool_error, t);
        }
        if let Some(p) = &row.parent {
            d.add_text(f.parent, p);
        }
        let record =
            serde_json::to_string(&Record { row, fold }).map_err(|e| Error::SearchIndex {
                detail: format!("writing session \"{text_id}\"'s record: {e}"),
            })?;
        d.add_text(f.record, record);
        writer
            .add_document(d)
            .map_err(index_error("adding a session"))?;
        Ok(())
    }
}

fn read_only() -> Error {
    Error::SearchIndex {
        detail: "the index is open for reading only".into(),
    }
}
