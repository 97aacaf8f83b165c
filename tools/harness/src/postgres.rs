//! A throwaway PostgreSQL cluster for tests and benchmarks: `initdb` in a temp directory, the
//! server on a loopback port, stopped and removed on drop. PostgreSQL refuses to run as root, so
//! under root the cluster belongs to, and runs as, the `postgres` user (which Debian's package
//! creates). Optionally TLS-only, with a self-signed CA and server certificate made by the
//! `openssl` command.
//!
//! Binaries: `$SESSIONLOG_PG_BIN`, else `/usr/lib/postgresql/15/bin` (Debian's
//! `postgresql-15`, which the project's scripts install when missing).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

/// Where PostgreSQL's server binaries are.
pub(crate) fn bin_dir() -> PathBuf {
    std::env::var_os("SESSIONLOG_PG_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"))
}

/// Whether PostgreSQL's server binaries are installed (the cluster tests need them).
pub fn available() -> bool {
    bin_dir().join("initdb").is_file()
}

/// How to start the cluster.
#[derive(Clone, Debug, Default)]
pub struct PgSetup {
    /// Accept TCP connections only over TLS (`hostssl`), with a self-signed certificate for
    /// `127.0.0.1` and `localhost` signed by a CA whose PEM file is [`TempPostgres::ca`]; the
    /// superuser is trusted there, every other role needs its password (scram-sha-256).
    pub tls_only: bool,
    /// Lines added to `postgresql.conf`.
    pub settings: Vec<String>,
}

/// A running throwaway cluster; dropped, it is stopped and its directory removed.
pub struct TempPostgres {
    dir: tempfile::TempDir,
    port: u16,
    /// Run the server's commands as this user (`postgres` under root).
    run_as: Option<String>,
}

impl TempPostgres {
    /// Initialize and start a cluster; its superuser is `postgres`, trusted on the unix socket
    /// and on loopback TCP (over TLS only with `tls_only`).
    pub fn start(setup: &PgSetup) -> anyhow::Result<TempPostgres> {
        let bin = bin_dir();
        if !available() {
            bail!(
                "PostgreSQL is not installed ({} has no initdb): install Debian's postgresql-15",
                bin.display()
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("sessionlog-pg-")
            .tempdir()
            .context("creating the cluster's directory")?;
        let run_as = rustix::process::geteuid()
            .is_root()
            .then(|| "postgres".to_owned());
        let pg = TempPostgres {
            dir,
            port: free_port()?,
            run_as,
        };
        if pg.run_as.is_some() {
            own(pg.dir.path(), "postgres")?;
        }
        pg.run(
            &bin.join("initdb"),
            &[
                "-D",
                &pg.data().display().to_string(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
            ],
        )?;
        let mut conf = vec![
            format!("port = {}", pg.port),
            "listen_addresses = '127.0.0.1'".to_owned(),
            format!("unix_socket_directories = '{}'", pg.dir.path().display()),
            "max_connections = 200".to_owned(),
        ];
        let mut hba = vec!["local all all trust".to_owned()];
        if setup.tls_only {
            pg.make_certificates()?;
            conf.push("ssl = on".to_owned());
            conf.push("ssl_cert_file = 'server.crt'".to_owned());
            conf.push("ssl_key_file = 'server.key'".to_owned());
            // pg_hba's first match wins: the superuser's line before every other role's.
            hba.push("hostssl all postgres 127.0.0.1/32 trust".to_owned());
            hba.push("hostssl all all 127.0.0.1/32 scram-sha-256".to_owned());
        } else {
            hba.push("host all all 127.0.0.1/32 trust".to_owned());
            hba.push("host replication all 127.0.0.1/32 trust".to_owned());
        }
        conf.extend(setup.settings.iter().cloned());
        append(&pg.data().join("postgresql.conf"), &conf)?;
        let hba_path = pg.data().join("pg_hba.conf");
        std::fs::write(&hba_path, hba.join("\n") + "\n")
            .with_context(|| format!("writing {}", hba_path.display()))?;
        pg.run(
            &bin.join("pg_ctl"),
            &[
                "-D",
                &pg.data().display().to_string(),
                "-l",
                &pg.dir.path().join("server.log").display().to_string(),
                "-w",
                "start",
            ],
        )?;
        Ok(pg)
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The CA certificate (PEM) that signed the server's certificate (with `tls_only`).
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// A connection URL for `user` (no password) to database `db` over loopback TCP.
    pub fn url(&self, user: &str, db: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/{db}", self.port)
    }

    /// Run `sql` as the superuser, through `psql` on the unix socket.
    pub fn psql(&self, sql: &str) -> anyhow::Result<String> {
        let socket = self.dir.path().display().to_string();
        let port = self.port.to_string();
        self.output(
            &bin_dir().join("psql"),
            &[
                "-h",
                &socket,
                "-p",
                &port,
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-Atq",
                "-c",
                sql,
            ],
        )
    }

    /// The CPU time the server's processes (the postmaster, its backends and helpers, and those
    /// of them that ended) have used so far, if the server runs.
    pub fn cpu_time(&self) -> Option<std::time::Duration> {
        crate::process_tree::tree_cpu_time(self.postmaster()?)
    }

    /// The server's processes now: the postmaster, then its backends and helpers (empty if the
    /// server does not run).
    pub fn pids(&self) -> Vec<u32> {
        self.postmaster()
            .map(|pid| {
                let mut all = vec![pid];
                all.extend(crate::process_tree::descendants(pid));
                all
            })
            .unwrap_or_default()
    }

    /// The postmaster's process id, from its pid file, if the server runs.
    fn postmaster(&self) -> Option<u32> {
        let pid_file = std::fs::read_to_string(self.data().join("postmaster.pid")).ok()?;
        pid_file.lines().next()?.trim().parse().ok()
    }

    /// The server's log so far (for a failure's report).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A CA and a server certificate for 127.0.0.1 and localhost signed by it, in the data
    /// directory (key readable by its owner only, as the server requires).
    fn make_certificates(&self) -> anyhow::Result<()> {
        let d = self.dir.path();
        let data = self.data();
        self_signed_ca(d, "sessionlog test CA")?;
        std::fs::write(
            d.join("san.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )?;
        openssl(
            d,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=127.0.0.1",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        )?;
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "san.ext",
                "-out",
                "server.crt",
            ],
        )?;
        for f in ["server.crt", "server.key"] {
            std::fs::copy(d.join(f), data.join(f))?;
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            data.join("server.key"),
            std::fs::Permissions::from_mode(0o600),
        )?;
        if let Some(user) = &self.run_as {
            own(&data, user)?;
        }
        Ok(())
    }

    /// Run `program` (as the cluster's user), failing with its output.
    fn run(&self, program: &Path, args: &[&str]) -> anyhow::Result<()> {
        self.output(program, args).map(drop)
    }

    fn output(&self, program: &Path, args: &[&str]) -> anyhow::Result<String> {
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        };
        let out = cmd
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {}", program.display()))?;
        if !out.status.success() {
            bail!(
                "{} {args:?} failed: {}{}",
                program.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        let data = self.data().display().to_string();
        let _ = self.run(
            &bin_dir().join("pg_ctl"),
            &["-D", &data, "-m", "immediate", "-w", "stop"],
        );
    }
}

/// A new self-signed CA named `name`: its certificate `ca.crt` (PEM, the path returned) and key
/// `ca.key` in `dir`. Also what a client that trusts the wrong CA is given.
pub fn self_signed_ca(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
    )?;
    Ok(dir.join("ca.crt"))
}

/// Run the `openssl` command with `args` in `dir`, failing with its stderr.
fn openssl(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .output()
        .context("running openssl (install Debian's openssl)")?;
    if !out.status.success() {
        bail!("openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// A loopback port nothing listens on now.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Give `path` (recursively) to `user`, by `chown -R`.
pub(crate) fn own(path: &Path, user: &str) -> anyhow::Result<()> {
    let status = Command::new("chown")
        .args(["-R", user])
        .arg(path)
        .status()
        .context("running chown")?;
    if !status.success() {
        bail!("chown -R {user} {} failed", path.display());
    }
    Ok(())
}

/// Append `lines` to the file at `path`.
fn append(path: &Path, lines: &[String]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    writeln!(f, "{}", lines.join("\n")).with_context(|| format!("writing {}", path.display()))
}
