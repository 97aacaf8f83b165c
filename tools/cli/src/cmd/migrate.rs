//! `sessionlog migrate`: one session, or the whole store with progress, to the current format.

use std::io::Write;
use std::process::ExitCode;

use sessionlog_engine::{MigrateOptions, MigrationOutcome, Store};
use sessionlog_tools_common::output::report_line;

/// Migrate `id`, or every session with `all`; exits 1 when a named session is refused, and 0
/// for `--all` (its refusals are reported per session).
pub fn run(
    store: &Store,
    id: Option<&str>,
    all: bool,
    dry_run: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let options = MigrateOptions { dry_run };
    let mut out = std::io::stdout().lock();
    if let (Some(id), false) = (id, all) {
        let report = store.migrate(id, &options)?;
        print(&mut out, &MigrationOutcome::Migrated(report), json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let bar = crate::cmd::session_bar(store.list()?.len() as u64, "migrating");
    let mut printed = Ok(());
    let outcomes = store.migrate_all(&options, &mut |outcome| {
        bar.inc(1);
        if printed.is_ok() {
            printed = bar.suspend(|| print(&mut out, outcome, json));
        }
    })?;
    bar.finish_and_clear();
    printed?;
    let count = |f: fn(&MigrationOutcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    let verb = if dry_run { "would migrate" } else { "migrated" };
    eprintln!(
        "{verb} {}, already current {}, refused {}",
        count(|o| matches!(o, MigrationOutcome::Migrated(_))),
        count(|o| matches!(o, MigrationOutcome::Current(_))),
        count(|o| matches!(o, MigrationOutcome::Refused(..))),
    );
    Ok(ExitCode::SUCCESS)
}

fn print(out: &mut impl Write, outcome: &MigrationOutcome, json: bool) -> std::io::Result<()> {
    match (outcome, json) {
        (outcome, true) => report_line(out, outcome),
        (MigrationOutcome::Migrated(r), false) => writeln!(
            out,
            "{}: v{} → v4, {} → {} events, {} bytes{}",
            r.id,
            r.from_version,
            r.source_events,
            r.events,
            r.bytes,
            if r.published {
                ""
            } else {
                " (dry run: nothing published)"
            }
        ),
        (MigrationOutcome::Current(id), false) => writeln!(out, "{id}: already current"),
        (MigrationOutcome::Refused(id, reason), false) => writeln!(out, "{id}: refused: {reason}"),
    }
}
