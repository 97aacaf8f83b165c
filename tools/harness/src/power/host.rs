//! Power cuts under an outside host: a process of any language (DSH's Node host on the addon,
//! say) that opens the store at the directory it is given and prints `ack <session> <events>`
//! on standard output once that many of the session's events are acknowledged durable.
//!
//! Each cycle runs the host on the LazyFS mount until a random moment after its first ack, then
//! freezes it (every thread stopped), cuts the power (every byte not fsynced is gone), kills it
//! and reads every ack it had printed (all printed before the cut). The store is then reopened
//! here: every session ever acknowledged must hold at least its acknowledged events, seqs
//! contiguous from 0, and `verify` must find nothing. The store carries over from cycle to
//! cycle, so later cycles also check that earlier cuts left it sound to build on.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sessionlog_engine::{Options, Store};

use super::{freeze_for_cut, lazyfs, Running, CHECK_LIMIT, CUT_LIMIT, MAX_LAZYFS_RESTARTS};
use crate::stress::Rng;

/// Totals of a host power-loss run.
#[derive(Clone, Debug, Default)]
pub struct HostReport {
    /// Cuts made and checked.
    pub cycles: u64,
    /// `ack` lines read (acknowledged flushes) over all cycles.
    pub acknowledged: u64,
    /// Each session whose stored events fell short of its acknowledged count, after each cut
    /// (a session short after two cuts is listed twice), prefixed with its cycle.
    pub short: Vec<String>,
    /// Cycles with at least one such session.
    pub cycles_with_loss: u64,
    /// Sessions checked, summed over cycles.
    pub session_checks: u64,
    /// Everything found wrong besides losses, one line each, prefixed with its cycle.
    pub problems: Vec<String>,
    /// Times LazyFS itself died or stopped answering (a fault of the test tool): that cycle is
    /// void (its acks unread), LazyFS is mounted again over the same store, which is then as
    /// after a cut (LazyFS's unsynced bytes die with it), and the run goes on.
    pub lazyfs_restarts: u64,
}

/// What one cycle found.
#[derive(Clone, Debug, Default)]
pub struct HostCycle {
    /// `ack` lines the host printed before its cut.
    pub acknowledged: u64,
    /// Sessions checked (every one acknowledged so far).
    pub sessions: u64,
    /// Of them, those holding fewer events than acknowledged, one line each.
    pub short: Vec<String>,
    /// Everything else found wrong.
    pub problems: Vec<String>,
}

/// The host command for `cycle`: `args` with `{db}` replaced by the store's path, `{cycle}` by
/// the cycle number (for fresh session ids) and `{durability}` by `durability`.
fn host_command(
    args: &[String],
    db: &Path,
    cycle: u64,
    durability: &str,
) -> anyhow::Result<Command> {
    let Some((program, rest)) = args.split_first() else {
        bail!("no host command given");
    };
    let fill = |a: &String| {
        a.replace("{db}", &db.to_string_lossy())
            .replace("{cycle}", &cycle.to_string())
            .replace("{durability}", durability)
    };
    let mut command = Command::new(fill(program));
    command.args(rest.iter().map(fill));
    Ok(command)
}

/// Parse one line of the host's output: `ack <session> <events>`; other lines are ignored.
fn parse_ack(line: &str) -> Option<(String, u64)> {
    let mut fields = line.split(' ');
    match (fields.next(), fields.next(), fields.next(), fields.next()) {
        (Some("ack"), Some(id), Some(events), None) => Some((id.to_owned(), events.parse().ok()?)),
        _ => None,
    }
}

/// A run under a host.
#[derive(Clone, Debug)]
pub struct HostRun<'a> {
    /// The host command (see [`host_command`]).
    pub host: &'a [String],
    /// Cuts to make.
    pub cycles: u64,
    /// Cut-timing seed.
    pub seed: u64,
    /// The cut comes this many ms after the host's first ack (a random moment within).
    pub cut_window_ms: (u64, u64),
    /// What `{durability}` becomes (`sync` or `buffered`).
    pub durability: &'a str,
}

/// The power-loss loop under a host: mount LazyFS (`lazyfs` is its binary) under `work`, then
/// `run.cycles` times run the host on the store `<mount>/db`, cut the power under it and check
/// the store. The mount is removed at the end, also on error.
pub fn host_power_loop(
    work: &Path,
    lazyfs: &Path,
    run: &HostRun<'_>,
    progress: &mut dyn FnMut(u64, &HostCycle),
) -> anyhow::Result<HostReport> {
    let mut mount = lazyfs::Mount::start(lazyfs, &work.join("lazyfs"))?;
    let db = mount.path().join("db");
    let mut rng = Rng::new(run.seed ^ 0x686f_7374);
    let mut acked: BTreeMap<String, u64> = BTreeMap::new();
    let mut report = HostReport::default();
    // `attempt` numbers every cycle started (and names its sessions), `report.cycles` those
    // checked; they differ only when LazyFS itself fails.
    let mut attempt = 0;
    while report.cycles < run.cycles {
        let cycle = attempt;
        attempt += 1;
        let command = host_command(run.host, &db, cycle, run.durability)?;
        let read = match cut_under(command, &mut mount, &mut rng, run.cut_window_ms, work) {
            Ok(read) => read,
            Err(e) if !mount.is_alive() && report.lazyfs_restarts < MAX_LAZYFS_RESTARTS => {
                eprintln!(
                    "power-loss: LazyFS died or stopped answering during cycle {cycle} ({e:#}); \
                     the cycle is void and LazyFS is mounted again over the same store"
                );
                report.lazyfs_restarts += 1;
                drop(mount);
                mount = lazyfs::Mount::start(lazyfs, &work.join("lazyfs"))?;
                continue;
            }
            Err(e) => return Err(e.context(format!("cycle {cycle}"))),
        };
        let mut c = HostCycle {
            acknowledged: read.len() as u64,
            ..HostCycle::default()
        };
        for (id, events) in read {
            let known = acked.entry(id).or_default();
            *known = (*known).max(events);
        }
        mount
            .guarded(&format!("the check after cut {cycle}"), CHECK_LIMIT, || {
                check(&db, &acked, &mut c)
            })?
            .with_context(|| format!("checking after cut {cycle}"))?;
        report.cycles += 1;
        report.acknowledged += c.acknowledged;
        report.cycles_with_loss += u64::from(!c.short.is_empty());
        report.session_checks += c.sessions;
        let in_cycle = |p: &String| format!("cycle {cycle}: {p}");
        report.short.extend(c.short.iter().map(in_cycle));
        report.problems.extend(c.problems.iter().map(in_cycle));
        progress(cycle, &c);
    }
    Ok(report)
}

/// Run the host until a random moment in `window` ms after its first ack, freeze it, cut the
/// power, kill it; return every ack it printed.
fn cut_under(
    mut command: Command,
    mount: &mut lazyfs::Mount,
    rng: &mut Rng,
    (lo, hi): (u64, u64),
    work: &Path,
) -> anyhow::Result<Vec<(String, u64)>> {
    let stderr_path = work.join("host.stderr");
    // Made before the child, so it also guards the child's reaping on every error path.
    let cut_guard = mount.watchdog("the host's run and cut", CUT_LIMIT);
    let mut child = Running(
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path)?)
            .spawn()
            .context("starting the host")?,
    );
    let stdout = child
        .0
        .stdout
        .take()
        .context("the host's standard output")?;
    let (tx, rx) = mpsc::channel();
    // Reads until the host's end of the pipe closes (it is killed below).
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(ack) = parse_ack(&line) {
                if tx.send(ack).is_err() {
                    break;
                }
            }
        }
    });
    // A host that stops by itself is a broken harness run, not a cut: say why, with its stderr.
    let exited = |child: &mut Running| -> anyhow::Result<()> {
        if let Some(status) = child.0.try_wait()? {
            let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            bail!("the host exited by itself ({status}): {err}");
        }
        Ok(())
    };
    let mut acks = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while acks.is_empty() {
        exited(&mut child)?;
        if Instant::now() > deadline {
            bail!("the host acknowledged nothing within 60 s");
        }
        if let Ok(ack) = rx.recv_timeout(Duration::from_millis(20)) {
            acks.push(ack);
        }
    }
    std::thread::sleep(Duration::from_millis(rng.range(lo, hi.max(lo + 1))));
    exited(&mut child)?;
    freeze_for_cut(child.0.id(), mount)?;
    mount.cut_power()?;
    drop(child);
    reader
        .join()
        .map_err(|_| anyhow::anyhow!("the host's output reader panicked"))?;
    cut_guard.finish()?;
    acks.extend(rx.try_iter());
    Ok(acks)
}

/// Reopen the store and hold every acknowledged session to its count, then run `verify`.
fn check(db: &Path, acked: &BTreeMap<String, u64>, c: &mut HostCycle) -> anyhow::Result<()> {
    let store = Store::open(db, Options::default()).context("reopening the store")?;
    for (id, &want) in acked {
        c.sessions += 1;
        let mut stored = 0u64;
        let mut gap = None;
        let read = store.events(id, 0, None, &mut |seq, _| {
            if seq != stored && gap.is_none() {
                gap = Some((seq, stored));
            }
            stored += 1;
            Ok(())
        });
        match read {
            Ok(()) if stored < want => c.short.push(format!(
                "session {id}: {want} events acknowledged, {stored} stored"
            )),
            Ok(()) => {}
            Err(sessionlog_engine::Error::UnknownSession { .. }) => c.short.push(format!(
                "session {id}: {want} events acknowledged, the session is gone"
            )),
            Err(e) => c.problems.push(format!("session {id}: {e}")),
        }
        if let Some((seq, expected)) = gap {
            c.problems
                .push(format!("session {id}: seq {seq} where {expected} was next"));
        }
    }
    for p in store.verify(&[])?.problems {
        c.problems
            .push(format!("verify: session {}: {}", p.session, p.detail));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{host_command, parse_ack};
    use std::path::Path;

    #[test]
    fn ack_lines_parse_and_other_lines_are_ignored() {
        assert_eq!(parse_ack("ack r1-0 12"), Some(("r1-0".into(), 12)));
        assert_eq!(parse_ack("ack r1-0"), None);
        assert_eq!(parse_ack("ack r1-0 12 extra"), None);
        assert_eq!(parse_ack("ack r1-0 twelve"), None);
        assert_eq!(parse_ack("ready"), None);
    }

    #[test]
    fn the_host_command_gets_the_store_cycle_and_durability() {
        let args: Vec<String> = ["node", "host.mjs", "{db}", "c{cycle}", "{durability}"]
            .map(String::from)
            .into();
        let c = host_command(&args, Path::new("/m/db"), 3, "sync").expect("command");
        assert_eq!(c.get_program(), "node");
        let got: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(got, ["host.mjs", "/m/db", "c3", "sync"]);
        assert!(host_command(&[], Path::new("/m/db"), 0, "sync").is_err());
    }
}
