//! The fleet under a nemesis for 100 seconds (about two minutes of wall time with the cluster's
//! start and the final check; longer runs are `sessionlog-harness stress --fleet-nemesis`): three
//! host processes over PostgreSQL kept available by Patroni (a leader and a synchronous standby
//! over a 3-member etcd), each host behind its own blackholing proxy, while seeded clients create,
//! append, fork, import, delete, undelete, purge, acquire, release and read six colliding ids and
//! the nemesis pauses, kills and cuts off hosts and kills the database's leader. The checker then
//! finds nothing: every acknowledged batch in PostgreSQL exactly once (or its session purged
//! since), every batch refused as not written absent, every read a prefix of its final log within
//! the fleet's read guarantee (read-your-writes on the host that wrote, at most the read bound
//! behind elsewhere, purges alike), no purged session served past that, every host's store
//! PostgreSQL's after catching up, no two hosts acknowledging appends at one epoch.
//!
//! Needs Debian's patroni, etcd-server and postgresql-15 (installed by `./x test`) and the built
//! harness binary; without the servers the test fails under CI (`CI` set) and elsewhere prints a
//! `SKIPPED` line.

use std::time::Duration;

use sessionlog_harness::nemesis::{run, NemesisOptions, KINDS};

use crate::fixtures::built_binary;

#[test]
fn the_fleet_keeps_its_word_under_a_nemesis() {
    if !crate::fixtures::patroni_installed() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = NemesisOptions {
        duration: Duration::from_secs(100),
        seed: 58,
        ..NemesisOptions::default()
    };
    let report = run(&opts, &built_binary("sessionlog-harness"), dir.path())
        .unwrap_or_else(|e| panic!("{e:#}"));
    let mut text = String::new();
    for f in &report.findings {
        text.push_str(&format!("{}: {}\n", f.kind, f.detail));
        for line in report.excerpt(f, 12) {
            text.push_str(&format!("    {line}\n"));
        }
    }
    assert!(report.findings.is_empty(), "seed {}:\n{text}", opts.seed);
    let answers = report.answers();
    assert!(
        answers.get("acknowledged").copied().unwrap_or(0) > 100,
        "too little was acknowledged to test anything: {answers:?}"
    );
    let operations = report.operations();
    for (kind, _) in KINDS {
        assert!(
            operations.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} in {operations:?}"
        );
    }
    let faults = report.faults();
    for kind in ["pause", "kill", "blackhole", "kill-leader"] {
        assert!(
            faults.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} in {faults:?}"
        );
    }
}
