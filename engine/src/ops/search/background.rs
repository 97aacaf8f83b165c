//! The session index kept caught up in the background ([`IndexFollower`]), so a search
//! after many writes (a bulk import, a busy hour of appends) finds them indexed already instead
//! of indexing them first. A thread woken by the store-wide feed's publications lets the writes
//! of `settle` gather, then catches the index up as a search would: at most one catch-up per
//! `settle` while writes go on, none while the store is idle.
//!
//! Searches still catch the index up first, so what an answer covers never depends on the
//! follower; the follower only moves that work off them. A catch-up that fails is tried again
//! after the next change; a search meeting the same failure reports it.
//!
//! Invariant: the thread holds the store until the follower is dropped, and dropping the
//! follower stops the thread and waits for it, so a store is never closed under its follower.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::store::{Mark, Store, Waker};

/// How long the thread waits for a change before it looks at its stop flag again (dropping the
/// follower also wakes it at once).
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// A thread keeping a store's session index caught up (see the module docs); it stops, and is
/// waited for, when this is dropped.
#[must_use = "the follower stops when dropped"]
pub struct IndexFollower {
    stop: Arc<AtomicBool>,
    waker: Waker,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for IndexFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFollower").finish_non_exhaustive()
    }
}

impl Drop for IndexFollower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.waker.wake();
        if let Some(thread) = self.thread.take() {
            // A follower thread that panicked has nothing left to stop.
            let _ = thread.join();
        }
    }
}

impl IndexFollower {
    /// Keep `store`'s session index caught up in the background until the follower is dropped:
    /// after each change, once the writes of `settle` have gathered (see the module docs).
    /// Refused for a store opened beside another process: that process keeps the index.
    pub fn start(store: Arc<Store>, settle: Duration) -> Result<IndexFollower> {
        if store.is_secondary() {
            return Err(Error::ReadOnly {
                path: store.path().to_path_buf(),
            });
        }
        let waker = Waker::new();
        let mark = store.feed_mark(&waker);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name("sessionlog-index".into())
            .spawn({
                let (waker, stop) = (waker.clone(), Arc::clone(&stop));
                move || follow(&store, &mark, &waker, &stop, settle)
            })
            .map_err(|e| Error::Internal(format!("starting the index follower: {e}")))?;
        Ok(IndexFollower {
            stop,
            waker,
            thread: Some(thread),
        })
    }
}

/// The follower thread: catch up at once (the index may be behind from before the store
/// opened), then after each change once `settle` has passed, until `stop`.
fn follow(store: &Store, mark: &Mark, waker: &Waker, stop: &AtomicBool, settle: Duration) {
    let mut indexed = None;
    while !stop.load(Ordering::SeqCst) {
        let seen = waker.count();
        let published = mark.published();
        if indexed == Some(published) {
            if store.wait_for_wake(waker, seen, IDLE_WAIT).is_err() {
                return;
            }
            continue;
        }
        if indexed.is_some() && !wait(store, waker, stop, settle) {
            return;
        }
        let covered = mark.published();
        // A failure is met again by the next search, which reports it; tried again after the
        // next change.
        let _ = store.catch_up_search_index();
        indexed = Some(covered);
    }
}

/// Let `settle` pass (woken early only to look at `stop`); false once stopped.
fn wait(store: &Store, waker: &Waker, stop: &AtomicBool, settle: Duration) -> bool {
    let until = Instant::now() + settle;
    loop {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        let seen = waker.count();
        if store.wait_for_wake(waker, seen, left).is_err() {
            return false;
        }
    }
}
