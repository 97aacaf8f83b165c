//! The nemesis: until the deadline, one fault at a time, each drawn from the run's seed, held for
//! a drawn while, healed, and recorded in the history with its times:
//!
//! - `pause`: SIGSTOP a host, SIGCONT it 0.5–4 s later (its leases run out meanwhile);
//! - `kill`: SIGKILL a host, restart it on its store 0.2–2 s later;
//! - `blackhole`: a host's proxies swallow every byte to and from PostgreSQL for 1–6 s, then
//!   deliver them late or reset the connections that lost bytes ([`super::proxy`]);
//! - `kill-leader` (Patroni only, at most every 20 s): SIGKILL the leader's node, wait for the
//!   standby's promotion, restart the node and wait until it replicates again.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::history::{Fault, History};
use super::hosts::Hosts;
use super::proxy::{Heal, Switch};
use super::Database;
use crate::stress::Rng;

/// Every fault kind.
pub const FAULTS: &[&str] = &["pause", "kill", "blackhole", "kill-leader"];

/// The shortest time between two kills of the database's leader.
const LEADER_KILL_GAP: Duration = Duration::from_secs(20);

/// What the nemesis acts on.
pub(crate) struct Nemesis<'a> {
    pub(crate) hosts: &'a Hosts,
    pub(crate) switches: &'a [Arc<Switch>],
    pub(crate) history: &'a Mutex<History>,
    /// The fault kinds allowed.
    pub(crate) faults: Vec<&'static str>,
    pub(crate) start: Instant,
    pub(crate) deadline: Instant,
}

impl Nemesis<'_> {
    /// Inject faults until the deadline (see the module docs); every fault is healed before
    /// the next, and before this returns, even on error where it can be.
    pub(crate) fn run(&self, db: &mut Database, seed: u64) -> anyhow::Result<()> {
        let mut rng = Rng::new(seed ^ 0x006e_656d_6573_6973);
        let kinds: Vec<&'static str> = self
            .faults
            .iter()
            .copied()
            .filter(|k| *k != "kill-leader" || matches!(db, Database::Patroni(_)))
            .collect();
        let mut last_leader_kill: Option<Instant> = None;
        while !kinds.is_empty() {
            let gap = Duration::from_millis(rng.range(500, 2500));
            if Instant::now() + gap + Duration::from_secs(1) >= self.deadline {
                break;
            }
            std::thread::sleep(gap);
            self.restart_exited()?;
            let mut kind = kinds[rng.range(0, kinds.len() as u64) as usize];
            if kind == "kill-leader"
                && last_leader_kill.is_some_and(|t| t.elapsed() < LEADER_KILL_GAP)
            {
                kind = "pause";
            }
            let h = rng.range(0, self.hosts.count() as u64) as usize;
            let at = self.start.elapsed();
            let (target, detail) = match kind {
                "pause" => {
                    self.hosts.pause(h)?;
                    std::thread::sleep(Duration::from_millis(rng.range(500, 4000)));
                    self.hosts.resume(h)?;
                    (format!("host{h}"), String::new())
                }
                "kill" => {
                    self.hosts.kill(h)?;
                    std::thread::sleep(Duration::from_millis(rng.range(200, 2000)));
                    self.hosts.restart(h)?;
                    (format!("host{h}"), String::new())
                }
                "blackhole" => {
                    self.switches[h].blackhole();
                    std::thread::sleep(Duration::from_millis(rng.range(1000, 6000)));
                    let heal = if rng.range(0, 2) == 0 {
                        Heal::Deliver
                    } else {
                        Heal::Reset
                    };
                    self.switches[h].heal(heal);
                    let detail = match heal {
                        Heal::Deliver => "healed by delivering the held bytes late",
                        Heal::Reset => "healed by resetting the connections that lost bytes",
                    };
                    (format!("host{h}"), detail.to_owned())
                }
                _ => {
                    let Database::Patroni(cluster) = db else {
                        continue;
                    };
                    last_leader_kill = Some(Instant::now());
                    let leader = cluster.leader().context("no database node leads")?;
                    cluster.kill(leader)?;
                    let promoted = cluster.wait_new_leader(leader)?;
                    cluster.restart(leader)?;
                    cluster.wait_rejoined(leader)?;
                    (format!("node{leader}"), format!("node{promoted} promoted"))
                }
            };
            self.history
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .faults
                .push(Fault {
                    kind,
                    target,
                    detail,
                    at,
                    healed: self.start.elapsed(),
                });
        }
        Ok(())
    }

    /// Restart every host that exited by itself (no fault of the nemesis stops one for good),
    /// recording the exit and the end of its stderr in the history.
    pub(crate) fn restart_exited(&self) -> anyhow::Result<()> {
        for h in 0..self.hosts.count() {
            if !self.hosts.is_running(h) {
                let tail = self.hosts.stderr_tail(h);
                self.history
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .exits
                    .push(format!(
                        "host{h} exited by itself at {:.3}s: {tail}",
                        self.start.elapsed().as_secs_f64()
                    ));
                self.hosts.kill(h)?;
                self.hosts.restart(h)?;
            }
        }
        Ok(())
    }

    /// Undo whatever a failed fault left: every host resumed, every proxy passing bytes.
    pub(crate) fn heal_all(&self) {
        for (h, switch) in self.switches.iter().enumerate() {
            switch.heal(Heal::Deliver);
            let _ = self.hosts.resume(h);
        }
    }
}
