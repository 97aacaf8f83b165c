//! The host a command runs on ([`sessionlog_cluster::Host`]): the store in `--db` of its own, or,
//! with `--cluster`, as a one-shot host of that fleet. Every command asks the host, which decides
//! how (and whether) the command runs in a fleet.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use sessionlog_cluster::{Config, Fleet, FleetOptions, Host, LocalOnly, Tenure};
use sessionlog_engine::{Options, Store};

use crate::cli::Cli;

/// How a command uses a store of its own (a fleet's host always opens its store for writing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads only: opened beside a process that holds the store.
    Read,
    /// Writes.
    Write,
    /// Writes, appends checked by DSH's append rules (`append --strict`).
    StrictAppends,
    /// Follows: always opened beside whatever process holds the store or will hold it, so
    /// writers come and go while the command runs (`tail`).
    Follow,
}

/// Where a command's host is: the store directory, its options, and the fleet when `--cluster`.
pub struct Opener {
    db: PathBuf,
    options: Options,
    /// The fleet's configuration and `--host`.
    fleet: Option<(Config, Option<String>)>,
}

impl Opener {
    /// The host `cli` names (`--db`, the store flags, `--cluster` and `--host`).
    pub fn new(cli: &Cli) -> anyhow::Result<Opener> {
        let fleet = match &cli.cluster {
            Some(url) => Some((Config::parse(url)?, cli.host.clone())),
            None => None,
        };
        Ok(Opener {
            db: cli.db.clone(),
            options: cli.store.options(),
            fleet,
        })
    }

    /// The store's options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The fleet's configuration, or why there is none.
    pub fn config(&self) -> anyhow::Result<&Config> {
        match &self.fleet {
            Some((config, _)) => Ok(config),
            None => anyhow::bail!(
                "`sessionlog cluster` needs --cluster URL (or SESSIONLOG_CLUSTER): the fleet's PostgreSQL"
            ),
        }
    }

    /// Join the fleet as this host (`--cluster` required).
    pub fn fleet(&self) -> anyhow::Result<Fleet> {
        let config = self.config()?.clone();
        let options = FleetOptions {
            store: self.options.clone(),
            ..FleetOptions::new(self.host_name()?)
        };
        Fleet::open(&self.db, config, options)
            .with_context(|| format!("joining the fleet with the store at {}", self.db.display()))
    }

    /// Open the host for `access`.
    pub fn host(&self, access: Access) -> anyhow::Result<Host> {
        if self.fleet.is_some() {
            return Ok(Host::in_fleet(self.fleet()?, Tenure::OneShot)?);
        }
        let store = match access {
            Access::Read => {
                Store::open_reader(&self.db, self.options.clone()).with_context(|| {
                    format!("opening the store at {} for reading", self.db.display())
                })?
            }
            Access::Follow => {
                Store::open_beside(&self.db, self.options.clone()).with_context(|| {
                    format!("opening the store at {} for reading", self.db.display())
                })?
            }
            Access::Write | Access::StrictAppends => Store::open(
                &self.db,
                Options {
                    strict_appends: access == Access::StrictAppends,
                    ..self.options.clone()
                },
            )
            .with_context(|| format!("opening the store at {}", self.db.display()))?,
        };
        Ok(Host::local(store))
    }

    /// The host `serve` reads through: the store opened beside whatever process holds it, or,
    /// with `--cluster`, a serving host of that fleet, whose reads catch up the sessions they
    /// read (`sessionlog_console`).
    pub fn console_host(&self) -> anyhow::Result<Host> {
        match self.fleet {
            Some(_) => Ok(Host::in_fleet(self.fleet()?, Tenure::Serving)?),
            None => sessionlog_console::open_beside(&self.db, self.options.clone()),
        }
    }

    /// Run `command` on the host opened for `access`, then close it (in a fleet, giving up the
    /// sessions the command took); a failure to close is the command's.
    pub fn run(
        &self,
        access: Access,
        command: impl FnOnce(&Host) -> anyhow::Result<ExitCode>,
    ) -> anyhow::Result<ExitCode> {
        let host = self.host(access)?;
        let outcome = command(&host);
        host.close()?;
        outcome
    }

    /// The store directory, for `op`, which opens it itself; refused in a fleet.
    pub fn local_path(&self, op: LocalOnly) -> anyhow::Result<&Path> {
        match &self.fleet {
            Some(_) => Err(op.refused(&self.host_name()?).into()),
            None => Ok(&self.db),
        }
    }

    /// This host's name in the fleet: `--host`, else the machine's.
    fn host_name(&self) -> anyhow::Result<String> {
        match self.fleet.as_ref().and_then(|(_, host)| host.clone()) {
            Some(host) => Ok(host),
            None => machine_name(),
        }
    }
}

/// The machine's host name (`/proc/sys/kernel/hostname`).
fn machine_name() -> anyhow::Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .context("reading the machine's host name; give --host")?;
    Ok(name.trim().to_owned())
}
