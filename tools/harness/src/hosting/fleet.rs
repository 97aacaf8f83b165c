//! sessionlog as one host of a fleet, for `bench hosting --cluster`: the same store, its group
//! commits going to PostgreSQL first (one `append_batches` transaction per group, each batch
//! fenced), on a throwaway PostgreSQL 15 the host starts (in the system's temp directory, `fsync`
//! on) and stops when it is dropped. Sessions are created with their first batch, as
//! [`super::sessionlog::SessionlogHost`] creates them.

use std::path::Path;

use sessionlog_cluster::{schema, Config, Fleet, FleetOptions};
use sessionlog_engine::Options;

use super::sessionlog::append_items;
use super::{Host, Item, PendingSessions, SessionStart};
use crate::gen::host_options;
use crate::postgres::{PgSetup, TempPostgres};

/// The login role the host connects as.
const ROLE: &str = "bench_host";

/// A fleet host on its own PostgreSQL.
pub struct FleetHost {
    fleet: Fleet,
    /// Header lines of created sessions, until their first batch.
    pending: PendingSessions<String>,
    /// Declared last, so dropped last: the server stops once the host has let go of it.
    postgres: TempPostgres,
}

impl FleetHost {
    /// Start PostgreSQL with the fleet's schema and a host role, and join it as host
    /// `bench-host` with its store in `dir` (`options`, plus the projections the generated
    /// sessions need; its durability is the fleet's: PostgreSQL's).
    pub fn start(dir: &Path, options: Options) -> anyhow::Result<Self> {
        let (postgres, config) = fleet_postgres()?;
        let fleet = Fleet::open(
            dir,
            config,
            FleetOptions {
                store: host_options(options),
                ..FleetOptions::new("bench-host")
            },
        )?;
        Ok(FleetHost {
            fleet,
            pending: PendingSessions::new(),
            postgres,
        })
    }
}

/// A throwaway PostgreSQL 15 (`fsync` on) holding the fleet's schema, and the configuration a
/// host joins it with (the login role [`ROLE`], a member of the fleet's host role).
pub fn fleet_postgres() -> anyhow::Result<(TempPostgres, Config)> {
    let postgres = TempPostgres::start(&PgSetup::default())?;
    postgres.psql(&format!("CREATE ROLE {ROLE} LOGIN"))?;
    let admin = Config::parse(&format!(
        "{}?sslmode=disable",
        postgres.url("postgres", "postgres")
    ))?;
    schema::init(
        &mut admin.connect("creating the schema")?,
        &[ROLE.to_owned()],
    )?;
    let config = Config::parse(&format!(
        "{}?sslmode=disable",
        postgres.url(ROLE, "postgres")
    ))?;
    Ok((postgres, config))
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

    fn server_cpu_time(&self) -> Option<std::time::Duration> {
        self.postgres.cpu_time()
    }
}
