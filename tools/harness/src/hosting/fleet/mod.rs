//! sessionlog as a fleet on PostgreSQL, for `bench hosting --cluster`: H host processes, each a
//! [`Fleet`] with its own store and its share of the sessions, against one throwaway PostgreSQL
//! 15 (`fsync` on) the bench starts and stops.
//!
//! Module map: [`FleetHost`] (one host as a hosting-benchmark system: the store's group commits
//! go to PostgreSQL first, one `append_batches` transaction per group, each batch fenced),
//! [`worker`] (a host process: ready, a start signal, one report line), [`processes`] (the
//! parent: starting the hosts, the start barrier, merging their reports).

pub mod processes;
pub mod worker;

use std::path::Path;

use sessionlog_cluster::{schema, Config, Fleet, FleetOptions};
use sessionlog_engine::Options;

use super::sessionlog::append_items;
use super::{Host, Item, PendingSessions, SessionStart};
use crate::gen::host_options;
use crate::postgres::{PgSetup, TempPostgres};

/// The role hosts connect as: the superuser, who may act as any host, so that the benches name
/// their hosts freely (a host's own login role runs the same functions, and may act only as
/// itself: `tests/cluster_roles.rs`).
const ROLE: &str = "postgres";

/// One fleet host. Sessions are created with their first batch, as
/// [`super::sessionlog::SessionlogHost`] creates them.
pub struct FleetHost {
    fleet: Fleet,
    /// Header lines of created sessions, until their first batch.
    pending: PendingSessions<String>,
}

impl FleetHost {
    /// Join the fleet `config` reaches as host `host`, with its store in `dir` (`options`, plus
    /// the projections the generated sessions need; its durability is the fleet's:
    /// PostgreSQL's).
    pub fn join(dir: &Path, config: Config, host: &str, options: Options) -> anyhow::Result<Self> {
        let fleet = Fleet::open(
            dir,
            config,
            FleetOptions {
                store: host_options(options),
                ..FleetOptions::new(host)
            },
        )?;
        Ok(FleetHost {
            fleet,
            pending: PendingSessions::new(),
        })
    }
}

/// A throwaway PostgreSQL 15 (`fsync` on) holding the fleet's schema, and the configuration a
/// host joins it with (as [`ROLE`]).
pub fn fleet_postgres() -> anyhow::Result<(TempPostgres, Config)> {
    let postgres = TempPostgres::start(&PgSetup::default())?;
    let config = Config::parse(&host_url(&postgres))?;
    schema::init(&mut config.connect("creating the schema")?, &[])?;
    Ok((postgres, config))
}

/// The URL a host of [`fleet_postgres`]'s server connects with.
pub fn host_url(postgres: &TempPostgres) -> String {
    format!("{}?sslmode=disable", postgres.url(ROLE, "postgres"))
}

impl Host for FleetHost {
    fn name(&self) -> &'static str {
        "fleet"
    }

    fn create(&self, start: &SessionStart<'_>) -> anyhow::Result<()> {
        self.pending.hold(start.id, start.header_line.to_owned())
    }

    fn append(&self, items: Vec<Item<'_>>, _acked: &mut dyn FnMut(usize)) -> anyhow::Result<()> {
        append_items(&self.pending, items, |batch| self.fleet.append_many(batch))
    }
}
