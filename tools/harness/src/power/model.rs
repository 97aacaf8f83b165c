//! What the parent expects of each session after a power cut, and the check of a reopened
//! store against it.
//!
//! Each session keeps the states the store acknowledged, oldest first: the first is the
//! baseline (what the previous check found), each acknowledged op adds one. Ops intended but
//! not acknowledged when the power went add states the store may also show (applied, never
//! acknowledged): the known one (a live batch, an import's file) or "any" (an admin op whose
//! result was not recorded yet).
//!
//! After a cut a session must show its last acknowledged state, or a pending one; a state an
//! older acknowledgement left counts the acknowledged writes after it as lost; a live session
//! whose next seq cuts a batch, a pending group commit applied to some of its sessions but not
//! others, or an import that is neither absent nor its exact file, is half-applied; anything
//! else (a state no op ever left, a write lost although a `Store::sync` that returned covered
//! it, `verify` problems, a session nobody wrote) is a problem.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use sessionlog_engine::{Options, SessionSummary, Store};

use super::image::Image;
use super::journal::{Intent, OpRecord};
use super::worker::is_admin_id;
use super::{feed_for, live_k, PowerOptions};
use crate::gen::SessionFeed;
use crate::stress::{boundary, check_against_feed};

/// A session state the store may show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Not stored.
    Absent,
    /// A live session holding its feed's first `n` batches.
    Live(usize),
    /// An admin session's image.
    Image(Arc<Image>),
}

impl State {
    fn from_image(image: Image) -> State {
        match image {
            Image::Absent => State::Absent,
            other => State::Image(Arc::new(other)),
        }
    }
}

/// One session's expectations for this cycle.
#[derive(Clone, Debug)]
struct Tracked {
    /// Acknowledged states, oldest first; `[0]` is the baseline.
    acked: Vec<State>,
    /// States an unacknowledged op may have left; `None`: not known in advance.
    pending: Vec<Option<State>>,
    /// Index in `acked` of the newest state a returned `Store::sync` made durable: it and
    /// everything after it must survive under any durability.
    synced: Option<usize>,
}

impl Default for Tracked {
    fn default() -> Self {
        Tracked {
            acked: vec![State::Absent],
            pending: Vec::new(),
            synced: None,
        }
    }
}

/// Live feeds by index, generated once per run.
pub type FeedCache = HashMap<u64, (SessionFeed, String)>;

/// What one check found.
#[derive(Clone, Debug, Default)]
pub struct CycleCheck {
    /// Session writes acknowledged this cycle (a group commit counts each session's batch).
    pub acknowledged: u64,
    /// Acknowledged session writes the store no longer shows.
    pub lost: u64,
    /// Writes found partly applied.
    pub half_applied: u64,
    /// Everything else wrong, one line each (half-applied writes are listed here too).
    pub problems: Vec<String>,
    /// Admin ops the store refused (acknowledged with the store unchanged).
    pub rejected: u64,
    /// Sessions compared.
    pub sessions: u64,
}

/// The expectations of one store.
#[derive(Default)]
pub struct Model {
    sessions: BTreeMap<String, Tracked>,
    /// Group commits in flight at the cut: each session with the batch count it would reach.
    pending_groups: Vec<Vec<(String, usize)>>,
}

impl Model {
    /// Fold one cycle's journal into the expectations; returns (acknowledged writes, rejected
    /// admin ops).
    pub fn apply(
        &mut self,
        ops: &[OpRecord],
        feeds: &mut FeedCache,
        opts: &PowerOptions,
    ) -> anyhow::Result<(u64, u64)> {
        let (mut acknowledged, mut rejected) = (0, 0);
        for op in ops {
            let acked = op.ack.is_some();
            let synced = op.synced;
            match &op.intent {
                Intent::Append(items) => {
                    let mut group = Vec::new();
                    for a in items {
                        let (feed, _) = live_feed(feeds, &a.id, opts)?;
                        let Some(n) = boundary(feed, a.first_seq + a.count) else {
                            anyhow::bail!("{}: journal batch ends off the feed's batches", a.id);
                        };
                        self.expect(&a.id, acked, synced, Some(State::Live(n)));
                        group.push((a.id.clone(), n));
                    }
                    if acked {
                        acknowledged += items.len() as u64;
                    } else if group.len() > 1 {
                        self.pending_groups.push(group);
                    }
                }
                Intent::Create { id } => {
                    self.expect(id, acked, synced, Some(State::Live(0)));
                    acknowledged += u64::from(acked);
                }
                Intent::Admin { ids, .. } => match &op.ack {
                    Some((ok, images)) => {
                        rejected += u64::from(!ok);
                        for (id, path) in images {
                            let state = State::from_image(Image::load(path)?);
                            self.expect(id, true, synced, Some(state));
                            acknowledged += 1;
                        }
                    }
                    None => {
                        for (id, known) in ids {
                            let state = match known {
                                Some(p) => Some(State::from_image(Image::load(p)?)),
                                None => None,
                            };
                            self.expect(id, false, false, state);
                        }
                    }
                },
            }
        }
        Ok((acknowledged, rejected))
    }

    fn expect(&mut self, id: &str, acked: bool, synced: bool, state: Option<State>) {
        let t = self.sessions.entry(id.to_owned()).or_default();
        match (acked, state) {
            (true, Some(s)) => {
                t.acked.push(s);
                if synced {
                    t.synced = Some(t.acked.len() - 1);
                }
            }
            (true, None) => {}
            (false, s) => t.pending.push(s),
        }
    }

    /// Reopen the store at `db` without WAL recycling (a later process may; the next cycle's
    /// child reopens it with the run's options), compare every session with its expectations,
    /// and make what it shows the next cycle's baseline.
    pub fn check(
        &mut self,
        db: &Path,
        feeds: &mut FeedCache,
        opts: &PowerOptions,
        report: &mut CycleCheck,
    ) -> anyhow::Result<()> {
        let plain = Options {
            wal_recycling: false,
            ..Options::default()
        };
        let store = Store::open(db, plain)?;
        let listed: BTreeMap<String, SessionSummary> = store
            .list()?
            .into_iter()
            .map(|s| (s.id.clone(), s))
            .collect();
        let ids: BTreeSet<String> = self.sessions.keys().chain(listed.keys()).cloned().collect();
        let mut seen: BTreeMap<String, State> = BTreeMap::new();
        for id in ids {
            report.sessions += 1;
            let observed = match listed.get(&id) {
                None => Some(State::Absent),
                Some(s) => observe(&store, s, feeds, opts, report)?,
            };
            let Some(observed) = observed else { continue };
            let t = self.sessions.get(&id).cloned().unwrap_or_default();
            judge(&id, &t, &observed, report);
            seen.insert(id, observed);
        }
        for group in std::mem::take(&mut self.pending_groups) {
            let applied = group
                .iter()
                .filter(|(id, n)| seen.get(id) == Some(&State::Live(*n)))
                .count();
            if applied != 0 && applied != group.len() {
                report.half_applied += 1;
                report.problems.push(format!(
                    "a group commit in flight at the cut is applied to {applied} of its {} \
                     sessions: {group:?}",
                    group.len()
                ));
            }
        }
        report
            .problems
            .extend(crate::stress::verify_problems(&store)?);
        self.sessions = seen
            .into_iter()
            .filter(|(_, s)| *s != State::Absent)
            .map(|(id, s)| {
                (
                    id,
                    Tracked {
                        acked: vec![s],
                        ..Tracked::default()
                    },
                )
            })
            .collect();
        Ok(())
    }
}

/// Compare what a session shows with what was acknowledged (see the module doc).
fn judge(id: &str, t: &Tracked, observed: &State, report: &mut CycleCheck) {
    if t.acked.last() == Some(observed)
        || t.pending
            .iter()
            .any(|p| p.as_ref().is_none_or(|p| p == observed))
    {
        return;
    }
    if let Some(i) = t.acked.iter().rposition(|s| s == observed) {
        report.lost += (t.acked.len() - 1 - i) as u64;
        if t.synced.is_some_and(|d| i < d) {
            report.problems.push(format!(
                "{id}: shows {}, older than a write acknowledged and then made durable by \
                 Store::sync",
                describe(observed)
            ));
        }
        return;
    }
    let what = describe(observed);
    if t.pending.is_empty() {
        report.problems.push(format!(
            "{id}: shows {what}, a state no acknowledged write left"
        ));
    } else {
        report.half_applied += 1;
        report.problems.push(format!(
            "{id}: shows {what}: neither its last acknowledged state nor the write in flight"
        ));
    }
}

fn describe(s: &State) -> String {
    match s {
        State::Absent => "nothing".into(),
        State::Live(n) => format!("{n} batches"),
        State::Image(i) => match i.as_ref() {
            Image::Absent => "nothing".into(),
            Image::Present { deleted, bytes } => format!(
                "{} bytes{}",
                bytes.len(),
                if *deleted { " (deleted)" } else { "" }
            ),
        },
    }
}

/// The state a stored session shows, or `None` when it is not a state at all (reported).
fn observe(
    store: &Store,
    s: &SessionSummary,
    feeds: &mut FeedCache,
    opts: &PowerOptions,
    report: &mut CycleCheck,
) -> anyhow::Result<Option<State>> {
    if is_admin_id(&s.id) {
        return Ok(Some(State::from_image(Image::listed(store, s)?)));
    }
    if live_k(&s.id).is_none() {
        report
            .problems
            .push(format!("{}: a session no writer created", s.id));
        return Ok(None);
    }
    let (feed, header) = live_feed(feeds, &s.id, opts)?;
    let Some(n) = boundary(feed, s.events) else {
        report.half_applied += 1;
        report.problems.push(format!(
            "{}: next seq {} cuts a batch (part of a batch stored)",
            s.id, s.events
        ));
        return Ok(None);
    };
    check_against_feed(
        store,
        &s.id,
        s.events,
        (feed, header),
        n,
        &mut report.problems,
    )?;
    if s.deleted_at_ms.is_some() {
        report
            .problems
            .push(format!("{}: a live session is marked deleted", s.id));
    }
    Ok(Some(State::Live(n)))
}

fn live_feed<'f>(
    feeds: &'f mut FeedCache,
    id: &str,
    opts: &PowerOptions,
) -> anyhow::Result<&'f (SessionFeed, String)> {
    let k = live_k(id).ok_or_else(|| anyhow::anyhow!("{id} is not a live session id"))?;
    Ok(feeds.entry(k).or_insert_with(|| feed_for(k, opts)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracked(acked: Vec<State>, pending: Vec<Option<State>>) -> Tracked {
        Tracked {
            acked,
            pending,
            synced: None,
        }
    }

    #[test]
    fn the_last_acknowledged_or_a_pending_state_passes() {
        let mut r = CycleCheck::default();
        let t = tracked(
            vec![State::Live(0), State::Live(2)],
            vec![Some(State::Live(3))],
        );
        judge("s", &t, &State::Live(2), &mut r);
        judge("s", &t, &State::Live(3), &mut r);
        assert_eq!((r.lost, r.half_applied, r.problems.len()), (0, 0, 0));
    }

    #[test]
    fn an_older_acknowledged_state_counts_the_writes_after_it_as_lost() {
        let mut r = CycleCheck::default();
        let t = tracked(
            vec![
                State::Absent,
                State::Live(0),
                State::Live(1),
                State::Live(4),
            ],
            vec![],
        );
        judge("s", &t, &State::Absent, &mut r);
        assert_eq!(r.lost, 3);
        assert!(r.problems.is_empty(), "buffered writes may be lost");
        let synced = Tracked {
            synced: Some(2),
            ..t
        };
        judge("s", &synced, &State::Live(1), &mut r);
        assert_eq!(r.lost, 4);
        assert!(r.problems.is_empty(), "the synced state is there");
        judge("s", &synced, &State::Live(0), &mut r);
        assert_eq!((r.lost, r.problems.len()), (6, 1), "a synced write is gone");
    }

    #[test]
    fn a_state_nobody_left_is_a_problem_or_half_applied() {
        let mut r = CycleCheck::default();
        judge(
            "s",
            &tracked(vec![State::Live(2)], vec![]),
            &State::Live(1),
            &mut r,
        );
        assert_eq!((r.lost, r.half_applied, r.problems.len()), (0, 0, 1));
        let import = State::from_image(Image::exported(b"x\n".to_vec()));
        let torn = State::from_image(Image::exported(b"x".to_vec()));
        judge(
            "i",
            &tracked(vec![State::Absent], vec![Some(import)]),
            &torn,
            &mut r,
        );
        assert_eq!((r.half_applied, r.problems.len()), (1, 2));
    }

    #[test]
    fn an_admin_op_of_unknown_outcome_accepts_what_the_store_shows() {
        let mut r = CycleCheck::default();
        let before = State::from_image(Image::exported(b"a\n".to_vec()));
        let after = State::from_image(Image::exported(b"a\nb\n".to_vec()));
        judge("f", &tracked(vec![before], vec![None]), &after, &mut r);
        assert_eq!((r.lost, r.half_applied, r.problems.len()), (0, 0, 0));
    }
}
