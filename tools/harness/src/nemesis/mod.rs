//! The fleet under a nemesis, behind `sessionlog-harness stress --fleet-nemesis` and the nemesis
//! test, in the spirit of Jepsen: three host processes ([`host`], driven by [`hosts`]) over one
//! to three PostgreSQL nodes (a plain server for one, [`crate::patroni`] for two or three), each
//! host reaching PostgreSQL through its own blackholing proxy ([`proxy`]), all on loopback in
//! temp dirs and stopped after. Clients ([`clients`]) make seeded random calls on a small set of
//! ids while the nemesis ([`faults`]) pauses, kills and cuts off hosts and kills the database's
//! leader. Every call, answer and fault goes to the [`history`]; at the end every fault is
//! healed and, a read bound later (when no host trusts a copy PostgreSQL has not confirmed),
//! each host catches up on every id and dumps its store, PostgreSQL's rows are read, and
//! [`check`] judges the history against that final state and the read guarantee.
//!
//! The run is bounded: clients and nemesis stop at the deadline, each call waits at most
//! [`hosts::CALL_PATIENCE`], each database step Patroni's patience, the final dumps
//! [`DUMP_PATIENCE`]; every process and proxy is stopped on every path out (drops).

pub mod check;
mod clients;
mod faults;
pub mod history;
pub mod host;
mod hosts;
pub mod proxy;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sessionlog_cluster::{schema, Config, FleetOptions};
use sessionlog_codec::json::Value;

use crate::patroni::PatroniCluster;
use crate::postgres::{PgSetup, TempPostgres};
use check::{FinalBatch, FinalSession, FinalState, Finding, LocalCopy, ReadGuarantee};
use clients::Clients;
use faults::Nemesis;
use history::History;
use host::HostSpec;
use hosts::Hosts;
use proxy::{Proxy, Switch};

pub use clients::KINDS;
pub use faults::FAULTS;

/// How long a host may take to catch up on every id and dump its store at the end.
const DUMP_PATIENCE: Duration = Duration::from_secs(180);
/// How long the database may take to have a leader again at the end.
const LEADER_PATIENCE: Duration = Duration::from_secs(120);

/// What the run does.
#[derive(Clone, Debug)]
pub struct NemesisOptions {
    /// How long clients and nemesis run. Default: 2 minutes.
    pub duration: Duration,
    /// The seed of every client's and the nemesis's choices. Default: 7.
    pub seed: u64,
    /// PostgreSQL nodes: 1 (a plain server) or 2–3 (Patroni). Default: 2.
    pub nodes: usize,
    /// Host processes. Default: 3.
    pub hosts: usize,
    /// Client threads. Default: 6.
    pub clients: usize,
    /// Session ids the calls pick from (`s0`…). Default: 6.
    pub ids: usize,
    /// The call kinds the clients make (of [`KINDS`]). Default: all.
    pub kinds: Vec<&'static str>,
    /// The fault kinds the nemesis injects (of [`FAULTS`]). Default: all.
    pub faults: Vec<&'static str>,
    /// The hosts' lease: short, so that a paused host's sessions are taken without force.
    /// Default: 3 s.
    pub lease: Duration,
    /// The hosts' group-commit patience. Default: 4 s.
    pub commit_patience: Duration,
    /// The hosts' read bound (`FleetOptions::read_bound`; a host trusts its copy for at most
    /// the lease), which the checker holds stale reads to. Default: the fleet's, 10 s.
    pub read_bound: Duration,
}

impl Default for NemesisOptions {
    fn default() -> Self {
        NemesisOptions {
            duration: Duration::from_secs(120),
            seed: 7,
            nodes: 2,
            hosts: 3,
            clients: 6,
            ids: 6,
            kinds: KINDS.iter().map(|(k, _)| *k).collect(),
            faults: FAULTS.to_vec(),
            lease: Duration::from_secs(3),
            commit_patience: Duration::from_secs(4),
            read_bound: FleetOptions::new("").read_bound,
        }
    }
}

/// What a run did and what the checker found.
#[derive(Clone, Debug, Default)]
pub struct NemesisReport {
    /// Every call, answer and fault.
    pub history: History,
    /// The checker's findings (none in a clean run).
    pub findings: Vec<Finding>,
    /// Sessions PostgreSQL held at the end.
    pub sessions: usize,
    /// Wall time of the whole run, setup and check included.
    pub seconds: f64,
}

impl NemesisReport {
    /// Calls by kind.
    pub fn operations(&self) -> BTreeMap<&'static str, u64> {
        count(self.history.ops.iter().map(|o| o.call.kind()))
    }

    /// Answers by outcome (`acknowledged`, `refused`, `unknown`).
    pub fn answers(&self) -> BTreeMap<&'static str, u64> {
        count(self.history.ops.iter().map(|o| o.answer.outcome.kind()))
    }

    /// Refusals by code.
    pub fn refusals(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for op in &self.history.ops {
            if let history::Outcome::Refused { code } = &op.answer.outcome {
                *out.entry(code.clone()).or_default() += 1;
            }
        }
        out
    }

    /// Faults by kind.
    pub fn faults(&self) -> BTreeMap<&'static str, u64> {
        count(self.history.faults.iter().map(|f| f.kind))
    }

    /// The history lines that show `finding`: its calls, and the faults and calls on its
    /// session around them (at most `limit` lines).
    pub fn excerpt(&self, finding: &Finding, limit: usize) -> Vec<String> {
        let ops: Vec<&history::Op> = self
            .history
            .ops
            .iter()
            .filter(|o| finding.ops.contains(&o.index))
            .collect();
        let ops = match (&finding.session, ops.is_empty()) {
            // A final state's finding: the calls that changed the session's life, last ones.
            (Some(session), true) => {
                let mut life: Vec<&history::Op> = self
                    .history
                    .ops
                    .iter()
                    .filter(|o| {
                        !matches!(
                            o.call,
                            history::Call::Read { .. } | history::Call::Append { .. }
                        ) && (o.call.session() == Some(session.as_str())
                            || o.answer.purged.contains(session))
                    })
                    .collect();
                life.sort_by_key(|o| o.invoked);
                life.split_off(life.len().saturating_sub(limit))
            }
            _ => ops,
        };
        let from = ops.iter().map(|o| o.invoked).min().unwrap_or_default();
        let to = ops
            .iter()
            .map(|o| o.completed)
            .max()
            .unwrap_or(Duration::MAX);
        let mut lines: Vec<(Duration, String)> =
            ops.iter().map(|o| (o.invoked, o.line())).collect();
        lines.extend(
            self.history
                .faults
                .iter()
                .filter(|f| f.healed >= from.saturating_sub(Duration::from_secs(5)) && f.at <= to)
                .map(|f| (f.at, f.line())),
        );
        lines.sort();
        lines.into_iter().take(limit).map(|(_, l)| l).collect()
    }
}

fn count<K: Ord>(items: impl Iterator<Item = K>) -> BTreeMap<K, u64> {
    let mut out = BTreeMap::new();
    for k in items {
        *out.entry(k).or_default() += 1;
    }
    out
}

/// The run's PostgreSQL.
pub(crate) enum Database {
    /// One plain server.
    Single(TempPostgres),
    /// etcd and Patroni nodes.
    Patroni(PatroniCluster),
}

impl Database {
    fn start(nodes: usize) -> anyhow::Result<Database> {
        Ok(match nodes {
            1 => Database::Single(TempPostgres::start(&PgSetup::default())?),
            2 | 3 => Database::Patroni(PatroniCluster::start(nodes)?),
            n => bail!("the nemesis run has 1 to 3 PostgreSQL nodes, not {n}"),
        })
    }

    /// Each node's PostgreSQL port.
    fn ports(&self) -> Vec<u16> {
        match self {
            Database::Single(pg) => vec![pg.port()],
            Database::Patroni(cluster) => cluster.pg_ports(),
        }
    }

    /// A URL for `user` reaching the primary among `ports` (a node's own or its proxy's).
    fn url(user: &str, ports: &[u16]) -> String {
        let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!(
            "postgres://{user}@{}/postgres?target_session_attrs=read-write&sslmode=disable",
            hosts.join(",")
        )
    }

    /// Wait until some node leads (Patroni), at most [`LEADER_PATIENCE`].
    fn wait_leader(&self) -> anyhow::Result<()> {
        if let Database::Patroni(cluster) = self {
            let deadline = Instant::now() + LEADER_PATIENCE;
            while cluster.leader().is_none() {
                if Instant::now() >= deadline {
                    bail!(
                        "no database node leads after {LEADER_PATIENCE:?}\n{}",
                        cluster.logs()
                    );
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }
}

/// Run the harness (see the module docs): hosts run `exe nemesis-host …`, stores and logs go
/// in `dir`. Returns the history and the findings; fails only when the run itself could not be
/// carried out (a server that would not start, a host that would not join).
pub fn run(opts: &NemesisOptions, exe: &Path, dir: &Path) -> anyhow::Result<NemesisReport> {
    let began = Instant::now();
    let mut db = Database::start(opts.nodes)?;
    let admin = Config::parse(&Database::url("postgres", &db.ports()))?;
    let mut client = admin.connect("creating the fleet's schema")?;
    schema::init(&mut client, &[])?;
    // Each host connects as its own login role, named as the host: the fence binds the two.
    for h in 0..opts.hosts {
        schema::add_host(&mut client, &format!("host{h}"))?;
    }
    drop(client);

    let switches: Vec<Arc<Switch>> = (0..opts.hosts).map(|_| Arc::default()).collect();
    let mut proxies: Vec<Proxy> = Vec::new();
    let mut specs = Vec::new();
    for (h, switch) in switches.iter().enumerate() {
        let mut ports = Vec::new();
        for port in db.ports() {
            let proxy = Proxy::start(SocketAddr::from(([127, 0, 0, 1], port)), Arc::clone(switch))?;
            ports.push(proxy.port());
            proxies.push(proxy);
        }
        specs.push(HostSpec {
            url: Database::url(&format!("host{h}"), &ports),
            host: format!("host{h}"),
            dir: dir.join(format!("host{h}")),
            lease: opts.lease,
            commit_patience: opts.commit_patience,
            read_bound: opts.read_bound,
        });
    }
    let hosts = Hosts::start(exe.to_path_buf(), dir.to_path_buf(), specs)?;

    let history = Mutex::new(History::default());
    let start = Instant::now();
    let deadline = start + opts.duration;
    let ids: Vec<String> = (0..opts.ids.max(1)).map(|i| format!("s{i}")).collect();
    let clients = Clients {
        hosts: &hosts,
        history: &history,
        ids: ids.clone(),
        kinds: KINDS
            .iter()
            .copied()
            .filter(|(k, _)| opts.kinds.contains(k))
            .collect(),
        next_op: AtomicU64::new(1),
        start,
        deadline,
    };
    let nemesis = Nemesis {
        hosts: &hosts,
        switches: &switches,
        history: &history,
        faults: opts.faults.clone(),
        start,
        deadline,
    };
    let injected = std::thread::scope(|scope| {
        for c in 0..opts.clients.max(1) {
            let clients = &clients;
            scope.spawn(move || clients.run(c, opts.seed));
        }
        let injected = nemesis.run(&mut db, opts.seed);
        nemesis.heal_all();
        injected
    });
    injected.context("injecting a fault")?;
    nemesis.restart_exited()?;
    hosts.wait_ready(hosts::JOIN_PATIENCE)?;
    db.wait_leader()?;
    // The read guarantee lets a host serve a session it held from its own copy for up to the
    // read bound after PostgreSQL last confirmed its hold; every takeover is over by now, so a
    // bound from here every host's catch-up asks PostgreSQL, and the dumps are the fleet's.
    let guarantee = ReadGuarantee::of(opts.read_bound, opts.lease);
    std::thread::sleep(guarantee.bound);

    let mut state = FinalState::default();
    for h in 0..hosts.count() {
        let (copies, failures) = parse_dump(&hosts.dump(h, &ids, DUMP_PATIENCE)?)
            .with_context(|| format!("host{h}'s final state"))?;
        state.hosts.push(copies);
        state.catch_up_failures.push(failures);
    }
    let mut client = admin.connect("reading the final state")?;
    state.postgres = read_postgres(&mut client)?;
    drop(client);
    hosts.stop_all();
    drop(hosts);
    drop(proxies);
    drop(db);

    let history = history.into_inner().unwrap_or_else(PoisonError::into_inner);
    let findings = check::check(&history, &state, guarantee);
    write_history(&dir.join("history.txt"), &history)?;
    Ok(NemesisReport {
        sessions: state.postgres.len(),
        history,
        findings,
        seconds: began.elapsed().as_secs_f64(),
    })
}

/// A host's dump answer as its copies and its failed catch-ups.
fn parse_dump(
    o: &sessionlog_codec::json::Object,
) -> anyhow::Result<(BTreeMap<String, LocalCopy>, Vec<String>)> {
    let mut copies = BTreeMap::new();
    for s in o
        .get("sessions")
        .and_then(Value::as_array)
        .context("a dump lists its sessions")?
    {
        let s = s.as_object().context("a dumped session is an object")?;
        let id = s.get("id").and_then(Value::as_str).context("a dumped id")?;
        copies.insert(
            id.to_owned(),
            LocalCopy {
                bytes: s
                    .get("bytes")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .as_bytes()
                    .to_vec(),
                deleted: matches!(s.get("deleted"), Some(Value::Bool(true))),
            },
        );
    }
    let failures = history::string_list(o, "failures");
    Ok((copies, failures))
}

/// PostgreSQL's sessions and batch rows.
fn read_postgres(client: &mut postgres::Client) -> anyhow::Result<BTreeMap<String, FinalSession>> {
    let mut sessions: BTreeMap<String, FinalSession> = BTreeMap::new();
    for row in client.query(
        "SELECT id, header, deleted_at IS NOT NULL, parent_id IS NOT NULL FROM sessionlog.sessions",
        &[],
    )? {
        sessions.insert(
            row.get(0),
            FinalSession {
                header: row.get(1),
                batches: Vec::new(),
                deleted: row.get(2),
                forked: row.get(3),
            },
        );
    }
    for row in client.query(
        "SELECT session_id, batch, first_seq, events, bytes, crc FROM sessionlog.batches \
         ORDER BY session_id, batch",
        &[],
    )? {
        let id: String = row.get(0);
        let number = |i: usize| u64::try_from(row.get::<_, i64>(i)).unwrap_or(u64::MAX);
        let bytes: Vec<u8> = row.get(4);
        let crc_ok = i64::from(crc32fast::hash(&bytes)) == row.get::<_, i64>(5);
        sessions.entry(id).or_default().batches.push(FinalBatch {
            batch: number(1),
            first_seq: number(2),
            events: number(3),
            bytes,
            crc_ok,
        });
    }
    Ok(sessions)
}

/// The history as text, a line per call and fault in time order (kept in the run's directory).
fn write_history(path: &Path, history: &History) -> anyhow::Result<()> {
    let mut lines: Vec<(Duration, String)> =
        history.ops.iter().map(|o| (o.invoked, o.line())).collect();
    lines.extend(history.faults.iter().map(|f| (f.at, f.line())));
    lines.sort();
    let mut text: String = lines.into_iter().map(|(_, l)| l + "\n").collect();
    for exit in &history.exits {
        text.push_str(exit);
        text.push('\n');
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
