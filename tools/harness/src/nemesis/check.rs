//! The nemesis run's checker: the history of calls and answers against the final state
//! (PostgreSQL's rows, and each host's store after it caught up on every id).
//!
//! A session's *incarnation* is its header's bytes (crc32): an id purged and created again is a
//! new incarnation, and the log of one never continues another's. Findings, by kind:
//!
//! - `postgres-integrity`: a session's batch rows are not numbered from 1 without a gap, their
//!   seqs not contiguous from 0, or a row's bytes do not match its crc.
//! - `lost`: an acknowledged batch is not in its session, whose incarnation is still the one the
//!   batch was acknowledged in (or no purge, acknowledged or of unknown outcome, ended after the
//!   batch was sent to explain its absence).
//! - `duplicated`: a batch (acknowledged or not) is in its session more than once.
//! - `misplaced`: a batch is in a session other than its own that is not a fork (a fork's seed
//!   holds its parent's events).
//! - `refused-but-written`: a batch refused as not written is in PostgreSQL, in a host's store,
//!   or in a read.
//! - `read-not-prefix`: a read of the final incarnation is not a prefix of its final log.
//! - `stale-read`: a read misses a batch of its incarnation that the fleet's read guarantee
//!   ([`ReadGuarantee`]) says it must hold: one the reading host itself acknowledged before the
//!   read was sent (read-your-writes), or one another host acknowledged longer than the read
//!   bound (and [`CLOCK_MARGIN`]) before it.
//! - `purged-readable`: a read served the incarnation an acknowledged purge removed (created
//!   before the purge was sent) although the read guarantee says it must not: sent after the
//!   purge was acknowledged on the same host, or longer than the read bound (and
//!   [`CLOCK_MARGIN`]) after it elsewhere; or a host that caught up serves a session PostgreSQL
//!   no longer holds.
//! - `host-diverged`, `host-stale`, `delete-not-propagated`, `catch-up-failed`: a host that
//!   caught up on every id holds a log other than PostgreSQL's (another incarnation, bytes that
//!   are no prefix), a strict prefix of it, another deleted flag, or could not catch up.
//! - `split-brain`: two hosts acknowledged appends to one incarnation at one owner epoch.
//! - `host-exited`: a host process ended without the nemesis killing it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use super::history::{header_of, ops_in, Call, History, Op, Outcome};

/// A batch row of PostgreSQL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinalBatch {
    /// Its number (the header is batch 0).
    pub batch: u64,
    /// Its first seq and events.
    pub first_seq: u64,
    /// See `first_seq`.
    pub events: u64,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Whether its bytes match the crc the row records.
    pub crc_ok: bool,
}

/// A session as PostgreSQL holds it at the end.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FinalSession {
    /// Its header's bytes (line and newline).
    pub header: Vec<u8>,
    /// Its batch rows, by number.
    pub batches: Vec<FinalBatch>,
    /// Whether it is deleted.
    pub deleted: bool,
    /// Whether it is a fork (its seed holds its parent's events).
    pub forked: bool,
}

impl FinalSession {
    /// The session's whole log: header, then every batch's bytes.
    pub fn log(&self) -> Vec<u8> {
        let mut out = self.header.clone();
        for b in &self.batches {
            out.extend_from_slice(&b.bytes);
        }
        out
    }
}

/// A session in a host's store at the end, after the host caught up on every id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalCopy {
    /// Its export.
    pub bytes: Vec<u8>,
    /// Whether it is deleted there.
    pub deleted: bool,
}

/// The end of the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FinalState {
    /// PostgreSQL's sessions, by id.
    pub postgres: BTreeMap<String, FinalSession>,
    /// Each host's sessions, by id.
    pub hosts: Vec<BTreeMap<String, LocalCopy>>,
    /// Each host's catch-ups that failed, one line each.
    pub catch_up_failures: Vec<Vec<String>>,
}

/// One violation, with the calls that show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Its kind (see the module docs).
    pub kind: &'static str,
    /// What was found.
    pub detail: String,
    /// The calls involved, by number.
    pub ops: Vec<u64>,
    /// The session, when no call shows the finding alone (a host's final state).
    pub session: Option<String>,
}

impl Finding {
    fn on(mut self, session: &str) -> Finding {
        self.session = Some(session.to_owned());
        self
    }
}

/// The incarnation of a log or header: the crc32 of its first line.
pub fn incarnation(bytes: &[u8]) -> u32 {
    crc32fast::hash(header_of(bytes))
}

/// What slack the checker allows a clock reading: the controller stamps a call's times around
/// its pipe to the host, and the hosts and the controller read one monotonic clock, so the
/// stamps already err on the fleet's side; this margin only absorbs the scheduling between a
/// stamp and the write or read it stands for.
pub const CLOCK_MARGIN: Duration = Duration::from_millis(100);

/// The fleet's documented read guarantee (docs/SCALING.md, "What a read sees"), which the
/// checker holds every read to. A host serves a session it holds from its own copy, without
/// asking PostgreSQL, while PostgreSQL confirmed its hold less than the read bound ago; every
/// other read catches up first. So:
///
/// - a read on the host that acknowledged a batch holds it (read-your-writes: its copy has
///   every batch it acknowledged, and a copy of one incarnation only grows);
/// - a read elsewhere may miss a batch only when it was acknowledged less than the bound before
///   the read was sent: the reading host's hold was confirmed at some instant `c` with the read
///   served before `c + bound`, and a batch it misses was committed by a host that took the
///   session over after `c`, so acknowledged after `c`, after the read's sending minus the
///   bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadGuarantee {
    /// How long a host trusts its own copy after PostgreSQL last confirmed its hold.
    pub bound: Duration,
}

impl ReadGuarantee {
    /// The guarantee of hosts run with `FleetOptions::read_bound` `read_bound` and lease
    /// `lease` (a host trusts its copy for the shorter of the two).
    pub fn of(read_bound: Duration, lease: Duration) -> ReadGuarantee {
        ReadGuarantee {
            bound: read_bound.min(lease),
        }
    }

    /// Why `read` may not miss `write` (acknowledged before the read was sent: a batch of the
    /// incarnation it served, or a purge of that incarnation), or `None` when the guarantee
    /// allows it. A purge is a write like an append: the host that made it no longer serves
    /// the session, and a host whose hold PostgreSQL confirmed before the purge (never after:
    /// the row is gone) may serve its copy until the bound after that confirmation.
    fn owed(&self, write: &Op, read: &Op) -> Option<String> {
        let before = read.invoked.saturating_sub(write.completed);
        if write.host == read.host {
            return Some(format!(
                "acknowledged by the same host {:.3} s before the read was sent (read-your-writes)",
                before.as_secs_f64()
            ));
        }
        (before > self.bound + CLOCK_MARGIN).then(|| {
            format!(
                "acknowledged by host{} {:.3} s before the read was sent, past the read bound \
                 of {:.3} s (and {} ms for the clock)",
                write.host,
                before.as_secs_f64(),
                self.bound.as_secs_f64(),
                CLOCK_MARGIN.as_millis()
            )
        })
    }
}

/// Every violation of the module's rules in `history` against `state`, reads held to `reads`.
pub fn check(history: &History, state: &FinalState, reads: ReadGuarantee) -> Vec<Finding> {
    let mut found = Vec::new();
    integrity(state, &mut found);
    batches(history, state, &mut found);
    read_answers(history, state, reads, &mut found);
    hosts(state, &mut found);
    split_brain(history, &mut found);
    for exit in &history.exits {
        found.push(finding("host-exited", exit.clone(), Vec::new()));
    }
    found
}

fn finding(kind: &'static str, detail: String, ops: Vec<u64>) -> Finding {
    Finding {
        kind,
        detail,
        ops,
        session: None,
    }
}

fn integrity(state: &FinalState, found: &mut Vec<Finding>) {
    for (id, s) in &state.postgres {
        let mut next_seq = 0;
        for (n, b) in s.batches.iter().enumerate() {
            let problem = if b.batch != n as u64 + 1 {
                Some(format!("batch {} where batch {} belongs", b.batch, n + 1))
            } else if b.first_seq != next_seq {
                Some(format!(
                    "batch {} starts at seq {} (expected {next_seq})",
                    b.batch, b.first_seq
                ))
            } else if !b.crc_ok {
                Some(format!("batch {}'s bytes do not match its crc", b.batch))
            } else {
                None
            };
            if let Some(p) = problem {
                found.push(finding(
                    "postgres-integrity",
                    format!("{id}: {p}"),
                    Vec::new(),
                ));
            }
            next_seq = b.first_seq + b.events;
        }
    }
}

/// When `op` may still have taken effect: its answer's time, or never for an unknown one.
fn effect_until(op: &Op) -> Duration {
    match op.answer.outcome {
        Outcome::Unknown => Duration::MAX,
        _ => op.completed,
    }
}

/// A purge that may have removed `session` after `since`: acknowledged naming it, or unknown.
fn purged_after(history: &History, session: &str, since: Duration) -> Option<u64> {
    history
        .ops
        .iter()
        .filter(|p| matches!(p.call, Call::Purge) && effect_until(p) >= since)
        .find(|p| match p.answer.outcome {
            Outcome::Acknowledged => p.answer.purged.iter().any(|s| s == session),
            Outcome::Unknown => true,
            Outcome::Refused { .. } => false,
        })
        .map(|p| p.index)
}

fn batches(history: &History, state: &FinalState, found: &mut Vec<Finding>) {
    // Where each call's events are: session -> call -> rows holding them.
    let mut rows: HashMap<u64, BTreeMap<&str, u64>> = HashMap::new();
    for (id, s) in &state.postgres {
        for b in &s.batches {
            for op in ops_in(&b.bytes) {
                *rows.entry(op).or_default().entry(id.as_str()).or_default() += 1;
            }
        }
    }
    let mut elsewhere: HashMap<u64, Vec<String>> = HashMap::new();
    for (h, copies) in state.hosts.iter().enumerate() {
        for (id, copy) in copies {
            for op in ops_in(&copy.bytes) {
                elsewhere
                    .entry(op)
                    .or_default()
                    .push(format!("host{h}'s {id}"));
            }
        }
    }
    for r in history
        .ops
        .iter()
        .filter(|o| matches!(o.call, Call::Read { .. }))
    {
        for &op in r.answer.served.iter().flat_map(|s| &s.ops) {
            elsewhere
                .entry(op)
                .or_default()
                .push(format!("read #{}", r.index));
        }
    }
    for op in history.ops.iter().filter(|o| o.call.writes_events()) {
        let Some(session) = op.call.session() else {
            continue;
        };
        let held = rows.remove(&op.index).unwrap_or_default();
        let own = held.get(session).copied().unwrap_or(0);
        if own > 1 {
            found.push(finding(
                "duplicated",
                format!("call #{}'s batch is in {session} {own} times", op.index),
                vec![op.index],
            ));
        }
        for (other, _) in held.iter().filter(|(t, _)| **t != session) {
            if !state.postgres.get(*other).is_some_and(|s| s.forked) {
                found.push(finding(
                    "misplaced",
                    format!(
                        "call #{}'s batch for {session} is in {other}, no fork",
                        op.index
                    ),
                    vec![op.index],
                ));
            }
        }
        match &op.answer.outcome {
            Outcome::Refused { code } => {
                let mut places: Vec<String> =
                    held.keys().map(|t| format!("PostgreSQL's {t}")).collect();
                places.extend(elsewhere.get(&op.index).cloned().unwrap_or_default());
                if !places.is_empty() {
                    let mut ops = vec![op.index];
                    ops.extend(
                        places
                            .iter()
                            .filter_map(|p| p.strip_prefix("read #")?.parse::<u64>().ok()),
                    );
                    found.push(finding(
                        "refused-but-written",
                        format!(
                            "call #{} was refused ({code}) as not written, yet its batch is in {}",
                            op.index,
                            places.join(", ")
                        ),
                        ops,
                    ));
                }
            }
            Outcome::Acknowledged if own == 0 => {
                let now = state.postgres.get(session).map(|s| incarnation(&s.header));
                let same = now.is_some() && now == op.answer.incarnation;
                let excuse = (!same)
                    .then(|| purged_after(history, session, op.invoked))
                    .flatten();
                if excuse.is_none() {
                    let why = match now {
                        None => format!("{session} is gone and no purge explains it"),
                        Some(_) if same => {
                            format!("{session} is still the incarnation it was acknowledged in")
                        }
                        Some(_) => {
                            format!("{session} is another incarnation and no purge explains it")
                        }
                    };
                    found.push(finding(
                        "lost",
                        format!(
                            "call #{}'s acknowledged batch is not in PostgreSQL: {why}",
                            op.index
                        ),
                        vec![op.index],
                    ));
                }
            }
            _ => {}
        }
    }
}

fn read_answers(
    history: &History,
    state: &FinalState,
    guarantee: ReadGuarantee,
    found: &mut Vec<Finding>,
) {
    let logs: HashMap<&str, (u32, Vec<u8>)> = state
        .postgres
        .iter()
        .map(|(id, s)| (id.as_str(), (incarnation(&s.header), s.log())))
        .collect();
    for r in &history.ops {
        let (Call::Read { session }, Outcome::Acknowledged, Some(served)) =
            (&r.call, &r.answer.outcome, &r.answer.served)
        else {
            continue;
        };
        let read_inc = served.incarnation;
        if let Some((now, log)) = logs.get(session.as_str()) {
            if *now == read_inc && !served.is_prefix_of(log) {
                found.push(finding(
                    "read-not-prefix",
                    format!(
                        "read #{} of {session} ({} bytes) is not a prefix of its final log ({} bytes)",
                        r.index,
                        served.len,
                        log.len()
                    ),
                    vec![r.index],
                ));
            }
        }
        for a in history.ops.iter().filter(|a| {
            a.call.writes_events()
                && a.call.session() == Some(session.as_str())
                && a.answer.outcome == Outcome::Acknowledged
                && a.answer.incarnation == Some(read_inc)
                && a.completed < r.invoked
        }) {
            if served.ops.contains(&a.index) {
                continue;
            }
            if let Some(why) = guarantee.owed(a, r) {
                found.push(finding(
                    "stale-read",
                    format!(
                        "read #{} of {session} on host{} misses call #{}'s batch, {why}",
                        r.index, r.host, a.index
                    ),
                    vec![a.index, r.index],
                ));
            }
        }
        let created = history.ops.iter().filter(|c| {
            matches!(
                c.call,
                Call::Create { .. } | Call::Import { .. } | Call::Fork { .. }
            ) && c.call.session() == Some(session.as_str())
                && c.answer.outcome == Outcome::Acknowledged
                && c.answer.incarnation == Some(read_inc)
        });
        for c in created {
            if let Some((p, why)) = history.ops.iter().find_map(|p| {
                (matches!(p.call, Call::Purge)
                    && p.answer.outcome == Outcome::Acknowledged
                    && p.answer.purged.iter().any(|s| s == session)
                    && c.completed < p.invoked
                    && p.completed < r.invoked)
                    .then(|| guarantee.owed(p, r).map(|why| (p, why)))
                    .flatten()
            }) {
                found.push(finding(
                    "purged-readable",
                    format!(
                        "read #{} on host{} served {session} as created by call #{}, which purge #{} removed, {why}",
                        r.index, r.host, c.index, p.index
                    ),
                    vec![c.index, p.index, r.index],
                ));
            }
        }
    }
}

fn hosts(state: &FinalState, found: &mut Vec<Finding>) {
    for (h, copies) in state.hosts.iter().enumerate() {
        for (id, copy) in copies {
            let Some(s) = state.postgres.get(id) else {
                found.push(
                    finding(
                        "purged-readable",
                        format!(
                        "host{h} serves {id} after catching up; PostgreSQL holds no such session"
                    ),
                        Vec::new(),
                    )
                    .on(id),
                );
                continue;
            };
            let log = s.log();
            if incarnation(&copy.bytes) != incarnation(&s.header) {
                found.push(
                    finding(
                        "host-diverged",
                        format!("host{h}'s {id} is another incarnation than PostgreSQL's"),
                        Vec::new(),
                    )
                    .on(id),
                );
            } else if copy.bytes != log {
                let kind = if log.starts_with(&copy.bytes) {
                    "host-stale"
                } else {
                    "host-diverged"
                };
                found.push(finding(
                    kind,
                    format!(
                        "host{h}'s {id} ({} bytes) after catching up is not PostgreSQL's log ({} bytes)",
                        copy.bytes.len(),
                        log.len()
                    ),
                    Vec::new(),
                )
                .on(id));
            }
            if copy.deleted != s.deleted {
                found.push(
                    finding(
                        "delete-not-propagated",
                        format!(
                            "host{h}'s {id} is {} after catching up; in PostgreSQL it is {}",
                            if copy.deleted {
                                "deleted"
                            } else {
                                "not deleted"
                            },
                            if s.deleted { "deleted" } else { "not deleted" }
                        ),
                        Vec::new(),
                    )
                    .on(id),
                );
            }
        }
    }
    for (h, failures) in state.catch_up_failures.iter().enumerate() {
        for f in failures {
            found.push(finding(
                "catch-up-failed",
                format!("host{h}: {f}"),
                Vec::new(),
            ));
        }
    }
}

fn split_brain(history: &History, found: &mut Vec<Finding>) {
    let mut writers: BTreeMap<(&str, u32, i64), BTreeMap<usize, u64>> = BTreeMap::new();
    for op in &history.ops {
        let (Some(session), Some(inc), Some(epoch)) =
            (op.call.session(), op.answer.incarnation, op.answer.epoch)
        else {
            continue;
        };
        if op.call.writes_events() && op.answer.outcome == Outcome::Acknowledged {
            writers
                .entry((session, inc, epoch))
                .or_default()
                .entry(op.host)
                .or_insert(op.index);
        }
    }
    for ((session, _, epoch), hosts) in writers.into_iter().filter(|(_, h)| h.len() > 1) {
        let names: BTreeSet<String> = hosts.keys().map(|h| format!("host{h}")).collect();
        found.push(finding(
            "split-brain",
            format!(
                "{} acknowledged appends to {session} at epoch {epoch}",
                names.into_iter().collect::<Vec<_>>().join(" and ")
            ),
            hosts.into_values().collect(),
        ));
    }
}

#[cfg(test)]
mod tests;
