//! LazyFS, the power-cut file system: finding (or building) its binary, mounting it, cutting
//! power through its fault fifo, and unmounting it.
//!
//! LazyFS keeps every write in its own page cache until the file is fsynced; the command
//! `lazyfs::clear-cache` drops every unsynced byte, as a power cut would. Invariant kept by
//! [`Mount`]: while it lives the mount is up and answers; when it is dropped (also on error or
//! panic) the file system is unmounted and the LazyFS process is gone.
//!
//! LazyFS can stop answering: now and then it deadlocks on its own locks (a write holding a
//! file's lock waits for the cache's while a create holding the cache's waits for the file's;
//! seen three times in about 1,260 cuts). A thread blocked in a request LazyFS has taken cannot be
//! stopped or even killed, so every wait on the mount is bounded: [`Mount::abort`] kills LazyFS,
//! which fails every request it holds, and [`Watchdog`] does so when file-system work overruns.
//!
//! The binary is built once per machine, outside the checkout (like the cargo target), by
//! LazyFS's `build.sh OUT_DIR` (found at `../shared/tools/lazyfs/build.sh` beside the checkout,
//! or named by `SESSIONLOG_LAZYFS_BUILD`).

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// Names a LazyFS binary to use instead of the default build.
pub const BINARY_ENV: &str = "SESSIONLOG_LAZYFS";
/// Names LazyFS's `build.sh` when it is not at `../shared/tools/lazyfs/build.sh`.
pub const BUILD_SCRIPT_ENV: &str = "SESSIONLOG_LAZYFS_BUILD";

/// LazyFS's page cache size: one cycle's writes and reads must fit (it is cleared every cut).
const CACHE_SIZE: &str = "512mb";
/// How long a mount may take to appear, or a cache clear to be confirmed.
const MOUNT_TIMEOUT: Duration = Duration::from_secs(60);
const CLEAR_TIMEOUT: Duration = Duration::from_secs(60);

/// Why power-loss runs cannot happen on this machine, if they cannot (no `/dev/fuse`, or not
/// root).
pub fn unavailable_reason() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing".into());
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1));
    if euid != Some("0") {
        return Some("not running as root (LazyFS is mounted and built as root)".into());
    }
    None
}

/// The default build directory: `~/.cache/sessionlog-lazyfs` (outside any checkout).
pub fn default_build_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache").join("sessionlog-lazyfs")
}

/// The LazyFS binary: `$SESSIONLOG_LAZYFS`, else `build_dir`'s build, made if missing with
/// `script`, else `$SESSIONLOG_LAZYFS_BUILD`, else `<checkout>/../shared/tools/lazyfs/build.sh`.
pub fn locate_or_build(
    build_dir: &Path,
    script: Option<&Path>,
    checkout: &Path,
) -> anyhow::Result<PathBuf> {
    if let Some(bin) = std::env::var_os(BINARY_ENV) {
        let bin = PathBuf::from(bin);
        if !bin.is_file() {
            bail!("{BINARY_ENV}={} is not a file", bin.display());
        }
        return Ok(bin);
    }
    let bin = build_dir.join("lazyfs").join("build").join("lazyfs");
    if bin.is_file() {
        return Ok(bin);
    }
    let script = match (script, std::env::var_os(BUILD_SCRIPT_ENV)) {
        (Some(s), _) => s.to_path_buf(),
        (None, Some(s)) => PathBuf::from(s),
        (None, None) => checkout.join("../shared/tools/lazyfs/build.sh"),
    };
    if !script.is_file() {
        bail!(
            "no LazyFS binary at {} and no build script at {} (set {BINARY_ENV} to a binary or \
             {BUILD_SCRIPT_ENV} to LazyFS's build.sh)",
            bin.display(),
            script.display()
        );
    }
    eprintln!(
        "power-loss: building LazyFS into {} (once per machine, ~2 min)",
        build_dir.display()
    );
    let out = Command::new(&script)
        .arg(build_dir)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() || !bin.is_file() {
        bail!(
            "{} {} failed ({}): {}",
            script.display(),
            build_dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(bin)
}

/// A mounted LazyFS: files written under [`Mount::path`] live in `<dir>/root`.
pub struct Mount {
    mountpoint: PathBuf,
    process: Child,
    faults: PathBuf,
    /// Lines LazyFS writes to its completion fifo (`finished::clear-cache`).
    done: mpsc::Receiver<String>,
}

impl Mount {
    /// Mount `binary` on `<dir>/mnt` over `<dir>/root`, with its config, fifos and log in `dir`.
    /// `dir` may be relative: it is resolved first, as the mount table names mount points by
    /// their canonical paths (a relative `--dir` never showed as mounted).
    pub fn start(binary: &Path, dir: &Path) -> anyhow::Result<Mount> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir =
            &std::fs::canonicalize(dir).with_context(|| format!("resolving {}", dir.display()))?;
        let (root, mountpoint) = (dir.join("root"), dir.join("mnt"));
        for d in [&root, &mountpoint] {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        let (faults, done) = (dir.join("faults.fifo"), dir.join("done.fifo"));
        // Fresh fifos: a reader left by an earlier mount keeps only the old ones.
        for fifo in [&faults, &done] {
            match std::fs::remove_file(fifo) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("removing {}", fifo.display()));
                }
                _ => {}
            }
            let status = Command::new("mkfifo").arg(fifo).status()?;
            if !status.success() {
                bail!("mkfifo {} failed", fifo.display());
            }
        }
        let config = dir.join("lazyfs.toml");
        std::fs::write(
            &config,
            format!(
                "[faults]\nfifo_path=\"{}\"\nfifo_path_completed=\"{}\"\n[cache]\n\
                 apply_eviction=false\n[cache.simple]\ncustom_size=\"{CACHE_SIZE}\"\n\
                 blocks_per_page=1\n[filesystem]\nlog_all_operations=false\nlogfile=\"\"\n",
                faults.display(),
                done.display()
            ),
        )?;
        // Read and write: opening a fifo so never blocks, and LazyFS's writer never sees EPIPE.
        let done_reader = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&done)
            .with_context(|| format!("opening {}", done.display()))?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(done_reader).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Appended to: the log of a LazyFS that died stays for inspection.
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("lazyfs.log"))?;
        let process = Command::new(binary)
            .arg(&mountpoint)
            .arg("--config-path")
            .arg(&config)
            .args(["-o", "modules=subdir", "-o"])
            .arg(format!("subdir={}", root.display()))
            .arg("-f")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut mount = Mount {
            mountpoint,
            process,
            faults,
            done: rx,
        };
        let deadline = Instant::now() + MOUNT_TIMEOUT;
        while !mount.is_mounted() {
            if let Some(status) = mount.process.try_wait()? {
                bail!(
                    "LazyFS exited before mounting ({status}); see {}",
                    dir.join("lazyfs.log").display()
                );
            }
            if Instant::now() > deadline {
                bail!("LazyFS did not mount {} in time", mount.path().display());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(mount)
    }

    /// The mount point: what is written here goes through LazyFS's cache.
    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// Whether LazyFS still runs and its mount is up.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.process.try_wait(), Ok(None)) && self.is_mounted()
    }

    fn is_mounted(&self) -> bool {
        let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return false;
        };
        let want = self.mountpoint.to_string_lossy();
        info.lines().any(|l| {
            let mut f = l.split(' ');
            f.nth(4) == Some(want.as_ref()) && l.contains(" - fuse.lazyfs ")
        })
    }

    /// LazyFS's process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// Kill LazyFS at once, for a LazyFS that stopped answering: every request it holds fails
    /// (the connection is gone), so no thread stays blocked in the mount, and
    /// [`Mount::is_alive`] is false from then on.
    pub fn abort(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }

    /// Guard `what`, file-system work on the mount: if the guard is not dropped within `limit`,
    /// LazyFS is taken to have stopped answering; the threads blocked in the kernel are printed
    /// and LazyFS is killed, so the work fails instead of hanging. If it still has not ended
    /// `limit` later, the hang is not LazyFS's, and the process aborts with a message: a test
    /// run must fail, never hang.
    pub fn watchdog(&self, what: &str, limit: Duration) -> Watchdog {
        let (stop, stopped) = mpsc::channel::<()>();
        let fired = Arc::new(AtomicBool::new(false));
        let pid = self.pid();
        let (what_for_thread, flag) = (what.to_owned(), Arc::clone(&fired));
        let thread = std::thread::spawn(move || {
            let what = what_for_thread;
            if stopped.recv_timeout(limit) != Err(mpsc::RecvTimeoutError::Timeout) {
                return;
            }
            eprintln!(
                "power-loss: {what} blocked for {limit:?}: LazyFS is taken to have stopped \
                 answering and is killed. Threads blocked in the kernel:\n{}",
                blocked_threads()
            );
            flag.store(true, Ordering::SeqCst);
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            wait_until_dead(pid, limit);
            if stopped.recv_timeout(limit) == Err(mpsc::RecvTimeoutError::Timeout) {
                eprintln!(
                    "power-loss: {what} still blocked {limit:?} after LazyFS was killed: the hang \
                     is not LazyFS's. Threads blocked in the kernel:\n{}",
                    blocked_threads()
                );
                std::process::abort();
            }
        });
        Watchdog {
            what: what.to_owned(),
            stop: Some(stop),
            thread: Some(thread),
            fired,
        }
    }

    /// Run `work` under a [`Mount::watchdog`]: its result, or the watchdog's error when it
    /// overran (then it ran against a killed LazyFS, whatever it returned).
    pub fn guarded<T>(
        &self,
        what: &str,
        limit: Duration,
        work: impl FnOnce() -> T,
    ) -> anyhow::Result<T> {
        let watchdog = self.watchdog(what, limit);
        let done = work();
        watchdog.finish()?;
        Ok(done)
    }

    /// Cut power: drop every byte not fsynced, and wait until LazyFS confirms it.
    pub fn cut_power(&mut self) -> anyhow::Result<()> {
        while self.done.try_recv().is_ok() {}
        // Read and write, so the open never blocks even if LazyFS is gone (the wait times out).
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.faults)
            .and_then(|mut f| f.write_all(b"lazyfs::clear-cache\n"))
            .with_context(|| format!("writing to {}", self.faults.display()))?;
        match self.done.recv_timeout(CLEAR_TIMEOUT) {
            Ok(line) if line.contains("clear-cache") => Ok(()),
            Ok(line) => bail!("LazyFS answered {line:?} to clear-cache"),
            Err(_) => bail!("LazyFS did not confirm clear-cache in time"),
        }
    }
}

/// Wait (at most `limit`) until process `pid` has exited: SIGKILL is delivered at once, but a
/// process with many threads takes a moment to die, and until it has, [`Mount::is_alive`] would
/// still see LazyFS running and a caller would not restart it.
fn wait_until_dead(pid: u32, limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if matches!(
            task_state(Path::new(&format!("/proc/{pid}/stat"))),
            None | Some('Z' | 'X')
        ) {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The state letter of a process or thread from its `/proc/…/stat` file (`R`, `S`, `D`, `T`,
/// `Z`…), or `None` when it is gone.
pub(crate) fn task_state(stat: &Path) -> Option<char> {
    let stat = std::fs::read_to_string(stat).ok()?;
    stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next())
}

/// Guards file-system work on a [`Mount`] (see [`Mount::watchdog`]); dropping it ends the guard.
pub struct Watchdog {
    what: String,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    fired: Arc<AtomicBool>,
}

impl Watchdog {
    /// Whether the work overran and LazyFS was killed.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// End the guard: an error when the work overran (whatever the work itself returned, it
    /// ran against a killed LazyFS, which has exited by the time this returns).
    pub fn finish(self) -> anyhow::Result<()> {
        if self.fired() {
            bail!(
                "LazyFS stopped answering during {}, and was killed",
                self.what
            );
        }
        Ok(())
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Every thread on the machine in uninterruptible sleep (state D) or waiting for a FUSE answer
/// (`request_wait_answer`), one line each: process, thread, name and the kernel function it
/// waits in.
pub fn blocked_threads() -> String {
    let mut lines = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return "(no /proc)".into();
    };
    // Numbered entries only: `self` and `thread-self` would list this process twice.
    let numbered = procs
        .flatten()
        .filter(|p| p.file_name().to_string_lossy().parse::<u32>().is_ok());
    for p in numbered {
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            let Some((name, rest)) = stat.split_once(" (").and_then(|(_, r)| r.rsplit_once(") "))
            else {
                continue;
            };
            let wchan = std::fs::read_to_string(t.path().join("wchan")).unwrap_or_default();
            if rest.starts_with('D') || wchan == "request_wait_answer" {
                lines.push(format!(
                    "  pid {} tid {} {name}: {wchan}",
                    p.file_name().to_string_lossy(),
                    t.file_name().to_string_lossy()
                ));
            }
        }
    }
    if lines.is_empty() {
        "  (none)".into()
    } else {
        lines.join("\n")
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let unmounted = Command::new("fusermount3")
            .arg("-u")
            .arg(&self.mountpoint)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Busy or already gone: a lazy unmount detaches it; LazyFS then exits.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mountpoint)
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.process.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
