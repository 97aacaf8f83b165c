//! The CLI as a host of a fleet (`--cluster URL`): the store in `--db` is this host's index of
//! the fleet's sessions, PostgreSQL their system of record. A read catches the session up from
//! PostgreSQL first; a write takes the session for this host (refused while another host's lease
//! is live), commits through PostgreSQL, and gives it up again, as a one-shot host does; a fork
//! or an import creates its session through PostgreSQL the same way. Plus
//! `sessionlog cluster init|add-host|status|acquire|release`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;
use sessionlog_cluster::{schema, Config, Fleet, FleetOptions};
use sessionlog_tools_common::output::report_line;

use super::{append, export, inspect, tail};
use crate::cli::{Cli, ClusterCommand, Command};

/// Run `cli` as a host of the fleet at `cli.cluster`.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let url = cli.cluster.clone().unwrap_or_default();
    let config = Config::parse(&url)?;
    match &cli.command {
        Command::Cluster {
            command: ClusterCommand::Init { host_roles },
        } => return init(&config, host_roles),
        Command::Cluster {
            command: ClusterCommand::AddHost { name },
        } => return add_host(&config, name),
        _ => {}
    }
    let host = match cli.host.clone() {
        Some(host) => host,
        None => machine_name()?,
    };
    let options = FleetOptions {
        store: cli.store.options(),
        ..FleetOptions::new(host)
    };
    let fleet = Fleet::open(&cli.db, config.clone(), options)
        .with_context(|| format!("joining the fleet with the store at {}", cli.db.display()))?;
    let store = fleet.store().as_ref();
    match cli.command {
        Command::Cluster { command } => match command {
            ClusterCommand::Init { host_roles } => init(&config, &host_roles),
            ClusterCommand::AddHost { name } => add_host(&config, &name),
            ClusterCommand::Status { json } => status(&fleet, json),
            ClusterCommand::Acquire { id, force, json } => {
                let acquired = fleet.acquire(&id, force)?;
                if json {
                    report_line(&mut std::io::stdout().lock(), &acquired)?;
                    return Ok(ExitCode::SUCCESS);
                }
                println!(
                    "{} holds {id} at epoch {} (caught up {} batches; next seq {})",
                    fleet.host(),
                    acquired.row.epoch,
                    acquired.caught_up,
                    acquired.row.next_seq
                );
                Ok(ExitCode::SUCCESS)
            }
            ClusterCommand::Release { id } => {
                let held = fleet.release(&id)?;
                println!(
                    "{id}: {}",
                    if held {
                        "released"
                    } else {
                        "not held by this host"
                    }
                );
                Ok(ExitCode::SUCCESS)
            }
        },
        Command::Create {
            id,
            cwd,
            created_at,
            encoding,
            format,
        } => holding(&fleet, None, || {
            append::create(store, id.clone(), cwd, created_at, encoding, format)
        }),
        Command::Append {
            id,
            expect_seq,
            json,
            ..
        } => holding(&fleet, Some(&id), || {
            append::append(store, &id, expect_seq, json)
        }),
        Command::Fork {
            source,
            new_id,
            at,
            json,
        } => holding(&fleet, None, || {
            append::print_fork(&source, &fleet.fork(&source, at, &new_id)?, json)
        }),
        Command::Import {
            paths,
            strict: false,
            json: false,
        } => holding(&fleet, None, || import(&fleet, &paths)),
        Command::Delete { id } => holding(&fleet, Some(&id), || {
            fleet.set_deleted(&id, true)?;
            println!("deleted {id} in the fleet");
            Ok(ExitCode::SUCCESS)
        }),
        Command::Undelete { id } => holding(&fleet, Some(&id), || {
            fleet.set_deleted(&id, false)?;
            println!("restored {id} in the fleet");
            Ok(ExitCode::SUCCESS)
        }),
        Command::Purge { older_than, .. } => {
            let removed = fleet.purge(Duration::from_millis(
                inspect::parse_duration_ms(&older_than)?.max(0) as u64,
            ))?;
            println!("removed {} sessions from the fleet", removed.len());
            for id in removed {
                println!("  {id}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Ls { json, .. } => list(&fleet, json),
        Command::Export {
            id,
            format,
            output,
            generation,
        } => {
            fleet.sync(&id)?;
            export::run(store, &id, format, generation, output.as_deref())
        }
        Command::Events { id, from, to } => {
            fleet.sync(&id)?;
            inspect::events(store, &id, from, to)
        }
        Command::Surface { id, at, json } => {
            fleet.sync(&id)?;
            inspect::surface(store, &id, at, json)
        }
        Command::Messages { id, at } => {
            fleet.sync(&id)?;
            inspect::values(&store.messages_at(&id, at)?)
        }
        Command::Transcript { id, at } => {
            fleet.sync(&id)?;
            inspect::values(&store.transcript(&id, at)?)
        }
        Command::State { id, unit, at } => {
            fleet.sync(&id)?;
            inspect::values(&[store.state_at(&id, &unit, at)?])
        }
        Command::Request { id, turn, step } => {
            fleet.sync(&id)?;
            inspect::values(&[store.request(&id, turn, step)?])
        }
        Command::Verify {
            ids,
            json,
            objects: false,
        } => inspect::verify(store, &ids, Vec::new(), json),
        Command::Tail {
            id: Some(id),
            from,
            follow,
            all: false,
        } => tail::fleet(&fleet, &id, from.as_deref(), follow),
        other => bail!(
            "`{}` is not available with --cluster: the fleet takes creations, appends, forks, \
             imports of files (without --strict or --json), reads, exports, deletion and purge; \
             run it on a store without --cluster",
            command_name(&other)
        ),
    }
}

/// Run `write` holding session `id` (acquired first, released after, whatever `write` did); a
/// creation (`id` none) holds the session it creates, released after.
fn holding(
    fleet: &Fleet,
    id: Option<&str>,
    write: impl FnOnce() -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    if let Some(id) = id {
        fleet.acquire(id, false)?;
    }
    let outcome = write();
    for s in fleet.held() {
        fleet.release(&s)?;
    }
    outcome
}

/// `import` in a fleet: each file a new fleet session, refused whole when any part is refused.
fn import(fleet: &Fleet, paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let mut refused = 0;
    for path in paths {
        let name = path.display().to_string();
        let imported = std::fs::read(path)
            .with_context(|| format!("reading {name}"))
            .and_then(|bytes| Ok(fleet.import(&name, &bytes)?));
        match imported {
            Ok(i) => println!("imported {} into the fleet: {} events", i.id, i.events),
            Err(e) => {
                refused += 1;
                eprintln!("sessionlog: {e:#}");
            }
        }
    }
    Ok(match refused {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

/// `cluster init`: the schema and the grants, as the URL's role.
fn init(config: &Config, host_roles: &[String]) -> anyhow::Result<ExitCode> {
    let mut client = config.connect("creating the schema")?;
    let grants = schema::init(&mut client, host_roles)
        .map_err(|e| anyhow::anyhow!("creating the schema at {}: {e}", config.shown()))?;
    println!(
        "sessionlog schema version {} ready at {}",
        schema::VERSION,
        config.shown()
    );
    println!("privileges applied:");
    for g in grants {
        println!("  {g};");
    }
    Ok(ExitCode::SUCCESS)
}

/// `cluster add-host NAME`: host NAME's login role, a member of the host role.
fn add_host(config: &Config, name: &str) -> anyhow::Result<ExitCode> {
    let mut client = config.connect("adding a host")?;
    let applied = schema::add_host(&mut client, name)
        .map_err(|e| anyhow::anyhow!("adding host {name} at {}: {e}", config.shown()))?;
    println!(
        "host {name} may join the fleet at {} as role {name}",
        config.shown()
    );
    println!("privileges applied:");
    for statement in applied {
        println!("  {statement};");
    }
    Ok(ExitCode::SUCCESS)
}

/// What `cluster status --json` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    /// The schema's version.
    schema_version: i32,
    /// This host.
    host: &'a str,
    /// The fleet's sessions.
    sessions: usize,
    /// Sessions per owner (`(none)`: held by no host).
    owners: &'a std::collections::BTreeMap<String, u64>,
}

/// `cluster status`: the fleet's sessions by owner.
fn status(fleet: &Fleet, as_json: bool) -> anyhow::Result<ExitCode> {
    let rows = fleet.sessions()?;
    let mut owners: std::collections::BTreeMap<String, u64> = Default::default();
    for r in &rows {
        *owners
            .entry(r.owner.clone().unwrap_or_else(|| "(none)".into()))
            .or_default() += 1;
    }
    if as_json {
        let report = Status {
            schema_version: schema::VERSION,
            host: fleet.host(),
            sessions: rows.len(),
            owners: &owners,
        };
        report_line(&mut std::io::stdout().lock(), &report)?;
    } else {
        println!(
            "schema version {}; this host: {}",
            schema::VERSION,
            fleet.host()
        );
        println!("{} sessions", rows.len());
        for (owner, n) in owners {
            println!("  {owner}: {n}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `ls` in a fleet: every session as PostgreSQL records it.
fn list(fleet: &Fleet, as_json: bool) -> anyhow::Result<ExitCode> {
    for r in fleet.sessions()? {
        if as_json {
            report_line(&mut std::io::stdout().lock(), &r)?;
        } else {
            println!(
                "{}\t{}\tnext seq {}\towner {} (epoch {}){}",
                r.id,
                r.verdict,
                r.next_seq,
                r.owner.as_deref().unwrap_or("-"),
                r.epoch,
                if r.deleted { "\tdeleted" } else { "" }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The machine's host name (`/proc/sys/kernel/hostname`).
fn machine_name() -> anyhow::Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .context("reading the machine's host name; give --host")?;
    Ok(name.trim().to_owned())
}

/// The subcommand's name, for a refusal.
fn command_name(command: &Command) -> String {
    format!("{command:?}")
        .split([' ', '{', '('])
        .next()
        .unwrap_or_default()
        .to_lowercase()
}
