//! One module per subcommand; `run` opens the store and dispatches.

mod append;
mod cluster;
mod export;
mod import;
mod inspect;
mod migrate;
mod objects;
mod search;
mod serve;
mod stats;
mod tail;

use std::process::ExitCode;

use anyhow::Context;
use sessionlog_engine::{Options, Store};

use crate::cli::{Cli, Command};

/// Run one parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    if cli.cluster.is_some() {
        return cluster::run(cli);
    }
    let store_options = cli.store.options();
    let open_with = |strict_appends: bool| -> anyhow::Result<Store> {
        let options = Options {
            strict_appends,
            ..store_options.clone()
        };
        Store::open(&cli.db, options)
            .with_context(|| format!("opening the store at {}", cli.db.display()))
    };
    let open = || open_with(false);
    // A command that only reads opens the store beside a process that holds it.
    let open_reader = || {
        Store::open_reader(&cli.db, store_options.clone())
            .with_context(|| format!("opening the store at {} for reading", cli.db.display()))
    };
    let objects = objects::ObjectStorage::new(&cli.s3);
    // A read of a session archived in the store is answered by a scratch store holding it.
    let read = |id: &str, run: &dyn Fn(&Store) -> anyhow::Result<ExitCode>| {
        objects.read(&open_reader()?, &store_options, id, run)
    };
    match cli.command {
        Command::Import {
            strict,
            json,
            paths,
        } => import::run(&open()?, &objects, &paths, strict, json),
        Command::Export {
            id,
            format,
            output,
            generation,
        } => read(&id, &|store| {
            export::run(store, &id, format, generation, output.as_deref())
        }),
        Command::ExportAll {
            out: Some(out),
            format,
            ..
        } => export::run_all(&open_reader()?, &out, format),
        Command::ExportAll {
            to: Some(to),
            format,
            json,
            ..
        } => objects.export_all(&open()?, &to, export::engine_format(format), json),
        Command::ExportAll { .. } => {
            anyhow::bail!("export-all takes --out DIR or --to s3://BUCKET/PREFIX")
        }
        Command::Archive {
            older_than,
            to,
            json,
        } => objects.archive(
            &open()?,
            &to,
            inspect::parse_duration_ms(&older_than)?,
            json,
        ),
        Command::Restore { id, json } => objects.restore(&open()?, &id, json),
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
            json,
        } => append::append(&open_with(strict)?, &id, expect_seq, json),
        Command::Migrate {
            id,
            all,
            dry_run,
            json,
        } => migrate::run(&open()?, id.as_deref(), all, dry_run, json),
        Command::Repair { id, json } => append::repair(&open()?, &id, false, json),
        Command::Resume { id, json } => append::repair(&open()?, &id, true, json),
        Command::Tail {
            id,
            from,
            follow,
            all,
        } => tail::run(&cli.db, &store_options, id.as_deref(), from.as_deref(), follow, all),
        Command::Serve { listen, token } => serve::run(&cli.db, &store_options, &objects, listen, token),
        Command::Events { id, from, to } => {
            read(&id, &|store| inspect::events(store, &id, from, to))
        }
        Command::Surface { id, at, json } => {
            read(&id, &|store| inspect::surface(store, &id, at, json))
        }
        Command::Messages { id, at } => {
            read(&id, &|store| inspect::values(&store.messages_at(&id, at)?))
        }
        Command::Transcript { id, at } => {
            read(&id, &|store| inspect::values(&store.transcript(&id, at)?))
        }
        Command::State { id, unit, at } => read(&id, &|store| {
            inspect::values(&[store.state_at(&id, &unit, at)?])
        }),
        Command::Request { id, turn, step } => read(&id, &|store| {
            inspect::values(&[store.request(&id, turn, step)?])
        }),
        Command::CheckRequest { id, turn, step } => {
            let recorded = inspect::read_request()?;
            read(&id, &|store| {
                inspect::check_request(store, &id, turn, step, &recorded)
            })
        }
        Command::Ls {
            order,
            limit,
            after,
            json,
        } => inspect::ls(&open_reader()?, order, limit, after.as_deref(), json),
        Command::Fork {
            source,
            new_id,
            at,
            json,
        } => append::fork(&open()?, &source, &new_id, at, json),
        Command::Tree { id } => inspect::tree(&open_reader()?, &id),
        Command::Delete { id } => inspect::retain(&open()?, &id, true),
        Command::Undelete { id } => inspect::retain(&open()?, &id, false),
        Command::Purge {
            older_than,
            dry_run,
        } => inspect::purge(&open()?, &older_than, dry_run),
        Command::Compact => inspect::compact(&open()?),
        Command::Stats { prometheus } => stats::run(&open_reader()?, prometheus),
        Command::Cluster { .. } => anyhow::bail!(
            "`sessionlog cluster` needs --cluster URL (or SESSIONLOG_CLUSTER): the fleet's PostgreSQL"
        ),
        Command::Search(args) => search::run(&open_reader()?, &search::query(&args)?, args.json),
        Command::Reindex { json } => search::reindex(&open()?, json),
        Command::Verify {
            ids,
            json,
            objects: with_objects,
        } => {
            let store = open_reader()?;
            let archived = if with_objects {
                objects.verify_objects(&store, &ids)?
            } else {
                Vec::new()
            };
            inspect::verify(&store, &ids, archived, json)
        }
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
