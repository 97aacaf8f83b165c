//! The parent of a fleet run (`bench hosting --cluster --hosts H`): one throwaway PostgreSQL
//! with the fleet's schema, then H host processes ([`super::worker`]), each a fleet host with
//! its own name, its own store directory, its share of the sessions (distinct slots, so distinct
//! session ids) and of the threads ([`shares`]).
//!
//! A start barrier keeps the measured windows together: every host creates its sessions and
//! warms up, says it is ready, and only once all have does the parent write the start signal to
//! each; they then run for the same duration. The parent merges their reports ([`merge`]):
//! batches, events and bytes summed, the slowest host's wall time, the hosts' CPU summed (so
//! host CPU per batch is their sum over all batches), the latency histograms merged sample for
//! sample; and it adds what only it sees: PostgreSQL's CPU (its whole process tree) and, inside
//! a disk cgroup, the device write requests of every member, over the measured window (from the
//! start signal until every report is read; the hosts stay connected until then).
//!
//! Invariant: inside a disk cgroup, every host process and PostgreSQL's postmaster and
//! backends are members when the measured window starts; the run fails otherwise.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context};

use super::worker::{parse_report, WorkerSpec, GO, READY};
use super::{fleet_postgres, host_url};
use crate::disk_cgroup::DiskCgroup;
use crate::hosting::output::FLEET_PREFIX;
use crate::hosting::{Histogram, Report, Workload};

/// A fleet run of `hosts` processes.
pub struct FleetRun<'a> {
    /// Host processes.
    pub hosts: usize,
    /// The whole run: every host's sessions and threads together.
    pub workload: &'a Workload,
    /// Where the hosts' stores go (`host-<h>` each).
    pub dir: &'a Path,
    /// The disk cgroup the bench runs in, if any: the hosts and PostgreSQL inherit it.
    pub disk: Option<&'a DiskCgroup>,
}

/// How reports name a fleet of `hosts` host processes.
pub fn system_name(hosts: usize) -> String {
    format!("{FLEET_PREFIX}{hosts}")
}

/// `workload` split over `hosts` processes: host `h` gets a contiguous run of slots (the first
/// `sessions % hosts` hosts one more) and of threads likewise, the same duration and warmup.
pub fn shares(workload: &Workload, hosts: usize) -> anyhow::Result<Vec<Workload>> {
    workload.validate()?;
    ensure!(hosts >= 1, "a fleet needs at least one host");
    ensure!(
        workload.threads >= hosts,
        "{hosts} hosts need at least {hosts} threads (one each), got {}",
        workload.threads
    );
    let split = |n: usize, h: usize| n / hosts + usize::from(h < n % hosts);
    let mut first_slot = workload.first_slot;
    Ok((0..hosts)
        .map(|h| {
            let share = Workload {
                sessions: split(workload.sessions, h),
                threads: split(workload.threads, h),
                first_slot,
                ..workload.clone()
            };
            first_slot += share.sessions;
            share
        })
        .collect())
}

/// One report of `hosts`' runs as `system`: see the module docs. `server_cpu` and
/// `device_writes` are the parent's own measures of the window.
pub fn merge(
    system: String,
    hosts: &[Report],
    server_cpu: Option<Duration>,
    device_writes: Option<u64>,
) -> Report {
    let mut latency = Histogram::default();
    for r in hosts {
        latency.merge(&r.latency);
    }
    Report {
        system,
        batches: hosts.iter().map(|r| r.batches).sum(),
        events: hosts.iter().map(|r| r.events).sum(),
        bytes: hosts.iter().map(|r| r.bytes).sum(),
        sessions_started: hosts.iter().map(|r| r.sessions_started).sum(),
        wall: hosts.iter().map(|r| r.wall).max().unwrap_or_default(),
        cpu: hosts.iter().map(|r| r.cpu).sum(),
        server_cpu,
        feed_cpu: hosts.iter().map(|r| r.feed_cpu).sum(),
        latency,
        device_writes,
    }
}

/// A started host process and its pipes.
struct HostProcess {
    name: String,
    child: Child,
    /// Its standard input, closed once the measures are taken: then it ends.
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl HostProcess {
    /// The next line it prints, failing with its exit status when it ends first.
    fn line(&mut self, waiting_for: &str) -> anyhow::Result<String> {
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        if line.is_empty() {
            let status = self.child.wait()?;
            bail!(
                "host {} ended ({status}) before {waiting_for} (its errors are above)",
                self.name
            );
        }
        Ok(line)
    }
}

/// The started hosts; any still running when this drops (the run failed) are killed.
struct Hosts(Vec<HostProcess>);

impl Drop for Hosts {
    fn drop(&mut self) {
        for host in &mut self.0 {
            if matches!(host.child.try_wait(), Ok(None)) {
                let _ = host.child.kill();
                let _ = host.child.wait();
            }
        }
    }
}

/// Run the fleet (see the module docs); `spawn` makes the command that runs one host process
/// ([`super::worker::serve`] with its spec), whose standard input and output the run takes.
pub fn run(fleet: &FleetRun<'_>, spawn: &dyn Fn(&WorkerSpec) -> Command) -> anyhow::Result<Report> {
    let shares = shares(fleet.workload, fleet.hosts)?;
    let (postgres, _) = fleet_postgres()?;
    let url = host_url(&postgres);
    let mut hosts = Hosts(Vec::with_capacity(shares.len()));
    for (h, workload) in shares.into_iter().enumerate() {
        let spec = WorkerSpec {
            url: url.clone(),
            host: format!("bench-host-{h}"),
            dir: fleet.dir.join(format!("host-{h}")),
            workload,
        };
        let mut child = spawn(&spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting host {}", spec.host))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("host {}: no pipes to it", spec.host);
        };
        hosts.0.push(HostProcess {
            name: spec.host,
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
        });
    }
    for host in &mut hosts.0 {
        let line = host.line("it was ready")?;
        ensure!(
            line.trim() == READY,
            "host {} said {line:?} instead of \"{READY}\"",
            host.name
        );
    }
    if let Some(disk) = fleet.disk {
        check_members(disk, &hosts, &postgres.pids())?;
    }
    let writes_before = fleet.disk.map(DiskCgroup::write_requests).transpose()?;
    let server_before = postgres.cpu_time();
    for host in &mut hosts.0 {
        let Some(stdin) = host.stdin.as_mut() else {
            bail!("host {}: its standard input is closed", host.name);
        };
        writeln!(stdin, "{GO}")
            .and_then(|()| stdin.flush())
            .with_context(|| format!("starting host {}", host.name))?;
    }
    let system = system_name(fleet.hosts);
    let mut reports = Vec::with_capacity(hosts.0.len());
    for host in &mut hosts.0 {
        let line = host.line("its report")?;
        reports.push(
            parse_report(&system, &line)
                .with_context(|| format!("reading host {}'s report", host.name))?,
        );
    }
    let server_cpu = server_before
        .zip(postgres.cpu_time())
        .map(|(before, after)| after.saturating_sub(before));
    let writes_after = fleet.disk.map(DiskCgroup::write_requests).transpose()?;
    for host in &mut hosts.0 {
        host.stdin = None;
        let status = host.child.wait()?;
        ensure!(status.success(), "host {} ended with {status}", host.name);
    }
    let device_writes = writes_before
        .zip(writes_after)
        .map(|(before, after)| after.saturating_sub(before));
    Ok(merge(system, &reports, server_cpu, device_writes))
}

/// Fail unless every host process and PostgreSQL's postmaster (the first of `postgres`) are in
/// `disk`, and no other PostgreSQL process is known to be outside it (one that ended since it
/// was listed is skipped).
fn check_members(disk: &DiskCgroup, hosts: &Hosts, postgres: &[u32]) -> anyhow::Result<()> {
    let postmaster = postgres
        .first()
        .ok_or_else(|| anyhow!("PostgreSQL is not running"))?;
    let required = hosts
        .0
        .iter()
        .map(|h| (h.child.id(), h.name.as_str()))
        .chain([(*postmaster, "PostgreSQL's postmaster")]);
    for (pid, what) in required {
        ensure!(
            disk.holds(pid)?,
            "{what} (process {pid}) is outside the disk cgroup: its writes would be neither \
             limited nor counted"
        );
    }
    for &pid in &postgres[1..] {
        if let Ok(false) = disk.holds(pid) {
            bail!("PostgreSQL's process {pid} is outside the disk cgroup");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hosting::fleet::worker::report_json;

    fn host_report(
        batches: u64,
        wall_ms: u64,
        cpu_ms: Option<u64>,
        latencies_ms: &[u64],
    ) -> Report {
        let mut latency = Histogram::default();
        for &ms in latencies_ms {
            latency.record(Duration::from_millis(ms));
        }
        Report {
            system: "fleet".to_owned(),
            batches,
            events: batches * 10,
            bytes: batches * 100,
            sessions_started: 1,
            wall: Duration::from_millis(wall_ms),
            cpu: cpu_ms.map(Duration::from_millis),
            server_cpu: None,
            feed_cpu: Duration::from_millis(batches),
            latency,
            device_writes: None,
        }
    }

    #[test]
    fn shares_split_slots_and_threads_without_overlap() {
        let workload = Workload {
            sessions: 1000,
            threads: 32,
            first_slot: 0,
            ..Workload::default()
        };
        let four = shares(&workload, 4).expect("splits");
        assert_eq!(
            four.iter()
                .map(|w| (w.first_slot, w.sessions, w.threads))
                .collect::<Vec<_>>(),
            [(0, 250, 8), (250, 250, 8), (500, 250, 8), (750, 250, 8)]
        );
        let odd = Workload {
            sessions: 10,
            threads: 5,
            ..Workload::default()
        };
        let three = shares(&odd, 3).expect("splits");
        assert_eq!(
            three
                .iter()
                .map(|w| (w.first_slot, w.sessions, w.threads))
                .collect::<Vec<_>>(),
            [(0, 4, 2), (4, 3, 2), (7, 3, 1)]
        );
        assert!(three.iter().all(|w| w.duration == odd.duration));
        let e = shares(&odd, 6).expect_err("a host without a thread");
        assert!(
            e.to_string().contains("6 hosts need at least 6 threads"),
            "{e:#}"
        );
        assert!(shares(&odd, 0).is_err());
    }

    /// Sums, the slowest wall, summed CPU (so CPU per batch is the hosts' total over all
    /// batches), every latency sample kept, and the parent's own measures as given.
    #[test]
    fn merging_host_reports_sums_and_keeps_every_sample() {
        let hosts = [
            host_report(300, 10_000, Some(900), &[1, 2, 3]),
            host_report(100, 10_200, Some(300), &[40]),
        ];
        // Through the report line and back, as the parent reads them.
        let read: Vec<Report> = hosts
            .iter()
            .map(|r| {
                let line = sessionlog_codec::json::stringify(
                    &sessionlog_codec::json::Value::Object(report_json(r)),
                );
                parse_report("fleet_h2", &line).expect("parses")
            })
            .collect();
        let merged = merge(
            system_name(2),
            &read,
            Some(Duration::from_millis(400)),
            Some(80),
        );
        assert_eq!(merged.system, "fleet_h2");
        assert_eq!(merged.batches, 400);
        assert_eq!(merged.events, 4000);
        assert_eq!(merged.bytes, 40_000);
        assert_eq!(merged.sessions_started, 2);
        assert_eq!(merged.wall, Duration::from_millis(10_200));
        assert_eq!(merged.cpu_us_per_batch(), Some(3000.0));
        assert_eq!(merged.server_cpu_us_per_batch(), Some(1000.0));
        assert_eq!(merged.feed_cpu, Duration::from_millis(400));
        assert_eq!(merged.device_writes_per_batch(), Some(0.2));
        assert_eq!(merged.latency.count(), 4);
        assert_eq!(merged.latency.max(), Duration::from_millis(40));
        assert!(merged.latency.quantile(0.5) < Duration::from_millis(3));
        let unknown = merge(
            system_name(2),
            &[
                host_report(1, 1, None, &[1]),
                host_report(1, 1, Some(1), &[1]),
            ],
            None,
            None,
        );
        assert_eq!(
            unknown.cpu, None,
            "one host's CPU unknown: the sum is unknown"
        );
    }

    #[test]
    fn a_report_line_missing_a_count_is_refused_by_name() {
        let e = parse_report("fleet_h1", r#"{"batches":1,"events":2,"cpu_ns":null}"#)
            .expect_err("no bytes");
        assert!(e.to_string().contains("\"bytes\""), "{e:#}");
        assert!(parse_report("fleet_h1", "ready").is_err());
    }
}
