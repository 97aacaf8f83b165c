//! The store-wide feed: every session change in commit order, from a cursor a consumer stores
//! and resumes from after a restart (indexers, exporters). Each change of the change log
//! (`layout/changes.rs`) is an item of its own kind (appended, created, imported, forked,
//! migrated, repaired, deleted, undeleted, purged, archived, restored), followed by the events
//! it brought, read from the session when the feed reaches them.
//!
//! A change's events are read when the feed reaches the change, so a session purged or archived
//! later in the log no longer has them: the feed then goes on to the next change (the purge or
//! archive follows in the log, as an item of its own).
//!
//! The log keeps the latest changes only (`Options::feed_retained_changes`): a feed with no
//! cursor starts at the first change retained, and a cursor older than that, or a feed that
//! falls behind the trim, is refused with an error naming the retained start, never moved past
//! the trimmed changes in silence.
//!
//! Invariants: items come in the log's order, each once from a given cursor; every item carries
//! the cursor just past it, so resuming from the last one a consumer handled repeats nothing and
//! skips nothing; a cursor names its store, and another store's is refused; a position the log
//! no longer retains is an error, never a gap.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sessionlog_codec::json::Value;

use super::BUFFERED_EVENTS;
use crate::error::{Error, Result};
use crate::layout::changes::{Change, ChangeKind};
use crate::store::{Mark, Store, Waker};

/// How many change records a feed reads at once.
const CHANGES_READ: usize = 64;

/// A position in a store's feed: the store's identity, the change-log position, and, within a
/// change whose events are being delivered, the seq of the next one. Written as
/// `STORE:POSITION` or `STORE:POSITION:SEQ`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedCursor {
    /// The identity of the store the cursor belongs to.
    pub store: String,
    /// The position of the next change.
    pub position: u64,
    /// Within that change, the seq of its next event (its own item already delivered).
    pub seq: Option<u64>,
}

impl fmt::Display for FeedCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.seq {
            Some(seq) => write!(f, "{}:{}:{seq}", self.store, self.position),
            None => write!(f, "{}:{}", self.store, self.position),
        }
    }
}

impl FromStr for FeedCursor {
    type Err = Error;

    fn from_str(text: &str) -> Result<FeedCursor> {
        let bad = |reason: &str| Error::Cursor {
            cursor: text.to_owned(),
            reason: reason.to_owned(),
        };
        let number = |part: &str| {
            part.parse::<u64>()
                .map_err(|_| bad("it is not STORE:POSITION[:SEQ], as `tail --all` prints it"))
        };
        let parts: Vec<&str> = text.split(':').collect();
        let (store, position, seq) = match parts.as_slice() {
            [store, position] => (*store, number(position)?, None),
            [store, position, seq] => (*store, number(position)?, Some(number(seq)?)),
            _ => {
                return Err(bad(
                    "it is not STORE:POSITION[:SEQ], as `tail --all` prints it",
                ))
            }
        };
        if store.is_empty() {
            return Err(bad("it names no store"));
        }
        Ok(FeedCursor {
            store: store.to_owned(),
            position,
            seq,
        })
    }
}

/// What a feed item says.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum FeedChange {
    /// A change to the session; the events it brought (`first..first + count`, when its kind
    /// [carries events](ChangeKind::carries_events)) follow as [`FeedChange::Event`]s.
    Session {
        /// What happened.
        kind: ChangeKind,
        /// The first seq it concerns.
        first: u64,
        /// How many events it concerns.
        count: u64,
        /// A fork's parent, an archive's location; else empty.
        other: String,
    },
    /// One event a change brought.
    Event {
        /// Its seq.
        seq: u64,
        /// The event.
        event: Value,
    },
}

/// One item of the store-wide feed.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedItem {
    /// The session concerned.
    pub session: String,
    /// What happened to it.
    pub change: FeedChange,
    /// Where to resume to get the items after this one.
    pub next: FeedCursor,
}

/// The store-wide feed from a cursor on (see the module docs).
pub struct Feed {
    store: String,
    /// The position of the change being delivered, or of the next one.
    position: u64,
    /// Within the change at `position`: the seq of its next event; `None` when its own item is
    /// still to come.
    at: Option<u64>,
    /// Change records read ahead, from `position` on.
    changes: VecDeque<(u64, Change)>,
    /// Items made and not yet yielded.
    pending: VecDeque<FeedItem>,
    /// The store-wide mark (published positions), and the waker it wakes.
    mark: Arc<Mark>,
    waker: Waker,
    /// The cursor past the last item yielded (the start cursor before the first).
    resume: FeedCursor,
}

impl fmt::Debug for Feed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Feed")
            .field("resume", &self.resume)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Every change to every session in commit order, each followed by the events it brought,
    /// from `from` on (a [`FeedCursor`] as [`FeedItem::next`] gave it, in its text form) or
    /// from the first change the log retains. A cursor of another store is refused, and so is
    /// one older than the log's retained start.
    pub fn subscribe_all(&self, from: Option<&str>) -> Result<Feed> {
        let waker = Waker::new();
        let mark = self.feed_mark(&waker);
        let store = self.identity()?;
        let (position, at) = match from {
            None => (self.retained_start()?, None),
            Some(text) => {
                let cursor: FeedCursor = text.parse()?;
                if cursor.store != store {
                    return Err(Error::Cursor {
                        cursor: text.to_owned(),
                        reason: format!(
                            "it belongs to store {}, not to this one ({store} at {})",
                            cursor.store,
                            self.path().display()
                        ),
                    });
                }
                (cursor.position, cursor.seq)
            }
        };
        let feed = Feed {
            resume: FeedCursor {
                store: store.clone(),
                position,
                seq: at,
            },
            store,
            position,
            at,
            changes: VecDeque::new(),
            pending: VecDeque::new(),
            mark,
            waker,
        };
        feed.check_retained(self)?;
        Ok(feed)
    }
}

impl Feed {
    /// Where this feed resumes: the cursor past the last item it yielded.
    pub fn cursor_now(&self) -> FeedCursor {
        self.resume.clone()
    }

    /// The next item, waiting at most `timeout` for a change to commit; `None` when none came
    /// by then. `Duration::ZERO` asks only for what is stored.
    pub fn next_within(&mut self, store: &Store, timeout: Duration) -> Result<Option<FeedItem>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(item) = self.pending.pop_front() {
                self.resume = item.next.clone();
                return Ok(Some(item));
            }
            let seen = self.waker.count();
            if self.produce(store)? {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            store.wait_for_wake(&self.waker, seen, left)?;
        }
    }

    fn cursor(&self, position: u64, seq: Option<u64>) -> FeedCursor {
        FeedCursor {
            store: self.store.clone(),
            position,
            seq,
        }
    }

    /// Make the next items from the log; `false` when the log holds nothing more yet.
    fn produce(&mut self, store: &Store) -> Result<bool> {
        loop {
            if self.changes.is_empty() {
                let idle = self.mark.published() <= self.position;
                if idle && store.marks_follow_changes() {
                    return Ok(false);
                }
                let loaded = store.read_changes(self.position, CHANGES_READ)?;
                // Checked after the read: a trim the read saw has raised the start already.
                self.check_retained(store)?;
                if loaded.is_empty() {
                    return Ok(false);
                }
                self.changes.extend(loaded);
            }
            let Some((position, change)) = self.changes.front() else {
                return Ok(false);
            };
            let position = *position;
            if position != self.position {
                // A failed write's positions were never used: the next change starts whole.
                self.position = position;
                self.at = None;
            }
            let end = change.first.saturating_add(change.count);
            let carries = change.kind.carries_events() && change.count > 0;
            let session = String::from_utf8_lossy(&change.session).into_owned();
            match self.at {
                None => {
                    let next = match carries {
                        true => self.cursor(position, Some(change.first)),
                        false => self.cursor(position + 1, None),
                    };
                    self.pending.push_back(FeedItem {
                        session,
                        change: FeedChange::Session {
                            kind: change.kind,
                            first: change.first,
                            count: change.count,
                            other: change.other.clone(),
                        },
                        next,
                    });
                    match carries {
                        true => self.at = Some(change.first),
                        false => self.finish_change(),
                    }
                    return Ok(true);
                }
                Some(seq) if !carries || seq >= end => self.finish_change(),
                Some(seq) => {
                    let last = end.min(seq.saturating_add(BUFFERED_EVENTS as u64)) - 1;
                    let id = change.session.clone();
                    let events = match read_events(store, &id, seq, last)? {
                        Some(events) if !events.is_empty() => events,
                        // The session is gone, or no longer holds these events: on to the
                        // next change, which says why.
                        _ => {
                            self.finish_change();
                            continue;
                        }
                    };
                    for (seq, event) in events {
                        let next = match seq + 1 >= end {
                            true => self.cursor(position + 1, None),
                            false => self.cursor(position, Some(seq + 1)),
                        };
                        self.pending.push_back(FeedItem {
                            session: session.clone(),
                            change: FeedChange::Event { seq, event },
                            next,
                        });
                        self.at = Some(seq + 1);
                    }
                    if self.at.is_some_and(|at| at >= end) {
                        self.finish_change();
                    }
                    return Ok(true);
                }
            }
        }
    }

    /// Refuse to go on from a position the change log no longer retains: the changes between
    /// it and the retained start are gone, and going past them would be a silent gap.
    fn check_retained(&self, store: &Store) -> Result<()> {
        let start = store.retained_start()?;
        if self.position >= start {
            return Ok(());
        }
        Err(Error::Cursor {
            cursor: self.cursor(self.position, self.at).to_string(),
            reason: format!(
                "it is older than the feed's retained start {} (the change log's older changes are trimmed); resync from a snapshot, then follow the feed from there",
                self.cursor(start, None)
            ),
        })
    }

    /// The change at `position` is delivered: on to the next.
    fn finish_change(&mut self) {
        self.changes.pop_front();
        self.position += 1;
        self.at = None;
    }
}

/// Events `from..=last` of session `id`, or `None` when it is no longer stored here (purged,
/// archived).
fn read_events(
    store: &Store,
    id: &[u8],
    from: u64,
    last: u64,
) -> Result<Option<Vec<(u64, Value)>>> {
    let meta = match store.require_meta(id) {
        Ok(meta) => meta,
        Err(Error::UnknownSession { .. } | Error::Archived { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut events = Vec::new();
    match store.events_of(&meta, from, Some(last), &mut |seq, event| {
        events.push((seq, event.clone()));
        Ok(())
    }) {
        Ok(()) => Ok(Some(events)),
        Err(Error::UnknownSession { .. } | Error::Archived { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}
