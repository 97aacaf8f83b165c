//! Finding sessions: the session index (one row per session: header fields, title, verdict,
//! format, times, event and turn counts, token usage, models and providers, tools called and
//! their errors, open turn, lineage) and full-text search over message text, answered by one
//! query ([`SearchQuery`] → [`SearchPage`]).
//!
//! The index is tantivy's, in the store directory's `search/` folder (`store/search_index.rs`),
//! derived from the log and never written by a commit of the log: it follows the store's change
//! log from a durable watermark (`follow.rs`). Each search first catches the index up with
//! every change committed before it, so an answer covers every commit that returned before the
//! search began, and says so: its [`SearchWatermark`] is the change-log position the index
//! covered. The write path pays nothing for the index; the first search after many writes pays
//! for indexing them, unless an [`IndexFollower`] keeps the index caught up in the background.
//! A store opened beside another process reads the index that process keeps, as far as that
//! one caught it up (the watermark says how far).
//!
//! Files: `derive.rs` (a session's row and message texts from its log), `follow.rs` (catch-up
//! and rebuild), `background.rs` (the follower), `query.rs` (running a query), `check.rs`
//! (`verify`'s check of the index).

mod background;
mod check;
mod derive;
mod follow;
mod query;
#[cfg(test)]
mod tests;

pub use background::IndexFollower;
pub use derive::{SessionRow, TokenTotals};
pub use query::MAX_TEXT_BYTES;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::store::search_index::{SearchIndex, Watermark};
use crate::store::Store;

/// What to find. Every filter given must hold; `text`, when given, must match a message of the
/// session (words all present; `"a phrase"` in quotes for words in order).
#[derive(Clone, Debug, PartialEq)]
pub struct SearchQuery {
    /// Words or phrases to find in message text (user, assistant text and reasoning, tool
    /// results). At most [`MAX_TEXT_BYTES`]. Default: none (filters only).
    pub text: Option<String>,
    /// Sessions that called this tool. Default: any.
    pub tool: Option<String>,
    /// Sessions with a tool result marked `isError` (of `tool`'s calls, when `tool` is given).
    /// Default: false.
    pub tool_error: bool,
    /// Sessions that used this model (`model` or `provider/model`). Default: any.
    pub model: Option<String>,
    /// Sessions whose last event is at or after this time (epoch ms). Default: any.
    pub since_ms: Option<i64>,
    /// Sessions created at or before this time (epoch ms). Default: any.
    pub until_ms: Option<i64>,
    /// Sessions whose token usage totals (input, output, cache read and write) reach this.
    /// Default: any.
    pub min_tokens: Option<u64>,
    /// Sessions with a turn started and not ended. Default: false (open or not).
    pub open: bool,
    /// Sessions with this verdict: `clean`, `torn`, `corrupt` or `unsupported`. Default: any.
    pub verdict: Option<String>,
    /// Forks of this session. Default: any.
    pub parent: Option<String>,
    /// Sessions per page. Default: 20.
    pub limit: usize,
    /// The `next` cursor of the previous page. Default: none (the first page).
    pub after: Option<String>,
    /// Matched messages listed per session (with a snippet each; `matchCount` counts them all).
    /// Default: 20.
    pub max_matches: usize,
}

impl Default for SearchQuery {
    fn default() -> SearchQuery {
        SearchQuery {
            text: None,
            tool: None,
            tool_error: false,
            model: None,
            since_ms: None,
            until_ms: None,
            min_tokens: None,
            open: false,
            verdict: None,
            parent: None,
            limit: 20,
            after: None,
            max_matches: 20,
        }
    }
}

/// One matched message.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchMatch {
    /// Its seq.
    pub seq: u64,
    /// A fragment of its text around the match, matched words in `[`…`]`.
    pub snippet: String,
}

/// One session found. Serializes as its row's fields (`id` first), then `score`, `matches`
/// and `matchCount`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    /// What the index holds of the session.
    #[serde(flatten)]
    pub row: SessionRow,
    /// The best text score of its matched messages (0 without text).
    pub score: f32,
    /// Its matched messages, by seq, at most [`SearchQuery::max_matches`].
    pub matches: Vec<SearchMatch>,
    /// How many of its messages matched.
    pub match_count: u64,
}

/// How fresh an answer is: the change-log position the index covered (a feed cursor of
/// [`Store::subscribe_all`] in its text form), and how many changes committed after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchWatermark {
    /// `STORE:POSITION`: the index covers every change before it.
    pub cursor: String,
    /// The change-log position.
    pub position: u64,
    /// Changes committed and not covered (0 unless the index is another process's).
    pub behind: u64,
}

/// One page of a search. Serializes as `{sessions, next, watermark}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchPage {
    /// Sessions found, newest first (by creation).
    pub sessions: Vec<SearchHit>,
    /// Pass as [`SearchQuery::after`] for the next page; `None` on the last.
    pub next: Option<String>,
    /// How fresh the answer is.
    pub watermark: SearchWatermark,
}

/// A page's last line as `search --json` prints it: `{next, watermark}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PageEnd<'a> {
    /// As [`SearchPage::next`].
    pub next: Option<&'a str>,
    /// As [`SearchPage::watermark`].
    pub watermark: &'a SearchWatermark,
}

impl SearchPage {
    /// What follows the sessions in a line-per-object rendering.
    pub fn end(&self) -> PageEnd<'_> {
        PageEnd {
            next: self.next.as_deref(),
            watermark: &self.watermark,
        }
    }
}

/// What a rebuild of the index did. Serializes as `{sessions, messages, watermark, bytes}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReindexReport {
    /// Session documents the index holds.
    pub sessions: u64,
    /// Message documents the index holds.
    pub messages: u64,
    /// The position it covers.
    pub watermark: SearchWatermark,
    /// The index's size on disk.
    pub bytes: u64,
}

/// A time as `--since`/`--until` take it: epoch milliseconds, or an RFC 3339 UTC date
/// (`2026-05-01`, `2026-05-01T12:00:00Z`, with optional fractional seconds).
pub fn parse_time(text: &str) -> Result<i64> {
    let bad = || {
        Error::Query {
        reason: format!(
            "time \"{text}\" is neither epoch milliseconds nor a UTC date (2026-05-01 or 2026-05-01T12:00:00Z)"
        ),
    }
    };
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    let (date, time) = match text.split_once('T') {
        Some((d, t)) => (d, Some(t.strip_suffix('Z').ok_or_else(bad)?)),
        None => (text, None),
    };
    let num = |s: &str| s.parse::<i64>().map_err(|_| bad());
    let d: Vec<&str> = date.split('-').collect();
    let [y, m, day] = d.as_slice() else {
        return Err(bad());
    };
    let (y, m, day) = (num(y)?, num(m)?, num(day)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return Err(bad());
    }
    let mut ms = days_from_civil(y, m, day) * 86_400_000;
    if let Some(t) = time {
        let (hms, frac) = t.split_once('.').unwrap_or((t, ""));
        let parts: Vec<&str> = hms.split(':').collect();
        let [h, mi, s] = parts.as_slice() else {
            return Err(bad());
        };
        let (h, mi, s) = (num(h)?, num(mi)?, num(s)?);
        if h > 23 || mi > 59 || s > 60 {
            return Err(bad());
        }
        let frac_ms = match frac {
            "" => 0,
            f if f.bytes().all(|b| b.is_ascii_digit()) => num(&format!("{f:0<3}")[..3])?,
            _ => return Err(bad()),
        };
        ms += ((h * 60 + mi) * 60 + s) * 1000 + frac_ms;
    }
    Ok(ms)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

impl Store {
    /// Find sessions (see [`SearchQuery`]): the index is first caught up with every change
    /// committed before the call, so the page covers them; its watermark says where it is.
    /// Pages follow one another with [`SearchPage::next`], stable while sessions are appended
    /// and created (a session created after the first page is not in later ones).
    pub fn search(&self, query: &SearchQuery) -> Result<SearchPage> {
        self.with_index(false, |store, ix, mark| {
            let page = store.run_search(ix, query)?;
            Ok(SearchPage {
                sessions: page.hits,
                next: page.next,
                watermark: store.watermark_view(mark),
            })
        })
    }

    /// Rebuild the session index from the log (`sessionlog reindex`), as a new index would be
    /// built; searches wait for it.
    pub fn reindex(&self) -> Result<ReindexReport> {
        self.with_index(true, |store, ix, mark| {
            let searcher = ix.reader.searcher();
            let count = |kind: &str| -> Result<u64> {
                let q = tantivy::query::TermQuery::new(
                    tantivy::Term::from_field_text(ix.fields.kind, kind),
                    tantivy::schema::IndexRecordOption::Basic,
                );
                searcher
                    .search(&q, &tantivy::collector::Count)
                    .map(|n| n as u64)
                    .map_err(crate::store::search_index::index_error(
                        "counting documents",
                    ))
            };
            Ok(ReindexReport {
                sessions: count("session")?,
                messages: count("message")?,
                watermark: store.watermark_view(mark),
                bytes: ix.bytes(),
            })
        })
    }

    /// Bring the index up to every committed change without searching ([`IndexFollower`]'s
    /// work).
    pub(crate) fn catch_up_search_index(&self) -> Result<()> {
        self.with_index(false, |_, _, _| Ok(()))
    }

    /// Run `f` on the index caught up (or, with `rebuild`, rebuilt), opening it on first use.
    fn with_index<R>(
        &self,
        rebuild: bool,
        f: impl FnOnce(&Store, &SearchIndex, &Watermark) -> Result<R>,
    ) -> Result<R> {
        let mut slot = self.search.lock();
        if slot.is_none() {
            *slot = Some(SearchIndex::open(self.path(), !self.is_secondary())?);
        }
        let Some(ix) = slot.as_mut() else {
            return Err(Error::SearchIndex {
                detail: "the index could not be opened".into(),
            });
        };
        let mark = match rebuild {
            true => self.rebuild_index(ix)?,
            false => self.catch_up_index(ix)?,
        };
        f(self, ix, &mark)
    }

    fn watermark_view(&self, mark: &Watermark) -> SearchWatermark {
        SearchWatermark {
            cursor: format!("{}:{}", mark.store, mark.position),
            position: mark.position,
            behind: self.feed_end().saturating_sub(mark.position),
        }
    }
}
