//! One module per subcommand; `run` opens the command's host (`open.rs`: a store of its own, or
//! a host of a fleet with `--cluster`) and dispatches. Whether a command runs in a fleet is the
//! host's to decide (`sessionlog_cluster::Host`), never decided here.

mod append;
mod cluster;
mod export;
mod import;
mod inspect;
mod migrate;
mod objects;
mod open;
mod search;
mod serve;
mod stats;
mod tail;

use std::process::ExitCode;
use std::time::Duration;

use sessionlog_cluster::LocalOnly;
use sessionlog_engine::Store;

use crate::cli::{Cli, Command};
use open::{Access, Opener};

/// Run one parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let opener = Opener::new(&cli)?;
    let store_options = opener.options().clone();
    let objects = objects::ObjectStorage::new(&cli.s3);
    // A read of one session: caught up by the host, and when archived in the store answered by
    // a scratch store holding it.
    let read = |id: &str, run: &dyn Fn(&Store) -> anyhow::Result<ExitCode>| {
        opener.run(Access::Read, |host| {
            objects.read(&*host.read(id)?, &store_options, id, run)
        })
    };
    let local =
        |access: Access, op: LocalOnly, run: &dyn Fn(&Store) -> anyhow::Result<ExitCode>| {
            opener.run(access, |host| run(&*host.local_only(op)?))
        };
    match cli.command {
        Command::Import {
            strict,
            json,
            paths,
        } => opener.run(Access::Write, |host| {
            import::run(host, &objects, &paths, strict, json)
        }),
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
        } => local(Access::Read, LocalOnly::ExportAll, &|store| {
            export::run_all(store, &out, format)
        }),
        Command::ExportAll {
            to: Some(to),
            format,
            json,
            ..
        } => local(Access::Write, LocalOnly::ExportAll, &|store| {
            objects.export_all(store, &to, export::engine_format(format), json)
        }),
        Command::ExportAll { .. } => {
            anyhow::bail!("export-all takes --out DIR or --to s3://BUCKET/PREFIX")
        }
        Command::Archive {
            older_than,
            to,
            json,
        } => {
            let older_than = inspect::parse_duration_ms(&older_than)?;
            local(Access::Write, LocalOnly::Archive, &|store| {
                objects.archive(store, &to, older_than, json)
            })
        }
        Command::Restore { id, json } => local(Access::Write, LocalOnly::Restore, &|store| {
            objects.restore(store, &id, json)
        }),
        Command::Create {
            id,
            cwd,
            created_at,
            encoding,
            format,
        } => opener.run(Access::Write, |host| {
            append::create(host, id, cwd, created_at, encoding, format)
        }),
        Command::Append {
            id,
            expect_seq,
            strict,
            json,
        } => {
            let access = if strict {
                Access::StrictAppends
            } else {
                Access::Write
            };
            opener.run(access, |host| append::append(host, &id, expect_seq, json))
        }
        Command::Migrate {
            id,
            all,
            dry_run,
            json,
        } => local(Access::Write, LocalOnly::Migrate, &|store| {
            migrate::run(store, id.as_deref(), all, dry_run, json)
        }),
        Command::Repair { id, json } => local(Access::Write, LocalOnly::Repair, &|store| {
            append::repair(store, &id, false, json)
        }),
        Command::Resume { id, json } => local(Access::Write, LocalOnly::Resume, &|store| {
            append::repair(store, &id, true, json)
        }),
        Command::Tail {
            id: Some(id),
            from,
            follow,
            all: false,
        } => opener.run(Access::Follow, |host| {
            tail::session(host, &id, from.as_deref(), follow)
        }),
        Command::Tail {
            id: None,
            from,
            follow,
            all: true,
        } => tail::all(
            opener.local_path(LocalOnly::TailAll)?,
            &store_options,
            from.as_deref(),
            follow,
        ),
        Command::Tail { .. } => anyhow::bail!("tail takes a session id, or --all"),
        Command::Serve { listen, token } => serve::run(&opener, &objects, listen, token),
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
        Command::Kinds { id, at } => {
            read(&id, &|store| inspect::report(&store.event_kinds(&id, at)?))
        }
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
        } => opener.run(Access::Read, |host| {
            inspect::ls(&*host.listing()?, order, limit, after.as_deref(), json)
        }),
        Command::Fork {
            source,
            new_id,
            at,
            json,
        } => opener.run(Access::Write, |host| {
            append::fork(host, &source, &new_id, at, json)
        }),
        Command::Tree { id } => opener.run(Access::Read, |host| inspect::tree(host, &id)),
        Command::Delete { id } => {
            opener.run(Access::Write, |host| inspect::retain(host, &id, true))
        }
        Command::Undelete { id } => {
            opener.run(Access::Write, |host| inspect::retain(host, &id, false))
        }
        Command::Purge {
            older_than,
            dry_run,
        } => {
            let older_than =
                Duration::from_millis(inspect::parse_duration_ms(&older_than)?.max(0) as u64);
            opener.run(Access::Write, |host| {
                inspect::purge(host, older_than, dry_run)
            })
        }
        Command::Compact => local(Access::Write, LocalOnly::Compact, &inspect::compact),
        Command::Stats { prometheus } => {
            opener.run(Access::Read, |host| stats::run(&host.store(), prometheus))
        }
        Command::Cluster { command } => cluster::run(&opener, command),
        Command::Search(args) => opener.run(Access::Read, |host| {
            search::run(&*host.listing()?, &search::query(&args)?, args.json)
        }),
        Command::Reindex { json } => {
            opener.run(Access::Write, |host| search::reindex(&host.store(), json))
        }
        Command::Verify {
            ids,
            json,
            objects: with_objects,
        } => opener.run(Access::Read, |host| {
            let store = host.store();
            let archived = if with_objects {
                objects.verify_objects(&store, &ids)?
            } else {
                Vec::new()
            };
            inspect::verify(&store, &ids, archived, json)
        }),
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
