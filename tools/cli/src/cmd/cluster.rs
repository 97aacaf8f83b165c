//! `sessionlog cluster init|add-host|status|acquire|release`: the fleet's own operations, with
//! `--cluster URL`. (Every other command runs on the host `open.rs` opens, in a fleet too.)

use std::process::ExitCode;

use serde::Serialize;
use sessionlog_cluster::{schema, Config, Fleet};
use sessionlog_tools_common::output::report_line;

use super::open::Opener;
use crate::cli::ClusterCommand;

/// Run `sessionlog cluster COMMAND` on the fleet `opener` reaches.
pub fn run(opener: &Opener, command: ClusterCommand) -> anyhow::Result<ExitCode> {
    let config = opener.config()?;
    match command {
        ClusterCommand::Init { host_roles } => init(config, &host_roles),
        ClusterCommand::AddHost { name } => add_host(config, &name),
        ClusterCommand::Status { json } => status(&opener.fleet()?, json),
        ClusterCommand::Acquire { id, force, json } => {
            let fleet = opener.fleet()?;
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
            let held = opener.fleet()?.release(&id)?;
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
    }
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
