//! The run's host processes, as the controller drives them: each is this harness's binary run as
//! `nemesis-host` ([`super::host`]) on its own store directory, reaching PostgreSQL through its
//! own proxies. Clients [`Hosts::call`] any host from any thread; a reader thread per process
//! hands each answer line to the call waiting for it. The nemesis pauses (SIGSTOP), resumes
//! (SIGCONT), kills (SIGKILL) and restarts them.
//!
//! A call that gets no answer within [`CALL_PATIENCE`], or whose host dies first, is answered
//! unknown: it may still take effect.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sessionlog_codec::json::{self, Object, Value};

use super::history::{Answer, Call, Outcome};
use super::host::{HostSpec, DUMP, READY};

/// How long a client waits for an answer before it calls the outcome unknown.
pub const CALL_PATIENCE: Duration = Duration::from_secs(20);
/// Calls a host may have unanswered before clients leave it alone (a paused host's pile).
const MAX_IN_FLIGHT: usize = 12;
/// How long a host may take to join the fleet.
pub const JOIN_PATIENCE: Duration = Duration::from_secs(90);

type Waiting = Arc<Mutex<HashMap<u64, Sender<Object>>>>;

/// One host's process and pipes.
struct Process {
    child: Child,
    stdin: ChildStdin,
    reader: Option<JoinHandle<()>>,
    ready: Arc<Mutex<bool>>,
}

/// One host slot: its spec and, while it runs, its process.
struct Slot {
    spec: HostSpec,
    process: Mutex<Option<Process>>,
    waiting: Waiting,
    paused: Mutex<bool>,
}

/// The run's hosts.
pub struct Hosts {
    exe: PathBuf,
    stderr_dir: PathBuf,
    slots: Vec<Slot>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Hosts {
    /// Start one process per spec (`exe nemesis-host …`, stderr to `<stderr_dir>/<host>.stderr`)
    /// and wait until each has joined the fleet.
    pub fn start(exe: PathBuf, stderr_dir: PathBuf, specs: Vec<HostSpec>) -> anyhow::Result<Hosts> {
        let hosts = Hosts {
            exe,
            stderr_dir,
            slots: specs
                .into_iter()
                .map(|spec| Slot {
                    spec,
                    process: Mutex::new(None),
                    waiting: Arc::default(),
                    paused: Mutex::new(false),
                })
                .collect(),
        };
        for h in 0..hosts.slots.len() {
            hosts.restart(h)?;
        }
        hosts.wait_ready(JOIN_PATIENCE)?;
        Ok(hosts)
    }

    /// Wait until every host has joined the fleet, at most `patience` in all.
    pub fn wait_ready(&self, patience: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + patience;
        for h in 0..self.slots.len() {
            while !self.is_ready(h) {
                if Instant::now() >= deadline {
                    bail!(
                        "host{h} did not join the fleet within {patience:?}: {}",
                        self.stderr_tail(h)
                    );
                }
                if !self.is_running(h) {
                    bail!("host{h} exited while joining: {}", self.stderr_tail(h));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    /// How many hosts.
    pub fn count(&self) -> usize {
        self.slots.len()
    }

    /// Whether host `h` may take a call now: running, not paused, not piled up.
    pub fn accepts(&self, h: usize) -> bool {
        let slot = &self.slots[h];
        self.is_running(h) && !*locked(&slot.paused) && locked(&slot.waiting).len() < MAX_IN_FLIGHT
    }

    /// Send `call` (number `op`) to host `h` and wait for its answer (unknown past
    /// [`CALL_PATIENCE`] or when the host dies); `None` when the host is not running (nothing
    /// was sent).
    pub fn call(&self, h: usize, op: u64, call: &Call) -> Option<Answer> {
        let request = call.to_json(op);
        let reply = self.request(h, op, request, CALL_PATIENCE)?;
        Some(match reply {
            Ok(o) => Answer::from_json(&o).map(|(_, a)| a).unwrap_or_else(|e| {
                Answer::plain(Outcome::Unknown, format!("unreadable answer: {e:#}"))
            }),
            Err(why) => Answer::plain(Outcome::Unknown, why),
        })
    }

    /// Host `h`'s final state for `ids` ([`super::host`]'s dump), waiting at most `patience`.
    pub fn dump(&self, h: usize, ids: &[String], patience: Duration) -> anyhow::Result<Object> {
        let key = u64::MAX - h as u64;
        let list = Value::Array(ids.iter().map(|i| Value::from(i.as_str())).collect());
        let request = super::history::with_key(Object::new(), DUMP, list);
        match self.request(h, key, request, patience) {
            Some(Ok(o)) => Ok(o),
            Some(Err(why)) => bail!("host{h}'s final state: {why}: {}", self.stderr_tail(h)),
            None => bail!("host{h} is not running for its final state"),
        }
    }

    fn request(
        &self,
        h: usize,
        key: u64,
        request: Object,
        patience: Duration,
    ) -> Option<Result<Object, String>> {
        let slot = &self.slots[h];
        let (tx, rx) = channel();
        {
            let mut process = locked(&slot.process);
            let p = process.as_mut()?;
            locked(&slot.waiting).insert(key, tx);
            let mut line = json::stringify(&Value::Object(request));
            line.push('\n');
            if p.stdin
                .write_all(line.as_bytes())
                .and_then(|()| p.stdin.flush())
                .is_err()
            {
                locked(&slot.waiting).remove(&key);
                return Some(Err("the host's pipe is closed".into()));
            }
        }
        let answer = match rx.recv_timeout(patience) {
            Ok(o) => Ok(o),
            Err(RecvTimeoutError::Timeout) => Err(format!("no answer within {patience:?}")),
            Err(RecvTimeoutError::Disconnected) => Err("the host died before answering".into()),
        };
        locked(&slot.waiting).remove(&key);
        Some(answer)
    }

    /// Whether host `h`'s process runs (paused or not).
    pub fn is_running(&self, h: usize) -> bool {
        locked(&self.slots[h].process)
            .as_mut()
            .is_some_and(|p| matches!(p.child.try_wait(), Ok(None)))
    }

    fn is_ready(&self, h: usize) -> bool {
        locked(&self.slots[h].process)
            .as_ref()
            .is_some_and(|p| *locked(&p.ready))
    }

    /// Send `signal` to host `h`'s process.
    fn signal(&self, h: usize, signal: rustix::process::Signal) -> anyhow::Result<()> {
        let process = locked(&self.slots[h].process);
        let p = process
            .as_ref()
            .with_context(|| format!("host{h} is not running"))?;
        let pid = i32::try_from(p.child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .context("a process id")?;
        rustix::process::kill_process(pid, signal)
            .with_context(|| format!("signalling host{h}"))?;
        Ok(())
    }

    /// SIGSTOP host `h`.
    pub fn pause(&self, h: usize) -> anyhow::Result<()> {
        self.signal(h, rustix::process::Signal::STOP)?;
        *locked(&self.slots[h].paused) = true;
        Ok(())
    }

    /// SIGCONT host `h`.
    pub fn resume(&self, h: usize) -> anyhow::Result<()> {
        *locked(&self.slots[h].paused) = false;
        self.signal(h, rustix::process::Signal::CONT)
    }

    /// SIGKILL host `h` and reap it; its unanswered calls become unknown.
    pub fn kill(&self, h: usize) -> anyhow::Result<()> {
        let slot = &self.slots[h];
        let taken = locked(&slot.process).take();
        *locked(&slot.paused) = false;
        if let Some(mut p) = taken {
            let _ = p.child.kill();
            p.child.wait().with_context(|| format!("reaping host{h}"))?;
            drop(p.stdin);
            if let Some(reader) = p.reader.take() {
                let _ = reader.join();
            }
        }
        // Every call still waiting hears that its host died.
        locked(&slot.waiting).clear();
        Ok(())
    }

    /// Start host `h`'s process (again) on its store; it takes calls at once (they wait in its
    /// pipe until it has joined the fleet).
    pub fn restart(&self, h: usize) -> anyhow::Result<()> {
        let slot = &self.slots[h];
        let spec = &slot.spec;
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stderr_path(h))?;
        let mut child = Command::new(&self.exe)
            .args(["nemesis-host", "--url", &spec.url, "--host", &spec.host])
            .arg("--dir")
            .arg(&spec.dir)
            .args([
                "--lease-ms",
                &spec.lease.as_millis().to_string(),
                "--commit-patience-ms",
                &spec.commit_patience.as_millis().to_string(),
                "--read-bound-ms",
                &spec.read_bound.as_millis().to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("starting host{h} ({})", self.exe.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("host{h} has no pipes");
        };
        let ready = Arc::new(Mutex::new(false));
        let reader = {
            let (waiting, ready) = (Arc::clone(&slot.waiting), Arc::clone(&ready));
            std::thread::Builder::new()
                .name(format!("host{h}-answers"))
                .spawn(move || read_answers(BufReader::new(stdout), &waiting, &ready))?
        };
        *locked(&slot.process) = Some(Process {
            child,
            stdin,
            reader: Some(reader),
            ready,
        });
        Ok(())
    }

    /// Stop every host: resumed, then killed.
    pub fn stop_all(&self) {
        for h in 0..self.slots.len() {
            let _ = self.resume(h);
            let _ = self.kill(h);
        }
    }

    fn stderr_path(&self, h: usize) -> PathBuf {
        self.stderr_dir
            .join(format!("{}.stderr", self.slots[h].spec.host))
    }

    /// The last lines host `h` wrote to stderr (for an error).
    pub fn stderr_tail(&self, h: usize) -> String {
        let text = std::fs::read_to_string(self.stderr_path(h)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// Hand each answer line to the call waiting for it, until the host's stdout closes.
fn read_answers(mut out: impl BufRead, waiting: &Waiting, ready: &Mutex<bool>) {
    let mut line = String::new();
    loop {
        line.clear();
        match out.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.trim() == READY {
            *locked(ready) = true;
            continue;
        }
        let Ok(Value::Object(o)) = json::parse(line.trim()) else {
            continue;
        };
        let key = match o.get("op").and_then(Value::as_safe_u64) {
            Some(op) => op,
            // A dump's answer carries no call number: it is the one dump waiting.
            None => match locked(waiting)
                .keys()
                .copied()
                .filter(|k| *k > u64::MAX / 2)
                .max()
            {
                Some(k) => k,
                None => continue,
            },
        };
        if let Some(tx) = locked(waiting).remove(&key) {
            let _ = tx.send(o);
        }
    }
}
