//! The store handle shared by every thread, and the worker threads that run reads and
//! single-session writes off the JS thread.
//!
//! Invariant: an operation runs only while the store is open (it holds the read lock for its
//! whole run); closing takes the write lock, so it waits for running operations and every later
//! one fails with `SESSIONLOG_CLOSED`.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use sessionlog_cluster::Host;

use crate::reply::{Pending, Reply};

/// The open host: a store of its own, or in cluster mode a serving host of a fleet (or none,
/// before open and after close; dropped, a host of a fleet gives up the sessions it holds).
pub type Shared = Arc<RwLock<Option<Host>>>;

/// A job: runs against the open host.
type Job = Box<dyn FnOnce(&Host) -> Reply + Send>;

/// Worker threads serving one store.
pub struct Workers {
    queue: Option<Sender<(Job, Pending)>>,
    threads: Vec<JoinHandle<()>>,
}

/// Run `job` with the open host if there is one.
pub fn with_host(shared: &Shared, job: impl FnOnce(&Host) -> Reply) -> Reply {
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
    pub fn submit(&self, pending: Pending, job: impl FnOnce(&Host) -> Reply + Send + 'static) {
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
        pending.settle(with_host(shared, job));
    }
}
