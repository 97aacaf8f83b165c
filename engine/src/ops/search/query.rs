//! A search run against the index: the filters as one query over session documents, the text
//! as a query over message documents, the two joined by session number, the page cut at the
//! cursor, and snippets made from the matched events as the log holds them.
//!
//! Order and cursor: sessions come newest first by number (the order they were created in). A
//! number never changes and a new session takes a higher one, so a cursor (the last number a
//! page gave) names the same place however the store grew since: no session of a later page
//! repeats one of an earlier page, none is skipped. Text scores are reported, not ordered by
//! (appends move every score).

use std::collections::{HashMap, HashSet};
use std::ops::Bound;

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::Column;
use tantivy::query::{BooleanQuery, Occur, Query, QueryParser, RangeQuery, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Value as _};
use tantivy::snippet::SnippetGenerator;
use tantivy::{DocAddress, DocId, Score, SegmentOrdinal, SegmentReader, TantivyDocument, Term};

use super::derive::{message_text, Record};
use super::{SearchHit, SearchMatch, SearchQuery};
use crate::error::{Error, Result};
use crate::store::search_index::{index_error, SearchIndex};
use crate::store::Store;

/// The longest text a query takes, in bytes.
pub const MAX_TEXT_BYTES: usize = 1024;

/// The verdict kinds `--verdict` takes.
const VERDICTS: [&str; 4] = ["clean", "torn", "corrupt", "unsupported"];

fn bad(reason: impl Into<String>) -> Error {
    Error::Query {
        reason: reason.into(),
    }
}

/// A page cursor as text: `n` and the last session number of the page.
pub(crate) fn cursor_text(number: u64) -> String {
    format!("n{number}")
}

fn parse_cursor(text: &str) -> Result<u64> {
    text.strip_prefix('n')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Error::Cursor {
            cursor: text.to_owned(),
            reason: "it is not a search cursor (`n` and a number, as a page's `next` gives it)"
                .into(),
        })
}

fn term(field: Field, text: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, text),
        IndexRecordOption::Basic,
    ))
}

fn flag(field: Field) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_u64(field, 1),
        IndexRecordOption::Basic,
    ))
}

/// The filters' query over session documents.
fn filter_query(ix: &SearchIndex, q: &SearchQuery, before: Option<u64>) -> Result<BooleanQuery> {
    let f = ix.fields;
    let mut must: Vec<Box<dyn Query>> = vec![term(f.kind, "session")];
    if let Some(tool) = &q.tool {
        must.push(term(
            match q.tool_error {
                true => f.tool_error,
                false => f.tool,
            },
            tool,
        ));
    } else if q.tool_error {
        must.push(flag(f.any_tool_error));
    }
    if let Some(model) = &q.model {
        must.push(term(f.model, model));
    }
    if let Some(verdict) = &q.verdict {
        if !VERDICTS.contains(&verdict.as_str()) {
            return Err(bad(format!(
                "verdict \"{verdict}\" is not one of {}",
                VERDICTS.join(", ")
            )));
        }
        must.push(term(f.verdict, verdict));
    }
    if let Some(parent) = &q.parent {
        must.push(term(f.parent, parent));
    }
    if q.open {
        must.push(flag(f.open));
    }
    if let Some(since) = q.since_ms {
        must.push(Box::new(RangeQuery::new(
            Bound::Included(Term::from_field_i64(f.last_event_at, since)),
            Bound::Unbounded,
        )));
    }
    if let Some(until) = q.until_ms {
        must.push(Box::new(RangeQuery::new(
            Bound::Unbounded,
            Bound::Included(Term::from_field_i64(f.created_at, until)),
        )));
    }
    if let (Some(since), Some(until)) = (q.since_ms, q.until_ms) {
        if since > until {
            return Err(bad(format!("--since ({since}) is after --until ({until})")));
        }
    }
    if let Some(min) = q.min_tokens {
        must.push(Box::new(RangeQuery::new(
            Bound::Included(Term::from_field_u64(f.tokens, min)),
            Bound::Unbounded,
        )));
    }
    if let Some(before) = before {
        must.push(Box::new(RangeQuery::new(
            Bound::Unbounded,
            Bound::Excluded(Term::from_field_u64(f.number, before)),
        )));
    }
    Ok(BooleanQuery::new(
        must.into_iter().map(|q| (Occur::Must, q)).collect(),
    ))
}

/// The text's query over message documents.
fn text_query(ix: &SearchIndex, text: &str) -> Result<Box<dyn Query>> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(bad(format!(
            "the text is {} bytes; at most {MAX_TEXT_BYTES} are taken",
            text.len()
        )));
    }
    if text.trim().is_empty() {
        return Err(bad(
            "the text is empty; leave it out to search by filters only",
        ));
    }
    let mut parser = QueryParser::for_index(&ix.index, vec![ix.fields.text]);
    parser.set_conjunction_by_default();
    parser
        .parse_query(text)
        .map_err(|e| bad(format!("the text \"{text}\" does not parse: {e}")))
}

/// Per session number: the best message score and the matched seqs.
type Matches = HashMap<u64, (Score, Vec<u64>)>;

/// Collects every matched message by its session number.
struct BySession;

struct BySessionSegment {
    number: Column<u64>,
    seq: Column<u64>,
    out: Matches,
}

impl Collector for BySession {
    type Fruit = Matches;
    type Child = BySessionSegment;

    fn for_segment(
        &self,
        _: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> tantivy::Result<Self::Child> {
        Ok(BySessionSegment {
            number: reader.fast_fields().u64("number")?,
            seq: reader.fast_fields().u64("seq")?,
            out: HashMap::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<Matches>) -> tantivy::Result<Matches> {
        let mut all = Matches::new();
        for fruit in fruits {
            for (number, (score, seqs)) in fruit {
                let entry = all.entry(number).or_insert((0.0, Vec::new()));
                entry.0 = entry.0.max(score);
                entry.1.extend(seqs);
            }
        }
        Ok(all)
    }
}

impl SegmentCollector for BySessionSegment {
    type Fruit = Matches;

    fn collect(&mut self, doc: DocId, score: Score) {
        let (Some(number), Some(seq)) = (self.number.first(doc), self.seq.first(doc)) else {
            return;
        };
        let entry = self.out.entry(number).or_insert((0.0, Vec::new()));
        entry.0 = entry.0.max(score);
        entry.1.push(seq);
    }

    fn harvest(self) -> Matches {
        self.out
    }
}

/// Collects the session documents a query matches, by number.
struct Sessions;

struct SessionsSegment {
    ordinal: SegmentOrdinal,
    number: Column<u64>,
    out: Vec<(u64, DocAddress)>,
}

impl Collector for Sessions {
    type Fruit = Vec<(u64, DocAddress)>;
    type Child = SessionsSegment;

    fn for_segment(
        &self,
        ordinal: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> tantivy::Result<Self::Child> {
        Ok(SessionsSegment {
            ordinal,
            number: reader.fast_fields().u64("number")?,
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

impl SegmentCollector for SessionsSegment {
    type Fruit = Vec<(u64, DocAddress)>;

    fn collect(&mut self, doc: DocId, _: Score) {
        if let Some(number) = self.number.first(doc) {
            self.out.push((number, DocAddress::new(self.ordinal, doc)));
        }
    }

    fn harvest(self) -> Self::Fruit {
        self.out
    }
}

/// One page of results and whether more follow.
pub(crate) struct Page {
    pub(crate) hits: Vec<SearchHit>,
    pub(crate) next: Option<String>,
}

impl Store {
    /// Run `q` against the index as it is now.
    pub(crate) fn run_search(&self, ix: &SearchIndex, q: &SearchQuery) -> Result<Page> {
        if q.limit == 0 {
            return Err(bad("--limit must be at least 1"));
        }
        let before = q.after.as_deref().map(parse_cursor).transpose()?;
        let filter = filter_query(ix, q, before)?;
        let text = q.text.as_deref().map(|t| text_query(ix, t)).transpose()?;
        let searcher = ix.reader.searcher();
        let mut sessions = searcher
            .search(&filter, &Sessions)
            .map_err(index_error("searching sessions"))?;
        let matches = match &text {
            Some(text) => {
                let query = BooleanQuery::new(vec![
                    (Occur::Must, term(ix.fields.kind, "message")),
                    (Occur::Must, text.box_clone()),
                ]);
                let found = searcher
                    .search(&query, &BySession)
                    .map_err(index_error("searching messages"))?;
                let numbers: HashSet<u64> = found.keys().copied().collect();
                sessions.retain(|(n, _)| numbers.contains(n));
                found
            }
            None => Matches::new(),
        };
        sessions.sort_unstable_by_key(|s| std::cmp::Reverse(s.0));
        let more = sessions.len() > q.limit;
        sessions.truncate(q.limit);
        let snippets = match &text {
            Some(text) => Some(
                SnippetGenerator::create(&searcher, text.as_ref(), ix.fields.text)
                    .map_err(index_error("making snippets"))?,
            ),
            None => None,
        };
        let mut hits = Vec::with_capacity(sessions.len());
        for (number, address) in &sessions {
            let doc: TantivyDocument = searcher
                .doc(*address)
                .map_err(index_error("reading a session"))?;
            let Some(record) = doc
                .get_first(ix.fields.record)
                .and_then(|v| v.as_str())
                .and_then(|s| serde_json::from_str::<Record>(s).ok())
            else {
                return Err(Error::SearchIndex {
                    detail: format!("session number {number}'s document holds no record"),
                });
            };
            let (score, mut seqs) = matches.get(number).cloned().unwrap_or((0.0, Vec::new()));
            seqs.sort_unstable();
            seqs.dedup();
            let match_count = seqs.len() as u64;
            seqs.truncate(q.max_matches);
            let matches = match &snippets {
                Some(generator) => self.snippets(&record.row.id, &seqs, generator)?,
                None => Vec::new(),
            };
            hits.push(SearchHit {
                row: record.row,
                score,
                matches,
                match_count,
            });
        }
        let next = match more {
            true => sessions.last().map(|(n, _)| cursor_text(*n)),
            false => None,
        };
        Ok(Page { hits, next })
    }

    /// A snippet of each matched message of session `id`, from its events as stored, read in
    /// one pass over the session's blocks (each block read and verified once).
    fn snippets(
        &self,
        id: &str,
        seqs: &[u64],
        generator: &SnippetGenerator,
    ) -> Result<Vec<SearchMatch>> {
        let read = self
            .require_meta(id.as_bytes())
            .and_then(|meta| self.events_at(&meta, seqs));
        let events = match read {
            Ok(events) => events,
            // Gone since the index saw it: the matches stand, without snippets.
            Err(Error::UnknownSession { .. } | Error::Archived { .. }) => vec![None; seqs.len()],
            Err(e) => return Err(e),
        };
        Ok(seqs
            .iter()
            .zip(events)
            .map(|(&seq, event)| {
                let text = event.as_ref().and_then(message_text).unwrap_or_default();
                SearchMatch {
                    seq,
                    snippet: plain_snippet(&generator.snippet(&text)),
                }
            })
            .collect())
    }
}

/// The snippet's fragment with each highlighted range in `[`…`]`, not HTML-escaped.
fn plain_snippet(snippet: &tantivy::snippet::Snippet) -> String {
    let fragment = snippet.fragment();
    let mut out = String::with_capacity(fragment.len() + 8);
    let mut at = 0;
    for range in snippet.highlighted() {
        if range.start < at || range.end > fragment.len() {
            continue;
        }
        out.push_str(&fragment[at..range.start]);
        out.push('[');
        out.push_str(&fragment[range.clone()]);
        out.push(']');
        at = range.end;
    }
    out.push_str(&fragment[at..]);
    out
}
