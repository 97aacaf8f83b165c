//! One module per subcommand; `run` dispatches.

mod bench;
mod console;
mod failover;
mod fleet_fork;
mod gen;
mod lineage;
mod nemesis;
mod node_hosting;
mod pg;
mod pit;
mod power;
mod s3_export;
mod search;
mod space;
mod stress;
mod tail;
mod tail_fleet;
mod tail_workload;
mod takeover;
mod work_dir;

use std::process::ExitCode;

use anyhow::Context;
use sessionlog_harness::hosting::{self, peers::Peer};

use crate::cli::{log_format, BenchWorkload, Cli, Command, PeerArg};

/// Run one parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let durability = cli.store.durability();
    match cli.command {
        Command::Gen {
            out,
            sessions,
            seed,
            events,
        } => gen::run(&out, sessions, seed, events),
        Command::Stress {
            cycles,
            threads,
            sessions_per_thread,
            events,
            max_kill_ms,
            cycles_per_store,
            seed,
            dir,
            json,
            cluster,
            commit_patience_ms,
            nodes,
            fleet_nemesis,
            minutes,
            without_calls,
            without_faults,
            worker,
            power_loss,
            lazyfs_build,
            power_worker,
            host,
        } => {
            if fleet_nemesis {
                return nemesis::run(
                    nodes,
                    minutes,
                    seed,
                    &without_calls,
                    &without_faults,
                    dir,
                    json,
                );
            }
            if cluster {
                anyhow::ensure!(nodes >= 2, "--cluster runs 2 or 3 Patroni nodes");
                let opts = sessionlog_harness::failover::FailoverOptions {
                    cycles: cycles.unwrap_or(10),
                    nodes: usize::try_from(nodes).unwrap_or(2),
                    threads: threads as u64,
                    sessions_per_thread,
                    events_per_session: events,
                    seed,
                    commit_patience: std::time::Duration::from_millis(commit_patience_ms),
                    ..Default::default()
                };
                return failover::run(&opts, dir, json);
            }
            let cycles = cycles.unwrap_or(200);
            if let Some(spec) = power_worker {
                return power::worker(&spec);
            }
            if !host.is_empty() {
                anyhow::ensure!(power_loss, "a host command runs only under --power-loss");
                return power::run_host(&host, durability, cycles, seed, dir, lazyfs_build, json);
            }
            if power_loss {
                let opts = sessionlog_harness::power::PowerOptions {
                    durability,
                    seed,
                    cycles_per_store,
                    wal_recycling: !cli.store.no_wal_recycling,
                    blob_files: cli.store.blob_files,
                    ..Default::default()
                };
                return power::run(&opts, cycles, dir, lazyfs_build, json);
            }
            let opts = sessionlog_harness::stress::StressOptions {
                threads,
                sessions_per_thread,
                events_per_session: events,
                seed,
                cycles_per_store,
                wal_recycling: !cli.store.no_wal_recycling,
                blob_files: cli.store.blob_files,
                ..Default::default()
            };
            stress::run(&opts, cycles, max_kill_ms, dir, json, worker)
        }
        Command::NemesisHost {
            url,
            host,
            dir,
            lease_ms,
            commit_patience_ms,
            read_bound_ms,
        } => nemesis::host(sessionlog_harness::nemesis::host::HostSpec {
            url,
            host,
            dir,
            lease: std::time::Duration::from_millis(lease_ms),
            commit_patience: std::time::Duration::from_millis(commit_patience_ms),
            read_bound: std::time::Duration::from_millis(read_bound_ms),
        }),
        Command::Seaweed { bucket } => seaweed(&bucket),
        Command::Pg => pg::run(),
        Command::Bench { workload } => match workload {
            BenchWorkload::Console {
                db,
                id,
                moves,
                script,
            } => console::run(&db, &id, moves, &script),
            BenchWorkload::NodeHosting {
                sessions,
                seconds,
                write_iops,
                script,
                dir,
                json,
            } => node_hosting::run(&node_hosting::NodeHostingBench {
                sessions,
                seconds,
                write_iops,
                script,
                dir,
                as_json: json,
            }),
            BenchWorkload::S3Export {
                mb,
                events,
                rounds,
                dir,
                json,
            } => s3_export::run(&s3_export::S3ExportBench {
                mb,
                events,
                rounds: usize::try_from(rounds).unwrap_or(usize::MAX),
                dir,
                as_json: json,
            }),
            BenchWorkload::Takeover {
                sizes,
                rounds,
                json,
            } => takeover::run(
                &sizes,
                usize::try_from(rounds).unwrap_or(usize::MAX),
                cli.store.options(),
                json,
            ),
            BenchWorkload::Fork {
                events,
                forks,
                cluster: true,
                json,
            } => fleet_fork::run(events, forks.max(1), json),
            BenchWorkload::Fork {
                events,
                forks,
                cluster: false,
                json,
            } => lineage::bench_fork(events, forks, json),
            BenchWorkload::Search(bench) => search::run(&bench, &cli.store.options()),
            BenchWorkload::Tail {
                sessions,
                threads,
                subscribers,
                watchers,
                seconds,
                fleet_sessions,
                json,
            } => tail::run(
                &tail::Workload {
                    sessions,
                    threads,
                    subscribers: &subscribers,
                    watchers,
                    seconds,
                    fleet_sessions,
                },
                &cli.store.options(),
                json,
            ),
            BenchWorkload::Listing {
                sessions,
                limit,
                json,
            } => lineage::bench_listing(sessions, limit, json),
            BenchWorkload::Pit {
                sizes,
                queries,
                format,
                compact,
                dir,
                json,
            } => pit::run(&sizes, queries, log_format(format), compact, dir, json),
            BenchWorkload::Space {
                sessions,
                events,
                formats,
                dir,
                json,
            } => space::run(space::SpaceBench {
                sessions,
                events,
                formats: formats.into_iter().map(log_format).collect(),
                store: cli.store.options(),
                dir,
                as_json: json,
            }),
            BenchWorkload::ImportExport {
                zstd,
                mb,
                events,
                dir,
                json,
            } => bench::import_export(mb, events, zstd, dir, json),
            BenchWorkload::Hosting {
                sessions,
                threads,
                seconds,
                warmup,
                events,
                cluster,
                hosts,
                peers,
                format,
                write_iops,
                dir,
                json,
                rounds,
                metrics,
            } => {
                let workload = hosting::Workload {
                    sessions,
                    threads,
                    duration: seconds_arg("seconds", seconds)?,
                    warmup: seconds_arg("warmup", warmup)?,
                    first_slot: 0,
                };
                let peers = peers
                    .into_iter()
                    .map(|p| match p {
                        PeerArg::Jsonl => Peer::Jsonl,
                        PeerArg::Sqlite => Peer::Sqlite,
                        PeerArg::PgRows => Peer::PgRows,
                    })
                    .collect::<Vec<_>>();
                bench::hosting(bench::HostingBench {
                    workload,
                    events,
                    format: log_format(format),
                    store: cli.store.options(),
                    global_flags: cli.store.flags(),
                    fleet_hosts: if cluster { hosts } else { Vec::new() },
                    peers,
                    write_iops,
                    dir,
                    as_json: json,
                    rounds: usize::try_from(rounds).unwrap_or(usize::MAX),
                    metrics,
                })
            }
            BenchWorkload::FleetHost {
                url,
                host,
                dir,
                pool_sessions,
                first_slot,
                sessions,
                threads,
                seconds,
                warmup,
                events,
                format,
            } => {
                let spec = hosting::fleet::worker::WorkerSpec {
                    url,
                    host,
                    dir,
                    workload: hosting::Workload {
                        sessions,
                        threads,
                        duration: seconds_arg("seconds", seconds)?,
                        warmup: seconds_arg("warmup", warmup)?,
                        first_slot,
                    },
                };
                bench::fleet_host(
                    &spec,
                    pool_sessions,
                    events,
                    log_format(format),
                    cli.store.options(),
                )
            }
        },
    }
}

/// `--flag s` as a duration.
fn seconds_arg(flag: &str, s: f64) -> anyhow::Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(s).with_context(|| format!("--{flag} {s}"))
}

/// A benchmark's working directory: the one given (kept), or a fresh temp dir (removed after:
/// the `bool`).
pub fn work_dir(dir: Option<std::path::PathBuf>, workload: &str) -> (std::path::PathBuf, bool) {
    match dir {
        Some(d) => (d, false),
        None => (
            std::env::temp_dir().join(format!("sessionlog-{workload}-{}", std::process::id())),
            true,
        ),
    }
}

/// `sessionlog-harness seaweed`: a server until standard input closes.
fn seaweed(bucket: &str) -> anyhow::Result<ExitCode> {
    let server = sessionlog_harness::seaweed::SeaweedServer::start()?;
    server.create_bucket(bucket)?;
    let line = sessionlog_codec::json::Object::new()
        .with("endpoint", server.endpoint().as_str())
        .with("region", "us-east-1")
        .with("accessKeyId", server.access_key_id.as_str())
        .with("secretAccessKey", server.secret_access_key.as_str());
    sessionlog_tools_common::output::json_line(&mut std::io::stdout().lock(), line)?;
    std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink())?;
    drop(server);
    Ok(ExitCode::SUCCESS)
}
