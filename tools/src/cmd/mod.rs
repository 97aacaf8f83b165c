//! One module per subcommand; `run` opens the store and dispatches.

mod append;
mod bench;
mod export;
mod import;
mod inspect;
mod lineage;
mod migrate;
mod node_hosting;
mod par;
mod pit;
mod power;
mod stress;

use std::process::ExitCode;

use anyhow::Context;
use sessionlog_engine::{Durability, Options, Store, V0Reads};
use sessionlog_tools::hosting::{self, peers::Peer};

use crate::cli::{BenchWorkload, Cli, Command, DurabilityArg, PeerArg, V0ReadsArg};

/// Run one parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let durability = match cli.durability {
        DurabilityArg::Sync => Durability::Sync,
        DurabilityArg::Buffered => Durability::Buffered,
    };
    let store_options = Options {
        durability,
        v0_reads: match cli.v0_reads {
            V0ReadsArg::Native => V0Reads::Native,
            V0ReadsArg::Migrated => V0Reads::Migrated,
        },
        wal_recycling: !cli.no_wal_recycling,
        blob_files: cli.blob_files,
        direct_io: !cli.no_direct_io,
        ..Options::default()
    };
    let open_with = |strict_appends: bool| -> anyhow::Result<Store> {
        let options = Options {
            strict_appends,
            ..store_options.clone()
        };
        Store::open(&cli.db, options)
            .with_context(|| format!("opening the store at {}", cli.db.display()))
    };
    let open = || open_with(false);
    match cli.command {
        Command::Import {
            strict,
            json,
            paths,
        } => import::run(&open()?, &paths, strict, json),
        Command::Export {
            id,
            format,
            output,
            generation,
        } => export::run(&open()?, &id, format, generation, output.as_deref()),
        Command::ExportAll { out, format } => export::run_all(&open()?, &out, format),
        Command::Create {
            id,
            cwd,
            created_at,
            encoding,
            format,
        } => append::create(&open()?, id, cwd, created_at, encoding, format),
        Command::Append {
            id,
            expect_seq,
            strict,
        } => append::append(&open_with(strict)?, &id, expect_seq),
        Command::Migrate {
            id,
            all,
            dry_run,
            json,
        } => migrate::run(&open()?, id.as_deref(), all, dry_run, json),
        Command::Repair { id } => append::repair(&open()?, &id, false),
        Command::Resume { id } => append::repair(&open()?, &id, true),
        Command::Events { id, from, to } => inspect::events(&open()?, &id, from, to),
        Command::Surface { id, at, json } => inspect::surface(&open()?, &id, at, json),
        Command::Messages { id, at } => inspect::values(&open()?.messages_at(&id, at)?),
        Command::Transcript { id, at } => inspect::values(&open()?.transcript(&id, at)?),
        Command::State { id, unit, at } => inspect::values(&[open()?.state_at(&id, &unit, at)?]),
        Command::Request { id, turn, step } => {
            inspect::values(&[open()?.request(&id, turn, step)?])
        }
        Command::CheckRequest { id, turn, step } => {
            inspect::check_request(&open()?, &id, turn, step)
        }
        Command::Ls {
            order,
            limit,
            after,
            json,
        } => inspect::ls(&open()?, order, limit, after.as_deref(), json),
        Command::Fork { source, new_id, at } => append::fork(&open()?, &source, &new_id, at),
        Command::Tree { id } => inspect::tree(&open()?, &id),
        Command::Delete { id } => inspect::retain(&open()?, &id, true),
        Command::Undelete { id } => inspect::retain(&open()?, &id, false),
        Command::Purge {
            older_than,
            dry_run,
        } => inspect::purge(&open()?, &older_than, dry_run),
        Command::Compact => inspect::compact(&open()?),
        Command::Verify { ids, json } => inspect::verify(&open()?, &ids, json),
        Command::Gen {
            out,
            sessions,
            seed,
            events,
        } => inspect::gen(&out, sessions, seed, events),
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
            worker,
            power_loss,
            lazyfs_build,
            power_worker,
            host,
        } => {
            if let Some(spec) = power_worker {
                return power::worker(&spec);
            }
            if !host.is_empty() {
                anyhow::ensure!(power_loss, "a host command runs only under --power-loss");
                return power::run_host(&host, durability, cycles, seed, dir, lazyfs_build, json);
            }
            if power_loss {
                let opts = sessionlog_tools::power::PowerOptions {
                    durability,
                    seed,
                    cycles_per_store,
                    wal_recycling: !cli.no_wal_recycling,
                    blob_files: cli.blob_files,
                    ..Default::default()
                };
                return power::run(&opts, cycles, dir, lazyfs_build, json);
            }
            let opts = sessionlog_tools::stress::StressOptions {
                threads,
                sessions_per_thread,
                events_per_session: events,
                seed,
                cycles_per_store,
                wal_recycling: !cli.no_wal_recycling,
                blob_files: cli.blob_files,
                ..Default::default()
            };
            stress::run(&opts, cycles, max_kill_ms, dir, json, worker)
        }
        Command::Bench { workload } => match workload {
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
            BenchWorkload::Fork {
                events,
                forks,
                json,
            } => lineage::bench_fork(events, forks, json),
            BenchWorkload::Listing {
                sessions,
                limit,
                json,
            } => lineage::bench_listing(sessions, limit, json),
            BenchWorkload::Pit {
                sizes,
                queries,
                format,
                dir,
                json,
            } => pit::run(&sizes, queries, format.into(), dir, json),
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
                peers,
                format,
                write_iops,
                dir,
                json,
                rounds,
            } => {
                let seconds_arg = |flag: &str, s: f64| {
                    std::time::Duration::try_from_secs_f64(s)
                        .with_context(|| format!("--{flag} {s}"))
                };
                let workload = hosting::Workload {
                    sessions,
                    threads,
                    duration: seconds_arg("seconds", seconds)?,
                    warmup: seconds_arg("warmup", warmup)?,
                };
                let peers = peers
                    .into_iter()
                    .map(|p| match p {
                        PeerArg::Jsonl => Peer::Jsonl,
                        PeerArg::Sqlite => Peer::Sqlite,
                    })
                    .collect::<Vec<_>>();
                bench::hosting(bench::HostingBench {
                    workload,
                    events,
                    format: format.into(),
                    store: store_options.clone(),
                    peers,
                    write_iops,
                    dir,
                    as_json: json,
                    rounds: usize::try_from(rounds).unwrap_or(usize::MAX),
                })
            }
        },
    }
}

/// A byte-progress bar on stderr; indicatif draws nothing when stderr is not a terminal.
pub fn progress_bar(total: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    let style = indicatif::ProgressStyle::with_template(
        "{msg} {wide_bar} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(what.to_owned());
    bar
}

/// A session-count progress bar on stderr (drawn only on a terminal).
pub fn session_bar(total: u64, what: &str) -> indicatif::ProgressBar {
    let bar = progress_bar(total, what);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {wide_bar} {pos}/{len} sessions eta {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
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
