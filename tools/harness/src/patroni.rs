//! A throwaway highly available PostgreSQL for the database-failover harness: a 3-member etcd
//! and two or three Patroni nodes managing PostgreSQL 15 with `synchronous_mode` and
//! `synchronous_mode_strict` (a commit is acknowledged only once it is on the leader and its
//! synchronous standby; with three nodes the third is an asynchronous replica that Patroni makes
//! the synchronous standby when the old one is promoted) and `use_pg_rewind` (a killed leader
//! rejoins as a standby), all on loopback ports in a temp dir, run as the `postgres` user under
//! root (PostgreSQL refuses root), stopped and removed on drop. Never a system service.
//!
//! A node's death is a machine's: [`PatroniCluster::kill`] SIGKILLs its Patroni and every process
//! of its PostgreSQL at once. [`PatroniCluster::restart`] boots it again on its data directory.
//!
//! Binaries: `etcd` (Debian `etcd-server`), `patroni` (Debian `patroni`) on PATH, PostgreSQL's
//! from [`crate::postgres`]'s directory; the project's `x` installs them when missing.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sessionlog_codec::json::{parse, Value};

use crate::postgres::{bin_dir, free_port, own};

/// Members of the etcd cluster (a majority survives one loss).
const ETCD_MEMBERS: usize = 3;
/// Patroni's leader key lives this long without renewal: a dead leader is replaced after it.
const TTL_SECONDS: u32 = 10;
/// How long a node may take to bootstrap, promote or rejoin before the harness gives up.
const NODE_PATIENCE: Duration = Duration::from_secs(120);

/// Whether `etcd` and `patroni` are on PATH and PostgreSQL's server binaries are installed.
pub fn available() -> bool {
    crate::postgres::available() && on_path("etcd") && on_path("patroni")
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// One Patroni node.
struct Node {
    name: String,
    pg_port: u16,
    api_port: u16,
    config: PathBuf,
    data: PathBuf,
    log: PathBuf,
    process: Option<Child>,
}

/// A running etcd + Patroni cluster; dropped, every process is killed and the directory removed.
pub struct PatroniCluster {
    dir: tempfile::TempDir,
    /// The user the servers run as (`postgres` under root), by uid and gid.
    run_as: Option<(u32, u32)>,
    etcd: Vec<Child>,
    nodes: Vec<Node>,
}

impl PatroniCluster {
    /// Start etcd, then node 0 (which bootstraps the database and leads), then the other
    /// `nodes - 1` (standbys cloned from it; 2 or 3 nodes in all); return once every standby
    /// replicates and one is the synchronous standby.
    pub fn start(nodes: usize) -> anyhow::Result<PatroniCluster> {
        if !(2..=3).contains(&nodes) {
            bail!("the failover cluster has 2 or 3 Patroni nodes, not {nodes}");
        }
        if !available() {
            bail!("the database-failover cluster needs etcd and patroni on PATH and PostgreSQL 15 (Debian's etcd-server, patroni, postgresql-15)");
        }
        let dir = tempfile::Builder::new()
            .prefix("sessionlog-patroni-")
            .tempdir()
            .context("creating the cluster's directory")?;
        let run_as = match rustix::process::geteuid().is_root() {
            true => Some(user_ids("postgres")?),
            false => None,
        };
        let mut cluster = PatroniCluster {
            dir,
            run_as,
            etcd: Vec::new(),
            nodes: Vec::new(),
        };
        let etcd_ports: Vec<(u16, u16)> = (0..ETCD_MEMBERS)
            .map(|_| Ok((free_port()?, free_port()?)))
            .collect::<anyhow::Result<_>>()?;
        let etcd_clients: Vec<String> = etcd_ports
            .iter()
            .map(|(client, _)| format!("127.0.0.1:{client}"))
            .collect();
        for n in 0..nodes {
            let node = cluster.write_node(n, &etcd_clients)?;
            cluster.nodes.push(node);
        }
        if cluster.run_as.is_some() {
            own(cluster.dir.path(), "postgres")?;
        }
        cluster.start_etcd(&etcd_ports)?;
        cluster.restart(0)?;
        cluster.wait_leader(0)?;
        for n in 1..nodes {
            cluster.restart(n)?;
            cluster.wait_rejoined(n)?;
        }
        Ok(cluster)
    }

    /// A libpq URL naming every node for `user` (no password) on database `db`: it reaches
    /// whichever node is the read-write primary.
    pub fn url(&self, user: &str, db: &str) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.pg_port))
            .collect();
        format!(
            "postgres://{user}@{}/{db}?target_session_attrs=read-write&sslmode=disable",
            hosts.join(",")
        )
    }

    /// Each node's PostgreSQL port on loopback, by node.
    pub fn pg_ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.pg_port).collect()
    }

    /// The index of the node that holds the leader lock, if any answers so.
    pub fn leader(&self) -> Option<usize> {
        (0..self.nodes.len()).find(|&n| self.answers(n, "/leader"))
    }

    /// Wait until node `n` holds the leader lock.
    pub fn wait_leader(&self, n: usize) -> anyhow::Result<()> {
        self.wait_for(&format!("{} to lead", self.nodes[n].name), || {
            self.answers(n, "/leader")
        })
    }

    /// Wait until a node other than `dead` holds the leader lock; which one.
    pub fn wait_new_leader(&self, dead: usize) -> anyhow::Result<usize> {
        let others = || (0..self.nodes.len()).filter(|&n| n != dead);
        self.wait_for("another node to lead", || {
            others().any(|n| self.answers(n, "/leader"))
        })?;
        others()
            .find(|&n| self.answers(n, "/leader"))
            .context("the new leader lost the lock at once")
    }

    /// Wait until node `n` runs as a replica and some node is the leader's synchronous standby
    /// (with two nodes, `n` itself).
    pub fn wait_rejoined(&self, n: usize) -> anyhow::Result<()> {
        self.wait_for(
            &format!(
                "{} to replicate, and a synchronous standby",
                self.nodes[n].name
            ),
            || {
                self.answers(n, "/replica")
                    && (0..self.nodes.len()).any(|m| self.answers(m, "/sync"))
            },
        )
    }

    /// Whether node `n`'s REST API answers `GET path` with 200 (Patroni's health checks:
    /// `/leader` on the node holding the leader lock, `/replica` on a running replica, `/sync`
    /// on a synchronous standby).
    fn answers(&self, n: usize, path: &str) -> bool {
        self.nodes[n].process.is_some()
            && get(self.nodes[n].api_port, path).is_ok_and(|(status, _)| status == 200)
    }

    /// Kill node `n` as a machine dies: SIGKILL to its Patroni, its postmaster and every
    /// process of either, at once. Its lock file goes too (a rebooted machine has none of the
    /// old processes; this one's may linger as unreaped zombies that Patroni would take for a
    /// running server). Returns when the signals went.
    pub fn kill(&mut self, n: usize) -> anyhow::Result<Instant> {
        let node = &mut self.nodes[n];
        let mut pids = Vec::new();
        if let Some(process) = &node.process {
            pids.push(process.id());
            pids.extend(crate::process_tree::descendants(process.id()));
        }
        let pid_file = node.data.join("postmaster.pid");
        if let Some(postmaster) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.lines().next()?.trim().parse::<u32>().ok())
        {
            pids.push(postmaster);
            pids.extend(crate::process_tree::descendants(postmaster));
        }
        for pid in &pids {
            if let Some(pid) = i32::try_from(*pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        let killed = Instant::now();
        if let Some(mut process) = node.process.take() {
            process.wait().context("reaping a killed Patroni")?;
        }
        match std::fs::remove_file(&pid_file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", pid_file.display()))
            }
            _ => Ok(killed),
        }
    }

    /// Kill every node and etcd member.
    pub fn kill_all(&mut self) {
        for n in 0..self.nodes.len() {
            let _ = self.kill(n);
        }
        for mut member in self.etcd.drain(..) {
            let _ = member.kill();
            let _ = member.wait();
        }
    }

    /// Start node `n`'s Patroni (again): it bootstraps, clones, or rejoins on its data
    /// directory (rewinding it when it was a leader the cluster moved past).
    pub fn restart(&mut self, n: usize) -> anyhow::Result<()> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.nodes[n].log)
            .with_context(|| format!("opening {}", self.nodes[n].log.display()))?;
        let mut command = Command::new("patroni");
        command.arg(&self.nodes[n].config);
        let process = self
            .spawn(command, log)
            .with_context(|| format!("starting Patroni for {}", self.nodes[n].name))?;
        self.nodes[n].process = Some(process);
        Ok(())
    }

    /// The last lines of every node's log (for a failure's report).
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            let text = std::fs::read_to_string(&node.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("--- {} (last lines)\n", node.name));
            for line in &lines[lines.len().saturating_sub(15)..] {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// Poll `ready` until it holds, for at most [`NODE_PATIENCE`].
    fn wait_for(&self, what: &str, ready: impl Fn() -> bool) -> anyhow::Result<()> {
        let deadline = Instant::now() + NODE_PATIENCE;
        while !ready() {
            if Instant::now() >= deadline {
                let cluster: Vec<String> = self
                    .nodes
                    .iter()
                    .filter_map(|n| get(n.api_port, "/cluster").ok().map(|(_, body)| body))
                    .collect();
                bail!(
                    "waited {NODE_PATIENCE:?} for {what}; the nodes say: {cluster:?}\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Start the etcd members on their (client, peer) `ports` and wait until each is healthy.
    fn start_etcd(&mut self, ports: &[(u16, u16)]) -> anyhow::Result<()> {
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("e{i}=http://127.0.0.1:{peer}"))
            .collect();
        for (i, (client, peer)) in ports.iter().enumerate() {
            let log = File::create(self.dir.path().join(format!("etcd{i}.log")))?;
            let mut command = Command::new("etcd");
            command
                .args(["--name", &format!("e{i}"), "--data-dir"])
                .arg(self.dir.path().join(format!("etcd{i}")))
                .args([
                    "--listen-client-urls",
                    &format!("http://127.0.0.1:{client}"),
                    "--advertise-client-urls",
                    &format!("http://127.0.0.1:{client}"),
                    "--listen-peer-urls",
                    &format!("http://127.0.0.1:{peer}"),
                    "--initial-advertise-peer-urls",
                    &format!("http://127.0.0.1:{peer}"),
                    "--initial-cluster",
                    &initial.join(","),
                    "--initial-cluster-state",
                    "new",
                    // Slower than the defaults (100/1000 ms): the machine's cores are shared,
                    // and a starved member must not start elections of its own.
                    "--heartbeat-interval",
                    "250",
                    "--election-timeout",
                    "2500",
                ]);
            let process = self.spawn(command, log).context("starting etcd")?;
            self.etcd.push(process);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        for (client, _) in ports {
            while !get(*client, "/health").is_ok_and(|(_, body)| {
                parse(&body).is_ok_and(|v| {
                    v.as_object()
                        .and_then(|o| o.get("health"))
                        .and_then(Value::as_str)
                        == Some("true")
                })
            }) {
                if Instant::now() >= deadline {
                    bail!("etcd on port {client} did not become healthy within a minute");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }

    /// Node `n`'s directory and Patroni configuration.
    fn write_node(&self, n: usize, etcd: &[String]) -> anyhow::Result<Node> {
        let name = format!("node{n}");
        let home = self.dir.path().join(&name);
        std::fs::create_dir_all(&home)?;
        let (pg_port, api_port) = (free_port()?, free_port()?);
        let data = home.join("data");
        let yaml = format!(
            "scope: sessionlog-failover
name: {name}
restapi:
  listen: 127.0.0.1:{api_port}
  connect_address: 127.0.0.1:{api_port}
etcd3:
  hosts: {hosts}
bootstrap:
  dcs:
    ttl: {TTL_SECONDS}
    loop_wait: 2
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 100
        wal_log_hints: 'on'
  initdb:
  - encoding: UTF8
  - auth: trust
postgresql:
  listen: 127.0.0.1:{pg_port}
  connect_address: 127.0.0.1:{pg_port}
  data_dir: {data}
  bin_dir: {bin}
  pgpass: {home}/pgpass
  use_pg_rewind: true
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
  authentication:
    superuser:
      username: postgres
      password: unused
    replication:
      username: replicator
      password: unused
  parameters:
    unix_socket_directories: '{home}'
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
",
            hosts = etcd.join(","),
            data = data.display(),
            bin = bin_dir().display(),
            home = home.display(),
        );
        let config = home.join("patroni.yml");
        std::fs::write(&config, yaml).with_context(|| format!("writing {}", config.display()))?;
        Ok(Node {
            log: self.dir.path().join(format!("{name}.log")),
            name,
            pg_port,
            api_port,
            config,
            data,
            process: None,
        })
    }

    /// Spawn `command` as the servers' user, in the cluster's directory, output to `log`.
    fn spawn(&self, mut command: Command, log: File) -> anyhow::Result<Child> {
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid).env("HOME", self.dir.path());
        }
        Ok(command
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?)
    }
}

impl Drop for PatroniCluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// The uid and gid of `user`, from `/etc/passwd`.
fn user_ids(user: &str) -> anyhow::Result<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").context("reading /etc/passwd")?;
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            match fields.as_slice() {
                [name, _, uid, gid, ..] if *name == user => {
                    Some((uid.parse().ok()?, gid.parse().ok()?))
                }
                _ => None,
            }
        })
        .with_context(|| format!("no user {user} (Debian's postgresql package creates it)"))
}

/// `GET path` from the HTTP server on loopback `port`: its status and body.
fn get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    let timeout = Duration::from_secs(2);
    let mut stream =
        TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], port)), timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .context("an HTTP answer without a body")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("an HTTP answer without a status")?;
    Ok((status, body.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_every_node_and_asks_for_the_primary() {
        let node = |n: u16| Node {
            name: format!("node{n}"),
            pg_port: 5000 + n,
            api_port: 6000 + n,
            config: PathBuf::new(),
            data: PathBuf::new(),
            log: PathBuf::new(),
            process: None,
        };
        let cluster = PatroniCluster {
            dir: tempfile::tempdir().expect("temp dir"),
            run_as: None,
            etcd: Vec::new(),
            nodes: vec![node(0), node(1), node(2)],
        };
        assert_eq!(
            cluster.url("h", "postgres"),
            "postgres://h@127.0.0.1:5000,127.0.0.1:5001,127.0.0.1:5002/postgres?target_session_attrs=read-write&sslmode=disable"
        );
        let config = sessionlog_cluster::Config::parse(&cluster.url("h", "postgres"))
            .expect("the fleet parses a multi-host URL");
        assert!(config.shown().contains("5001"));
    }
}
