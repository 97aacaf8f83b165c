//! The checker on small synthetic histories: a faithful one passes, and each kind of violation
//! is found (and only where it is one).

use super::*;
use crate::nemesis::history::{event_line, header_line, Answer, Fault, Served};

const S: &str = "s0";
/// The read guarantee of the fleet's defaults (a 10 s read bound under a longer lease).
const GUARANTEE: ReadGuarantee = ReadGuarantee {
    bound: Duration::from_secs(10),
};

/// The checker under [`GUARANTEE`].
fn check(history: &History, state: &FinalState) -> Vec<Finding> {
    super::check(history, state, GUARANTEE)
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn header(id: &str, op: u64) -> Vec<u8> {
    format!("{}\n", header_line(id, op)).into_bytes()
}

fn inc(id: &str, op: u64) -> u32 {
    crc32fast::hash(&header(id, op))
}

/// A batch holding one event of each call in `ops`, from `first_seq`.
fn batch_of(ops: &[u64], batch: u64, first_seq: u64) -> FinalBatch {
    let mut bytes = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        bytes.extend_from_slice(event_line(*op, 0, Some(first_seq + i as u64)).as_bytes());
        bytes.push(b'\n');
    }
    FinalBatch {
        batch,
        first_seq,
        events: ops.len() as u64,
        bytes,
        crc_ok: true,
    }
}

/// Session `id` created by call `created`, whose batches hold the calls in `batches`.
fn session(id: &str, created: u64, batches: &[&[u64]]) -> FinalSession {
    let mut seq = 0;
    let batches = batches
        .iter()
        .enumerate()
        .map(|(n, ops)| {
            let b = batch_of(ops, n as u64 + 1, seq);
            seq += ops.len() as u64;
            b
        })
        .collect();
    FinalSession {
        header: header(id, created),
        batches,
        deleted: false,
        forked: false,
    }
}

fn op(index: u64, host: usize, call: Call, (from, to): (f64, f64), answer: Answer) -> Op {
    Op {
        index,
        client: 0,
        host,
        call,
        invoked: secs(from),
        completed: secs(to),
        answer,
    }
}

fn acked(incarnation: Option<u32>, epoch: Option<i64>) -> Answer {
    Answer {
        incarnation,
        epoch,
        ..Answer::plain(Outcome::Acknowledged, "")
    }
}

fn create(index: u64, host: usize, at: (f64, f64)) -> Op {
    op(
        index,
        host,
        Call::Create {
            session: S.into(),
            events: 1,
        },
        at,
        acked(Some(inc(S, index)), Some(1)),
    )
}

fn append(index: u64, host: usize, at: (f64, f64), created: u64, epoch: i64) -> Op {
    op(
        index,
        host,
        Call::Append {
            session: S.into(),
            events: 1,
        },
        at,
        acked(Some(inc(S, created)), Some(epoch)),
    )
}

fn read(index: u64, host: usize, at: (f64, f64), bytes: Vec<u8>) -> Op {
    op(
        index,
        host,
        Call::Read { session: S.into() },
        at,
        Answer {
            served: Some(Served::of(&bytes)),
            ..Answer::plain(Outcome::Acknowledged, "")
        },
    )
}

fn purge(index: u64, at: (f64, f64), purged: &[&str]) -> Op {
    op(
        index,
        0,
        Call::Purge,
        at,
        Answer {
            purged: purged.iter().map(|s| s.to_string()).collect(),
            ..Answer::plain(Outcome::Acknowledged, "")
        },
    )
}

fn history(ops: Vec<Op>) -> History {
    History {
        ops,
        faults: vec![Fault {
            kind: "pause",
            target: "host1".into(),
            detail: String::new(),
            at: secs(0.5),
            healed: secs(1.0),
        }],
        exits: Vec::new(),
    }
}

fn state(sessions: Vec<(&str, FinalSession)>) -> FinalState {
    FinalState {
        postgres: sessions
            .into_iter()
            .map(|(id, s)| (id.to_owned(), s))
            .collect(),
        hosts: vec![BTreeMap::new(); 2],
        catch_up_failures: vec![Vec::new(); 2],
    }
}

fn kinds(found: &[Finding]) -> Vec<&'static str> {
    found.iter().map(|f| f.kind).collect()
}

#[test]
fn a_faithful_history_passes() {
    let s = session(S, 1, &[&[1], &[2], &[3]]);
    let prefix = {
        let mut p = s.header.clone();
        p.extend_from_slice(&s.batches[0].bytes);
        p.extend_from_slice(&s.batches[1].bytes);
        p
    };
    let h = history(vec![
        create(1, 0, (0.0, 0.1)),
        append(2, 0, (0.2, 0.3), 1, 1),
        read(4, 1, (0.35, 0.4), prefix),
        // Taken over by host1 at epoch 2: its appends are another epoch's.
        op(
            5,
            1,
            Call::Acquire {
                session: S.into(),
                force: true,
            },
            (0.5, 0.6),
            acked(Some(inc(S, 1)), Some(2)),
        ),
        append(3, 1, (0.7, 0.8), 1, 2),
        // Refused and absent; unknown and absent: both fine.
        op(
            6,
            0,
            Call::Append {
                session: S.into(),
                events: 1,
            },
            (0.9, 1.0),
            Answer::plain(
                Outcome::Refused {
                    code: "SESSIONLOG_FENCED".into(),
                },
                "fenced",
            ),
        ),
        op(
            7,
            1,
            Call::Append {
                session: S.into(),
                events: 1,
            },
            (0.9, 1.0),
            Answer::plain(Outcome::Unknown, "no answer"),
        ),
    ]);
    let mut st = state(vec![(S, s.clone())]);
    st.hosts[0].insert(
        S.into(),
        LocalCopy {
            bytes: s.log(),
            deleted: false,
        },
    );
    let found = check(&h, &st);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_lost_acknowledged_batch_is_found_unless_a_purge_explains_it() {
    let h = history(vec![
        create(1, 0, (0.0, 0.1)),
        append(2, 0, (0.2, 0.3), 1, 1),
    ]);
    let found = check(&h, &state(vec![(S, session(S, 1, &[&[1]]))]));
    assert_eq!(kinds(&found), ["lost"], "{found:?}");
    assert_eq!(found[0].ops, [2]);

    // The session is gone: lost, unless a purge naming it ended after the batch was sent.
    let found = check(&h, &state(vec![]));
    assert_eq!(kinds(&found), ["lost", "lost"], "{found:?}");
    let mut purged = h.clone();
    purged.ops.push(purge(3, (0.4, 0.5), &[S]));
    assert!(check(&purged, &state(vec![])).is_empty());
    // A purge that ended before the batch was sent explains nothing (it overlapped the
    // creation, which it may have removed).
    let mut early = history(vec![purge(3, (0.0, 0.05), &[S])]);
    early.ops.extend(h.ops.clone());
    let found = check(&early, &state(vec![]));
    assert_eq!(kinds(&found), ["lost"], "{found:?}");
    assert_eq!(found[0].ops, [2]);
}

#[test]
fn a_batch_stored_twice_or_in_another_session_is_found() {
    let h = history(vec![
        create(1, 0, (0.0, 0.1)),
        append(2, 0, (0.2, 0.3), 1, 1),
    ]);
    let found = check(&h, &state(vec![(S, session(S, 1, &[&[1], &[2], &[2]]))]));
    assert_eq!(kinds(&found), ["duplicated"], "{found:?}");

    let mut other = session("s1", 9, &[&[2]]);
    let found = check(
        &h,
        &state(vec![
            (S, session(S, 1, &[&[1], &[2]])),
            ("s1", other.clone()),
        ]),
    );
    assert_eq!(kinds(&found), ["misplaced"], "{found:?}");
    // A fork's seed holds its parent's events: allowed.
    other.forked = true;
    let found = check(
        &h,
        &state(vec![(S, session(S, 1, &[&[1], &[2]])), ("s1", other)]),
    );
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_batch_refused_as_not_written_is_found_wherever_it_shows() {
    let refused = op(
        2,
        0,
        Call::Append {
            session: S.into(),
            events: 1,
        },
        (0.2, 0.3),
        Answer::plain(
            Outcome::Refused {
                code: "SESSIONLOG_FENCED".into(),
            },
            "fenced: nothing was written",
        ),
    );
    let h = history(vec![create(1, 0, (0.0, 0.1)), refused.clone()]);
    let found = check(&h, &state(vec![(S, session(S, 1, &[&[1], &[2]]))]));
    assert_eq!(kinds(&found), ["refused-but-written"], "{found:?}");
    assert!(found[0].detail.contains("PostgreSQL's s0"), "{found:?}");

    // Only in a host's store, or only in a read.
    let clean = session(S, 1, &[&[1]]);
    let mut st = state(vec![(S, clean.clone())]);
    let mut with_2 = clean.log();
    with_2.extend_from_slice(&batch_of(&[2], 2, 1).bytes);
    st.hosts[1].insert(
        S.into(),
        LocalCopy {
            bytes: with_2.clone(),
            deleted: false,
        },
    );
    let found = check(&h, &st);
    assert!(kinds(&found).contains(&"refused-but-written"), "{found:?}");
    let mut h2 = h.clone();
    h2.ops.push(read(3, 1, (0.4, 0.5), with_2));
    let found = check(&h2, &state(vec![(S, clean)]));
    let written: Vec<_> = found
        .iter()
        .filter(|f| f.kind == "refused-but-written")
        .collect();
    assert_eq!(written.len(), 1, "{found:?}");
    assert_eq!(written[0].ops, [2, 3]);
}

#[test]
fn a_read_that_is_no_prefix_or_stale_is_found() {
    let s = session(S, 1, &[&[1], &[2]]);
    let h = history(vec![
        create(1, 0, (0.0, 0.1)),
        append(2, 0, (0.2, 0.3), 1, 1),
    ]);
    // Not a prefix: batch 2's bytes with a changed seq.
    let mut wrong = s.header.clone();
    wrong.extend_from_slice(&batch_of(&[1], 1, 5).bytes);
    let mut bad = h.clone();
    bad.ops.push(read(3, 1, (0.05, 0.06), wrong));
    let found = check(&bad, &state(vec![(S, s.clone())]));
    assert_eq!(kinds(&found), ["read-not-prefix"], "{found:?}");
    // A batch the final log does not hold (an append answered unknown that never landed).
    let mut extra = s.log();
    extra.extend_from_slice(&batch_of(&[9], 3, 2).bytes);
    let mut beyond = h.clone();
    beyond.ops.push(read(3, 1, (0.4, 0.5), extra));
    let found = check(&beyond, &state(vec![(S, s.clone())]));
    assert_eq!(kinds(&found), ["read-not-prefix"], "{found:?}");

    // Without call 2's batch: on host1, sent 0.1 s after it was acknowledged on host0 (within
    // the read bound: host1 may still trust a copy it held); sent while it was in flight.
    let mut old = s.header.clone();
    old.extend_from_slice(&s.batches[0].bytes);
    let reading = |host: usize, at: (f64, f64)| {
        let mut h = h.clone();
        h.ops.push(read(3, host, at, old.clone()));
        check(&h, &state(vec![(S, s.clone())]))
    };
    for at in [(0.4, 0.5), (0.25, 0.5), (10.35, 10.4)] {
        let found = reading(1, at);
        assert!(found.is_empty(), "read sent at {at:?}: {found:?}");
    }
    // Sent past the bound and its clock margin (11 s, and just past 10.4 s), or on the host
    // that acknowledged it (read-your-writes, however soon): stale.
    for (host, at) in [(1, (11.3, 11.4)), (1, (10.45, 10.5)), (0, (0.4, 0.5))] {
        let found = reading(host, at);
        assert_eq!(
            kinds(&found),
            ["stale-read"],
            "read sent at {at:?}: {found:?}"
        );
        assert_eq!(found[0].ops, [2, 3]);
    }
    let eleven = reading(1, (11.3, 11.4));
    assert!(
        eleven[0].detail.contains("11.000 s before") && eleven[0].detail.contains("read bound"),
        "{}",
        eleven[0].detail
    );
    // The bound is the shorter of the read bound and the lease.
    let mut past_lease = h.clone();
    past_lease.ops.push(read(3, 1, (3.5, 3.6), old));
    let short = ReadGuarantee::of(Duration::from_secs(10), Duration::from_secs(3));
    let found = super::check(&past_lease, &state(vec![(S, s)]), short);
    assert_eq!(kinds(&found), ["stale-read"], "{found:?}");
}

#[test]
fn a_purged_session_served_after_the_purge_is_found() {
    let s = session(S, 1, &[&[1]]);
    let h = history(vec![
        create(1, 0, (0.0, 0.1)),
        purge(2, (0.2, 0.3), &[S]),
        read(3, 1, (0.4, 0.5), s.log()),
    ]);
    // On the host that purged it (host0), however soon: read-your-writes.
    let reading = |host: usize, at: (f64, f64)| {
        let mut h = h.clone();
        h.ops[2] = read(3, host, at, s.log());
        check(&h, &state(vec![]))
    };
    let found = reading(0, (0.4, 0.5));
    assert_eq!(kinds(&found), ["purged-readable"], "{found:?}");
    assert_eq!(found[0].ops, [1, 2, 3]);
    assert!(found[0].detail.contains("read-your-writes"), "{found:?}");
    // Elsewhere, past the read bound and its clock margin after the purge was acknowledged.
    for at in [(10.45, 10.5), (11.3, 11.4)] {
        let found = reading(1, at);
        assert_eq!(kinds(&found), ["purged-readable"], "{at:?}: {found:?}");
        assert!(found[0].detail.contains("read bound"), "{found:?}");
    }
    // Elsewhere within the bound (a host whose hold was confirmed before the purge may serve
    // its copy until the bound after that), or sent before the purge ended: allowed.
    for (host, at) in [(1, (0.4, 0.5)), (1, (10.35, 10.4)), (0, (0.25, 0.5))] {
        let found = reading(host, at);
        assert!(found.is_empty(), "host{host} at {at:?}: {found:?}");
    }
    let mut early = h.clone();
    early.ops[2] = read(3, 1, (0.25, 0.5), s.log());

    // A host that caught up still holds it.
    let mut st = state(vec![]);
    st.hosts[1].insert(
        S.into(),
        LocalCopy {
            bytes: s.log(),
            deleted: true,
        },
    );
    assert_eq!(kinds(&check(&early, &st)), ["purged-readable"]);
}

#[test]
fn a_host_out_of_step_after_catching_up_is_found() {
    let s = session(S, 1, &[&[1], &[2]]);
    let h = history(vec![
        create(1, 0, (0.0, 0.1)),
        append(2, 0, (0.2, 0.3), 1, 1),
    ]);
    let copy = |bytes: Vec<u8>, deleted: bool| LocalCopy { bytes, deleted };
    let mut st = state(vec![(S, s.clone())]);
    // A prefix: stale. Another incarnation's log under the id: diverged. Deleted here only.
    let mut prefix = s.header.clone();
    prefix.extend_from_slice(&s.batches[0].bytes);
    st.hosts[0].insert(S.into(), copy(prefix, false));
    let mut mixed = header(S, 40);
    mixed.extend_from_slice(&s.batches[0].bytes);
    st.hosts[1].insert(S.into(), copy(mixed, true));
    st.catch_up_failures[1].push("s0: PostgreSQL unreachable".into());
    let found = check(&h, &st);
    assert_eq!(
        kinds(&found),
        [
            "host-stale",
            "host-diverged",
            "delete-not-propagated",
            "catch-up-failed"
        ],
        "{found:?}"
    );
}

#[test]
fn two_hosts_acknowledging_one_epoch_is_split_brain() {
    let s = session(S, 1, &[&[1], &[2], &[3]]);
    let h = history(vec![
        create(1, 0, (0.0, 0.1)),
        append(2, 0, (0.2, 0.3), 1, 1),
        append(3, 1, (0.2, 0.3), 1, 1),
    ]);
    let found = check(&h, &state(vec![(S, s.clone())]));
    assert_eq!(kinds(&found), ["split-brain"], "{found:?}");
    assert_eq!(found[0].ops, [1, 3]);
    // Another incarnation (recreated after a purge) at epoch 1 is not the same epoch.
    let mut h2 = h;
    h2.ops[2].answer.incarnation = Some(inc(S, 99));
    let found = check(&h2, &state(vec![(S, s)]));
    assert!(!kinds(&found).contains(&"split-brain"), "{found:?}");
}

#[test]
fn broken_rows_in_postgres_are_found() {
    let mut s = session(S, 1, &[&[1], &[2], &[3]]);
    s.batches[1].crc_ok = false;
    s.batches[2].first_seq = 7;
    s.batches.remove(0);
    let h = history(vec![]);
    let found = check(&h, &state(vec![(S, s)]));
    assert_eq!(
        kinds(&found),
        ["postgres-integrity", "postgres-integrity"],
        "{found:?}"
    );
}
