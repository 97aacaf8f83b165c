//! Database failover under load: a fleet host appends from several threads to PostgreSQL kept
//! available by Patroni over a 3-member etcd (a leader and a synchronous standby,
//! `synchronous_mode_strict`), while the leader's node is killed (Patroni and PostgreSQL,
//! SIGKILL) twice; the killed node comes back as the standby each time. With a commit patience
//! shorter than a failover, appends are refused as unavailable during each one and appended
//! again. At the end every acknowledged batch is in PostgreSQL exactly once with its bytes, the
//! host's exports equal PostgreSQL's bytes, and `verify` is clean.
//!
//! Needs Debian's patroni, etcd-server and postgresql-15 (installed by `./x test`); without them
//! the test fails under CI (`CI` set) and elsewhere prints a `SKIPPED` line.

use std::time::Duration;

use sessionlog_harness::failover::{run, FailoverOptions};

#[test]
fn acknowledged_batches_survive_failovers_of_the_database_exactly_once() {
    if !crate::fixtures::patroni_installed() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = FailoverOptions {
        cycles: 2,
        threads: 3,
        sessions_per_thread: 3,
        steady: Duration::from_secs(2),
        ..FailoverOptions::default()
    };
    // Each cycle's measurements go to the test's output, which a failure prints whole with the
    // harness's error (it carries the Patroni and etcd logs where the cluster misbehaved).
    let report = run(&opts, &dir.path().join("host"), &mut |cycle, c| {
        eprintln!("cycle {cycle}: {c:?}");
    })
    .unwrap_or_else(|e| panic!("the failover run failed: {e:#}"));
    eprintln!("{report:?}");
    assert_eq!(report.cycles.len(), 2, "{report:?}");
    assert!(
        report.acked_batches > 0,
        "nothing was acknowledged: nothing was tested: {report:?}"
    );
    assert_eq!(
        (report.lost, report.duplicated, report.unknown_acked),
        (0, 0, 0),
        "(lost, duplicated, unknown_acked): {report:?}"
    );
    for cycle in &report.cycles {
        assert!(
            cycle.promoted <= cycle.outage && cycle.outage < Duration::from_secs(120),
            "appends resumed before the standby was promoted, or never: {cycle:?} in {report:?}"
        );
    }
    assert_ne!(
        report.cycles[0].killed, report.cycles[1].killed,
        "the second failover kills the node promoted by the first: {report:?}"
    );
}
