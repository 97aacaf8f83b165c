//! Listing stored sessions: by id, or a page at a time through the activity and creation
//! indexes (`A`, `R` keys), reading O(page) index keys.

use serde::{Serialize, Serializer};

use crate::error::Result;
use crate::layout::keys::{ACTIVITY_TAG, CF_SESSIONS, CREATED_TAG};
use crate::layout::meta::{SessionMeta, Verdict};
use crate::store::{visit, Store};

/// One line of `ls`. Serializes (`ops/render.rs`) as `{id, header, createdAt, activityAt, cwd,
/// verdict, events, lines, bytes, format, generations, archived, revision}`.
#[derive(Clone, Debug)]
pub struct SessionSummary {
    /// Session id.
    pub id: String,
    /// Header `createdAt`.
    pub created_at: Option<i64>,
    /// Header `cwd`.
    pub cwd: Option<String>,
    /// DSH's verdict.
    pub verdict: Verdict,
    /// Logical events.
    pub events: u64,
    /// Body lines (newline-terminated lines after the header), whatever DSH's reader makes of
    /// them.
    pub body_lines: u64,
    /// Stored bytes (as exported).
    pub bytes: u64,
    /// Time of the last human prompt.
    pub activity_ms: Option<i64>,
    /// When it was deleted, if it was.
    pub deleted_at_ms: Option<i64>,
    /// The served generation's format version.
    pub format: u32,
    /// Every generation held, ascending (the served one is the last).
    pub generations: Vec<u32>,
    /// The exact header record, without its `\n` (lossy UTF-8).
    pub header: String,
    /// Where its bytes are when it is archived (`s3://BUCKET/KEY` of its served generation).
    pub archived: Option<String>,
    /// Write batches committed so far (the header is batch 0): it moves with every append or
    /// repair, so with `events`, `bytes` and `verdict` it names the stored revision.
    pub batches: u64,
}

impl From<&SessionMeta> for SessionSummary {
    fn from(m: &SessionMeta) -> Self {
        SessionSummary {
            id: m.id_lossy(),
            created_at: m.created_at,
            cwd: m.cwd.clone(),
            verdict: m.verdict.clone(),
            events: m.events,
            body_lines: m.body_lines,
            bytes: m.total_bytes,
            activity_ms: m.activity_ms,
            deleted_at_ms: m.deleted_at_ms,
            format: m.version,
            generations: m
                .frozen
                .iter()
                .map(|g| g.version)
                .chain([m.version])
                .collect(),
            header: String::from_utf8_lossy(m.header.strip_suffix(b"\n").unwrap_or(&m.header))
                .into_owned(),
            archived: m
                .archived
                .as_ref()
                .map(crate::layout::meta::ArchivedCopy::location),
            batches: m.next_batch,
        }
    }
}

impl SessionSummary {
    /// The stored revision's token: it changes with every commit to the session (a host
    /// compares it to learn whether a session moved since it last read it).
    pub fn revision(&self) -> String {
        let verdict = match self.verdict {
            Verdict::Clean => "clean",
            Verdict::Torn => "torn",
            Verdict::Corrupt(_) => "corrupt",
            Verdict::Unsupported(_) => "unsupported",
        };
        format!(
            "sessionlog:{}:{}:{}:{verdict}",
            self.events, self.bytes, self.batches
        )
    }
}

/// A [`SessionSummary`] as it is rendered: what a reader of a listing is told (not the batch
/// count or the deletion time, which only the revision and the listing's filter use).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SummaryView<'a> {
    id: &'a str,
    header: &'a str,
    created_at: Option<i64>,
    activity_at: Option<i64>,
    cwd: Option<&'a str>,
    #[serde(serialize_with = "crate::ops::render::as_text")]
    verdict: &'a Verdict,
    events: u64,
    lines: u64,
    bytes: u64,
    format: u32,
    generations: &'a [u32],
    archived: Option<&'a str>,
    revision: String,
}

impl Serialize for SessionSummary {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        SummaryView {
            id: &self.id,
            header: &self.header,
            created_at: self.created_at,
            activity_at: self.activity_ms,
            cwd: self.cwd.as_deref(),
            verdict: &self.verdict,
            events: self.events,
            lines: self.body_lines,
            bytes: self.bytes,
            format: self.format,
            generations: &self.generations,
            archived: self.archived.as_deref(),
            revision: self.revision(),
        }
        .serialize(s)
    }
}

/// Listing orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListOrder {
    /// Most recent human activity first (sessions never prompted last).
    Activity,
    /// Newest `createdAt` first.
    Created,
}

/// One page of a listing.
#[derive(Clone, Debug)]
pub struct ListPage {
    /// The sessions, in order (deleted ones are skipped).
    pub sessions: Vec<SessionSummary>,
    /// Pass as `after` to get the next page; `None` at the end.
    pub next: Option<Vec<u8>>,
    /// Index keys read to build the page (the cost of a page is O(limit), not O(store)).
    pub keys_read: u64,
}

impl Store {
    /// A page of at most `limit` live sessions in `order`, starting after cursor `after`. Reads
    /// the order's index from the cursor on and the metadata of the sessions it names.
    pub fn list_page(
        &self,
        order: ListOrder,
        limit: usize,
        after: Option<&[u8]>,
    ) -> Result<ListPage> {
        let tag = match order {
            ListOrder::Activity => ACTIVITY_TAG,
            ListOrder::Created => CREATED_TAG,
        };
        let mut it = self.iter_below(CF_SESSIONS, vec![tag + 1])?;
        match after {
            Some(cursor) => {
                it.seek(cursor);
                if it.key() == Some(cursor) {
                    it.next();
                }
            }
            None => it.seek([tag]),
        }
        let mut page = ListPage {
            sessions: Vec::new(),
            next: None,
            keys_read: 0,
        };
        visit(&mut it, "listing sessions".into(), &mut |k, id| {
            if page.sessions.len() >= limit {
                return Ok(false);
            }
            page.keys_read += 1;
            if let Some(meta) = self.meta(id)? {
                if meta.deleted_at_ms.is_none() {
                    page.sessions.push(SessionSummary::from(&meta));
                }
            }
            page.next = Some(k.to_vec());
            Ok(true)
        })?;
        if !it.valid() {
            page.next = None;
        }
        Ok(page)
    }

    /// The summary of session `id` (deleted or archived or not), or `UnknownSession`.
    pub fn summary(&self, id: &str) -> Result<SessionSummary> {
        self.require_record(id.as_bytes())
            .map(|m| SessionSummary::from(&m))
    }

    /// Every stored session, ordered by id.
    pub fn list(&self) -> Result<Vec<SessionSummary>> {
        let mut out = Vec::new();
        self.for_each_meta(&mut |m| {
            out.push(SessionSummary::from(m));
            Ok(())
        })?;
        Ok(out)
    }

    /// Stored ids, for callers that only need names.
    pub fn ids(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        self.for_each_meta(&mut |m| {
            out.push(m.id_lossy());
            Ok(())
        })?;
        Ok(out)
    }
}
