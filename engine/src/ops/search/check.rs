//! `verify`'s check of the session index, when the store has one: caught up with the log, the
//! index holds exactly one session document per searched session, whose row equals the row
//! derived afresh from the whole log, and message documents at exactly the seqs of the
//! session's messages with text; and nothing of any other session.

use std::collections::{BTreeMap, BTreeSet};

use tantivy::collector::Collector;
use tantivy::query::{BooleanQuery, Occur, TermQuery};
use tantivy::schema::{IndexRecordOption, Value as _};
use tantivy::{DocAddress, TantivyDocument, Term};

use super::derive::{Fold, Record};
use crate::error::{Error, Result};
use crate::ops::verify::{VerifyProblem, VerifyReport};
use crate::store::search_index::{index_error, SearchIndex, SEARCH_DIR};
use crate::store::Store;

/// The name problems of the index itself are reported under.
const INDEX: &str = "(session index)";

/// The addresses of every document a query matches: (segment, doc).
struct Docs;

impl Collector for Docs {
    type Fruit = Vec<(u32, u32)>;
    type Child = DocsSegment;

    fn for_segment(
        &self,
        ordinal: tantivy::SegmentOrdinal,
        _: &tantivy::SegmentReader,
    ) -> tantivy::Result<DocsSegment> {
        Ok(DocsSegment {
            ordinal,
            out: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        false
    }

    fn merge_fruits(&self, fruits: Vec<Self::Fruit>) -> tantivy::Result<Self::Fruit> {
        Ok(fruits.into_iter().flatten().collect())
    }
}

struct DocsSegment {
    ordinal: u32,
    out: Vec<(u32, u32)>,
}

impl tantivy::collector::SegmentCollector for DocsSegment {
    type Fruit = Vec<(u32, u32)>;

    fn collect(&mut self, doc: tantivy::DocId, _: tantivy::Score) {
        self.out.push((self.ordinal, doc));
    }

    fn harvest(self) -> Self::Fruit {
        self.out
    }
}

impl Store {
    /// Check the session index against the log (see the module docs), if the store has one.
    pub(crate) fn verify_search_index(&self, report: &mut VerifyReport) -> Result<()> {
        if !self.path().join(SEARCH_DIR).exists() {
            return Ok(());
        }
        let problem = |session: &str, detail: String| VerifyProblem {
            session: session.to_owned(),
            detail,
        };
        let mut slot = self.search.lock();
        if slot.is_none() {
            match SearchIndex::open(self.path(), !self.is_secondary()) {
                Ok(ix) => *slot = Some(ix),
                Err(e) => {
                    report.problems.push(problem(INDEX, format!("{e}")));
                    return Ok(());
                }
            }
        }
        let Some(ix) = slot.as_mut() else {
            return Ok(());
        };
        if let Err(e) = self.catch_up_index(ix) {
            report.problems.push(problem(
                INDEX,
                format!("it cannot be caught up with the log: {e}"),
            ));
            return Ok(());
        }
        let (rows, messages) = indexed(ix)?;
        let mut expected = BTreeSet::new();
        self.for_each_meta(&mut |m| {
            if m.deleted_at_ms.is_none() && m.archived.is_none() {
                expected.insert(m.id_lossy());
            }
            Ok(())
        })?;
        for id in rows.keys().chain(messages.keys()) {
            if !expected.contains(id) {
                report.problems.push(problem(
                    id,
                    "the session index holds documents of a session that is not searched (deleted, archived or not stored)".into(),
                ));
            }
        }
        for id in &expected {
            let meta = self.require_record(id.as_bytes())?;
            let mut fold = Fold {
                number: meta.number,
                ..Fold::default()
            };
            let mut seqs = BTreeSet::new();
            self.events_of(&meta, 0, None, &mut |seq, event| {
                if fold.apply(seq, event).is_some() {
                    seqs.insert(seq);
                }
                Ok(())
            })?;
            let row = self.search_row(&meta, &fold)?;
            match rows.get(id.as_str()) {
                None => report
                    .problems
                    .push(problem(id, "the session index has no row for it".into())),
                Some(list) if list.len() > 1 => report.problems.push(problem(
                    id,
                    format!("the session index holds {} rows for it", list.len()),
                )),
                Some(list) => {
                    let got = list.first().map(|r| &r.row);
                    if got != Some(&row) {
                        report.problems.push(problem(
                            id,
                            format!(
                                "its row in the session index differs from its log: indexed {}, derived {}",
                                serde_json::to_string(&got).unwrap_or_default(),
                                serde_json::to_string(&row).unwrap_or_default()
                            ),
                        ));
                    }
                }
            }
            let indexed: BTreeSet<u64> = messages
                .get(id.as_str())
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default();
            let count = messages.get(id.as_str()).map_or(0, Vec::len);
            if indexed != seqs || count != seqs.len() {
                report.problems.push(problem(
                    id,
                    format!(
                        "the session index holds {count} message documents at {} seqs; its log has {} messages with text",
                        indexed.len(),
                        seqs.len()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Session id → its rows; session id → its message documents' seqs.
type Indexed = (BTreeMap<String, Vec<Record>>, BTreeMap<String, Vec<u64>>);

fn indexed(ix: &SearchIndex) -> Result<Indexed> {
    let searcher = ix.reader.searcher();
    let f = ix.fields;
    let all = |kind: &str| -> Result<Vec<(u32, u32)>> {
        let q = BooleanQuery::new(vec![(
            Occur::Must,
            Box::new(TermQuery::new(
                Term::from_field_text(f.kind, kind),
                IndexRecordOption::Basic,
            )) as Box<dyn tantivy::query::Query>,
        )]);
        searcher
            .search(&q, &Docs)
            .map_err(index_error("reading every document"))
    };
    let mut rows: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    for (segment, doc) in all("session")? {
        let d: TantivyDocument = searcher
            .doc(DocAddress::new(segment, doc))
            .map_err(index_error("reading a session document"))?;
        let record: Record = d
            .get_first(f.record)
            .and_then(|v| v.as_str())
            .and_then(|s| serde_json::from_str(s).ok())
            .ok_or_else(|| Error::SearchIndex {
                detail: "a session document holds no record".into(),
            })?;
        rows.entry(record.row.id.clone()).or_default().push(record);
    }
    let by_number: BTreeMap<u64, String> = rows
        .iter()
        .flat_map(|(id, list)| list.iter().map(move |r| (r.fold.number, id.clone())))
        .collect();
    let mut messages: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (segment, doc) in all("message")? {
        let reader = searcher.segment_reader(segment);
        let numbers = reader
            .fast_fields()
            .u64("number")
            .map_err(index_error("reading message numbers"))?;
        let seqs = reader
            .fast_fields()
            .u64("seq")
            .map_err(index_error("reading message seqs"))?;
        let (Some(number), Some(seq)) = (numbers.first(doc), seqs.first(doc)) else {
            continue;
        };
        let id = by_number
            .get(&number)
            .cloned()
            .unwrap_or_else(|| format!("#{number}"));
        messages.entry(id).or_default().push(seq);
    }
    Ok((rows, messages))
}
