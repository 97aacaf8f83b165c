//! The run's clients: threads that, until the deadline, pick a call (by weight, among the kinds
//! the run allows), a session from a small set of ids (so that calls collide) and a host, send
//! it, and record the call and its answer in the history. Every choice comes from the client's
//! own seeded generator; the interleaving, of course, does not.
//!
//! A client remembers which host last took or created each session and sends most of its
//! appends, deletes and releases there, so that they are not all refused as not held.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::history::{Call, History, Op, Outcome};
use super::hosts::Hosts;
use crate::stress::Rng;

/// The call kinds, with their weights in the mix.
pub const KINDS: &[(&str, u64)] = &[
    ("append", 30),
    ("read", 18),
    ("acquire", 12),
    ("create", 8),
    ("release", 5),
    ("fork", 4),
    ("import", 4),
    ("delete", 4),
    ("undelete", 3),
    ("purge", 2),
];

/// What the clients share.
pub(crate) struct Clients<'a> {
    pub(crate) hosts: &'a Hosts,
    pub(crate) history: &'a Mutex<History>,
    /// The session ids the calls pick from.
    pub(crate) ids: Vec<String>,
    /// The kinds allowed, with their weights.
    pub(crate) kinds: Vec<(&'static str, u64)>,
    pub(crate) next_op: AtomicU64,
    pub(crate) start: Instant,
    pub(crate) deadline: Instant,
}

impl Clients<'_> {
    /// Client `c`'s loop, seeded by `seed`, until the deadline.
    pub(crate) fn run(&self, c: usize, seed: u64) {
        let mut rng = Rng::new(seed ^ (c as u64 + 1).wrapping_mul(0x9e37_79b9));
        let mut owner: HashMap<String, usize> = HashMap::new();
        let total: u64 = self.kinds.iter().map(|(_, w)| w).sum();
        while Instant::now() < self.deadline && total > 0 {
            let call = self.pick(&mut rng, total);
            let session = call.session().map(str::to_owned);
            let preferred = session.as_ref().and_then(|s| owner.get(s).copied());
            let mut h = match preferred {
                Some(h) if rng.range(0, 4) > 0 && self.hosts.accepts(h) => h,
                _ => rng.range(0, self.hosts.count() as u64) as usize,
            };
            if !self.hosts.accepts(h) {
                match (0..self.hosts.count()).find(|&o| self.hosts.accepts(o)) {
                    Some(o) => h = o,
                    None => {
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                }
            }
            let index = self.next_op.fetch_add(1, Ordering::SeqCst);
            let invoked = self.start.elapsed();
            let Some(answer) = self.hosts.call(h, index, &call) else {
                continue;
            };
            let completed = self.start.elapsed();
            if answer.outcome == Outcome::Acknowledged {
                match (&call, session) {
                    (
                        Call::Create { .. }
                        | Call::Import { .. }
                        | Call::Fork { .. }
                        | Call::Acquire { .. },
                        Some(s),
                    ) => {
                        owner.insert(s, h);
                    }
                    (Call::Release { .. }, Some(s)) => {
                        owner.remove(&s);
                    }
                    _ => {}
                }
            }
            self.history
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .ops
                .push(Op {
                    index,
                    client: c,
                    host: h,
                    call,
                    invoked,
                    completed,
                    answer,
                });
            std::thread::sleep(Duration::from_millis(rng.range(0, 40)));
        }
    }

    /// A call of a kind drawn by weight, on ids drawn from the set.
    fn pick(&self, rng: &mut Rng, total: u64) -> Call {
        let mut roll = rng.range(0, total);
        let kind = self
            .kinds
            .iter()
            .find(|(_, w)| {
                let hit = roll < *w;
                roll = roll.saturating_sub(*w);
                hit
            })
            .map_or("read", |(k, _)| *k);
        let id = |rng: &mut Rng| self.ids[rng.range(0, self.ids.len() as u64) as usize].clone();
        let session = id(rng);
        let events = rng.range(1, 4);
        match kind {
            "append" => Call::Append { session, events },
            "acquire" => Call::Acquire {
                session,
                force: rng.range(0, 3) == 0,
            },
            "create" => Call::Create { session, events },
            "release" => Call::Release { session },
            "fork" => Call::Fork {
                parent: session,
                child: id(rng),
            },
            "import" => Call::Import { session, events },
            "delete" => Call::Delete { session },
            "undelete" => Call::Undelete { session },
            "purge" => Call::Purge,
            _ => Call::Read { session },
        }
    }
}
