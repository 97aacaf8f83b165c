//! The store handle shared by every thread, and the worker threads that run reads and
//! single-session writes off the JS thread.
//!
//! Invariant: an operation runs only while the store is open (it holds the read lock for its
//! whole run); closing takes the write lock, so it waits for running operations and every later
//! one fails with `SESSIONLOG_CLOSED`.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use sessionlog_engine::Store;

use crate::host::Host;
use crate::reply::{Pending, Reply};

/// What an open handle serves: its store, and in cluster mode the fleet host whose index that
/// store is (its commit hook then sends every append to PostgreSQL first).
pub struct Opened {
    /// The store every read and append goes to.
    pub store: Arc<Store>,
    /// This process as a host of a fleet (cluster mode), or none (a store of its own).
    pub host: Option<Host>,
}

/// The open store (or none, before open and after close).
pub type Shared = Arc<RwLock<Option<Opened>>>;

/// A job: runs against the open store.
type Job = Box<dyn FnOnce(&Opened) -> Reply + Send>;

/// Worker threads serving one store.
pub struct Workers {
    queue: Option<Sender<(Job, Pending)>>,
    threads: Vec<JoinHandle<()>>,
}

/// Run `job` with the open store if there is one.
pub fn with_opened(shared: &Shared, job: impl FnOnce(&Opened) -> Reply) -> Reply {
    match shared.read() {
        Ok(guard) => match guard.as_ref() {
            Some(opened) => job(opened),
            None => closed(),
        },
        Err(_) => Reply::failed(
            "SESSIONLOG_CLOSED",
            "the store handle was poisoned by a panic",
        ),
    }
}

/// The reply to any operation on a closed (or never opened) store.
pub fn closed() -> Reply {
    Reply::failed(
        "SESSIONLOG_CLOSED",
        "the store is not open (closed, or open() has not finished)",
    )
}

impl Workers {
    /// Start `count` threads serving `shared`.
    pub fn start(shared: &Shared, count: usize) -> Workers {
        let (tx, rx) = channel::<(Job, Pending)>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..count)
            .map(|i| {
                let rx = Arc::clone(&rx);
                let shared = Arc::clone(shared);
                std::thread::Builder::new()
                    .name(format!("sessionlog-worker-{i}"))
                    .spawn(move || serve(&rx, &shared))
            })
            .filter_map(Result::ok)
            .collect();
        Workers {
            queue: Some(tx),
            threads,
        }
    }

    /// Queue `job`; `pending` settles with its reply.
    pub fn submit(&self, pending: Pending, job: impl FnOnce(&Opened) -> Reply + Send + 'static) {
        match &self.queue {
            Some(q) if !self.threads.is_empty() => {
                if let Err(e) = q.send((Box::new(job), pending)) {
                    let (_, pending) = e.0;
                    pending.settle(closed());
                }
            }
            _ => pending.settle(Reply::failed(
                "SESSIONLOG_THREADS",
                "the store's worker threads could not be started",
            )),
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.queue = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn serve(rx: &Mutex<Receiver<(Job, Pending)>>, shared: &Shared) {
    loop {
        let next = match rx.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        let Ok((job, pending)) = next else { return };
        pending.settle(with_opened(shared, job));
    }
}
