//! A block-IO cgroup on the disk holding a directory: the kernel's model of a provisioned-IOPS
//! volume (a cloud disk sold as "3,000 IOPS"), and the counter of the write requests a process
//! sends that disk.
//!
//! [`DiskCgroup::create`] makes a fresh cgroup (cgroup v1 `blkio`, else cgroup v2 with the `io`
//! controller) and, for the whole disk (`major:minor`, never a partition) holding the directory,
//! sets a write-IOPS limit: v1 `blkio.throttle.write_iops_device`, v2 `io.max wiops=`.
//! [`DiskCgroup::enter`] moves a process, all its threads, into it (threads and children it
//! starts later inherit the cgroup) and returns a [`Member`] guard that moves it back to the
//! cgroup it came from when dropped. [`DiskCgroup::write_requests`] reads the device write
//! requests the cgroup's members issued (v1 `blkio.throttle.io_serviced` `Write`, v2 `io.stat`
//! `wios`). Dropping the [`DiskCgroup`] moves any remaining member back out and removes it.
//!
//! Invariant: while a [`DiskCgroup`] created with a limit exists, the limit is set in the kernel:
//! `create` fails (with the reason) rather than return an unthrottled cgroup, and a limit that
//! reads back different from what was written is an error. Creating a cgroup needs root.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use sessionlog_harness::disk_cgroup::{DiskCgroup, Limit};
//! let cgroup = DiskCgroup::create(std::path::Path::new("/var/data"), Limit::WriteIops(3000))?;
//! let member = cgroup.enter(std::process::id())?;
//! let before = cgroup.write_requests()?;
//! // ... write and fsync under /var/data, at most 3,000 device writes per second ...
//! let writes = cgroup.write_requests()? - before;
//! drop(member); // back to the original cgroup; dropping `cgroup` removes it
//! # Ok(()) }
//! ```

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{anyhow, bail, ensure, Context};

/// What the cgroup limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// At most this many write requests per second reach the disk (at least 1).
    WriteIops(u64),
    /// No limit that a disk reaches: only count writes. On cgroup v1 the kernel counts a
    /// device's requests only once a throttle rule exists for it, so a rule of
    /// [`COUNTING_IOPS`] is set; cgroup v2 counts without one.
    CountOnly,
}

/// The write-IOPS rule a counting-only v1 cgroup gets: far above any disk's rate.
pub const COUNTING_IOPS: u64 = 1 << 30;

/// A block device, as `major:minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// Which cgroup hierarchy holds the cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    /// cgroup v1, the `blkio` controller.
    V1,
    /// cgroup v2, the `io` controller.
    V2,
}

impl Hierarchy {
    /// `"v1"` or `"v2"`.
    pub fn name(self) -> &'static str {
        match self {
            Hierarchy::V1 => "v1",
            Hierarchy::V2 => "v2",
        }
    }
}

/// A block-IO cgroup limiting (or counting) one disk's writes; removed on drop.
#[derive(Debug)]
pub struct DiskCgroup {
    hierarchy: Hierarchy,
    /// Where the hierarchy is mounted.
    mount: PathBuf,
    /// The cgroup's directory.
    path: PathBuf,
    device: Device,
    limit: Limit,
}

/// A process moved into a [`DiskCgroup`]; moved back to its original cgroup on drop.
#[derive(Debug)]
pub struct Member<'c> {
    /// Ties the guard to the cgroup's lifetime: a member leaves before the cgroup is removed.
    cgroup: std::marker::PhantomData<&'c DiskCgroup>,
    pid: u32,
    /// The cgroup it came from.
    home: PathBuf,
}

/// Distinguishes the cgroups one process creates.
static CREATED: AtomicU64 = AtomicU64::new(0);

impl DiskCgroup {
    /// Create a cgroup limiting the whole disk that holds `dir` (or its nearest existing
    /// ancestor) to `limit`. Fails, saying why, where no block-IO cgroup can be made or the
    /// directory is not on a block device.
    pub fn create(dir: &Path, limit: Limit) -> anyhow::Result<Self> {
        if let Limit::WriteIops(n) = limit {
            ensure!(n >= 1, "a write-IOPS limit must be at least 1");
        }
        let device = whole_disk(device_of(dir)?)?;
        let (hierarchy, mount) = find_hierarchy()?;
        let name = format!(
            "sessionlog-bench-{}-{}",
            std::process::id(),
            CREATED.fetch_add(1, Ordering::Relaxed)
        );
        let path = mount.join(&name);
        if hierarchy == Hierarchy::V2 {
            enable_io_controller(&mount)?;
        }
        fs::create_dir(&path).with_context(|| {
            format!(
                "creating the cgroup {} (needs root and a writable cgroup {} hierarchy)",
                path.display(),
                hierarchy.name()
            )
        })?;
        let cgroup = DiskCgroup {
            hierarchy,
            mount,
            path,
            device,
            limit,
        };
        cgroup.set_limit()?;
        Ok(cgroup)
    }

    /// The disk the cgroup limits.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The limit it holds.
    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// The hierarchy it lives in.
    pub fn hierarchy(&self) -> Hierarchy {
        self.hierarchy
    }

    /// Move process `pid` (all its threads) into the cgroup until the returned guard drops.
    pub fn enter(&self, pid: u32) -> anyhow::Result<Member<'_>> {
        let home = self.cgroup_of(pid)?;
        write(&self.path.join("cgroup.procs"), &pid.to_string())?;
        let now = self.cgroup_of(pid)?;
        ensure!(
            now == self.path,
            "process {pid} is in {} after moving it into {}",
            now.display(),
            self.path.display()
        );
        Ok(Member {
            cgroup: std::marker::PhantomData,
            pid,
            home,
        })
    }

    /// Whether process `pid` is in the cgroup now.
    pub fn holds(&self, pid: u32) -> anyhow::Result<bool> {
        Ok(self.cgroup_of(pid)? == self.path)
    }

    /// Device write requests the cgroup's members have issued to the disk since it was created.
    pub fn write_requests(&self) -> anyhow::Result<u64> {
        let (file, stats) = match self.hierarchy {
            Hierarchy::V1 => ("blkio.throttle.io_serviced", read_v1_writes as Reader),
            Hierarchy::V2 => ("io.stat", read_v2_writes as Reader),
        };
        let text = read(&self.path.join(file))?;
        Ok(stats(&text, self.device).unwrap_or(0))
    }

    /// Write the limit and check that the kernel holds it.
    fn set_limit(&self) -> anyhow::Result<()> {
        let iops = match self.limit {
            Limit::WriteIops(n) => n,
            Limit::CountOnly if self.hierarchy == Hierarchy::V2 => return Ok(()),
            Limit::CountOnly => COUNTING_IOPS,
        };
        let (file, rule) = match self.hierarchy {
            Hierarchy::V1 => (
                "blkio.throttle.write_iops_device",
                format!("{} {iops}", self.device),
            ),
            Hierarchy::V2 => ("io.max", format!("{} wiops={iops}", self.device)),
        };
        let file = self.path.join(file);
        write(&file, &rule)
            .with_context(|| format!("setting the write-IOPS limit of disk {}", self.device))?;
        let held = read(&file)?;
        let prefix = format!("{} ", self.device);
        let set = held.lines().any(|line| {
            line.strip_prefix(&prefix).is_some_and(|rest| {
                rest.split_whitespace()
                    .any(|f| f == iops.to_string() || f == format!("wiops={iops}"))
            })
        });
        ensure!(
            set,
            "the kernel did not keep the limit \"{rule}\" in {}: it reads {held:?}",
            file.display()
        );
        Ok(())
    }

    /// The cgroup (directory in this hierarchy) process `pid` is in.
    fn cgroup_of(&self, pid: u32) -> anyhow::Result<PathBuf> {
        let text = read(Path::new(&format!("/proc/{pid}/cgroup")))?;
        let relative = text
            .lines()
            .find_map(|line| {
                let mut fields = line.splitn(3, ':');
                let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
                let ours = match self.hierarchy {
                    Hierarchy::V1 => controllers.split(',').any(|c| c == "blkio"),
                    Hierarchy::V2 => controllers.is_empty(),
                };
                ours.then_some(path)
            })
            .ok_or_else(|| anyhow!("process {pid} has no {} cgroup", self.hierarchy.name()))?;
        Ok(self.mount.join(relative.trim_start_matches('/')))
    }
}

impl Drop for Member<'_> {
    fn drop(&mut self) {
        // Best effort: a process that already exited has left by itself.
        let _ = write(&self.home.join("cgroup.procs"), &self.pid.to_string());
    }
}

impl Drop for DiskCgroup {
    fn drop(&mut self) {
        // Members still inside (a child process, a guard leaked) go back to the hierarchy's
        // root, which always exists; an empty cgroup can then be removed.
        if let Ok(procs) = read(&self.path.join("cgroup.procs")) {
            for pid in procs.split_whitespace() {
                let _ = write(&self.mount.join("cgroup.procs"), pid);
            }
        }
        for _ in 0..50 {
            if fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!(
            "sessionlog: could not remove the cgroup {}; remove it with rmdir",
            self.path.display()
        );
    }
}

type Reader = fn(&str, Device) -> Option<u64>;

/// The `Write` count of `device` in a v1 `blkio.throttle.io_serviced` file
/// (`"254:0 Write 303"` lines).
fn read_v1_writes(text: &str, device: Device) -> Option<u64> {
    let prefix = format!("{device} Write ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix)?.trim().parse().ok())
}

/// The `wios` count of `device` in a v2 `io.stat` file (`"254:0 rbytes=… wios=303 …"`).
fn read_v2_writes(text: &str, device: Device) -> Option<u64> {
    let prefix = format!("{device} ");
    let line = text.lines().find_map(|line| line.strip_prefix(&prefix))?;
    line.split_whitespace()
        .find_map(|field| field.strip_prefix("wios=")?.parse().ok())
}

/// The device `dir` (or its nearest existing ancestor) is stored on.
fn device_of(dir: &Path) -> anyhow::Result<Device> {
    let mut at = dir;
    let meta = loop {
        match fs::metadata(at) {
            Ok(m) => break m,
            Err(_) => {
                at = at
                    .parent()
                    .ok_or_else(|| anyhow!("no existing ancestor of {}", dir.display()))?;
            }
        }
    };
    let dev = meta.dev();
    // Linux's dev_t: 12 bits of major and 20 of minor, split across the word.
    let device = Device {
        major: (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)) as u32,
        minor: ((dev & 0xff) | ((dev >> 12) & !0xff)) as u32,
    };
    ensure!(
        device.major != 0,
        "{} is on device {device}, a virtual filesystem (tmpfs, overlay, btrfs subvolume…) with \
         no block device to throttle",
        at.display()
    );
    Ok(device)
}

/// The whole disk holding `device`: itself, or the disk of which it is a partition.
fn whole_disk(device: Device) -> anyhow::Result<Device> {
    let sys = PathBuf::from(format!("/sys/dev/block/{device}"));
    let resolved = fs::canonicalize(&sys)
        .with_context(|| format!("{}: device {device} is not a block device", sys.display()))?;
    if !resolved.join("partition").exists() {
        return Ok(device);
    }
    let parent = resolved
        .parent()
        .ok_or_else(|| anyhow!("partition {device} has no parent disk"))?;
    parse_device(read(&parent.join("dev"))?.trim())
        .with_context(|| format!("reading the disk of partition {device}"))
}

fn parse_device(text: &str) -> anyhow::Result<Device> {
    let (major, minor) = text
        .split_once(':')
        .ok_or_else(|| anyhow!("not a major:minor pair: {text:?}"))?;
    Ok(Device {
        major: major.parse()?,
        minor: minor.parse()?,
    })
}

/// The block-IO hierarchy to use: v1 `blkio` when mounted (it then owns the controller), else v2
/// with `io` available.
fn find_hierarchy() -> anyhow::Result<(Hierarchy, PathBuf)> {
    let mountinfo = read(Path::new("/proc/self/mountinfo"))?;
    let mut v2 = None;
    for line in mountinfo.lines() {
        // `id parent major:minor root mount-point options… - fstype source super-options`
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mount_point = left.split_whitespace().nth(4);
        let mut right = right.split_whitespace();
        let (fstype, super_options) = (right.next(), right.nth(1));
        match (fstype, mount_point) {
            (Some("cgroup"), Some(mp))
                if super_options.is_some_and(|o| o.split(',').any(|x| x == "blkio")) =>
            {
                return Ok((Hierarchy::V1, PathBuf::from(unescape(mp))));
            }
            (Some("cgroup2"), Some(mp)) if v2.is_none() => v2 = Some(PathBuf::from(unescape(mp))),
            _ => {}
        }
    }
    let Some(mount) = v2 else {
        bail!("no cgroup blkio (v1) or cgroup2 hierarchy is mounted: cannot throttle the disk");
    };
    let controllers = read(&mount.join("cgroup.controllers"))?;
    ensure!(
        controllers.split_whitespace().any(|c| c == "io"),
        "the cgroup2 hierarchy at {} has no io controller (it offers: {}): cannot throttle the \
         disk",
        mount.display(),
        controllers.trim()
    );
    Ok((Hierarchy::V2, mount))
}

/// Let the v2 root's children use the `io` controller.
fn enable_io_controller(mount: &Path) -> anyhow::Result<()> {
    let control = mount.join("cgroup.subtree_control");
    if read(&control)?.split_whitespace().any(|c| c == "io") {
        return Ok(());
    }
    write(&control, "+io").context("enabling the io controller for child cgroups")
}

/// A mountinfo path with its octal escapes (`\040` for a space…) decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn read(path: &Path) -> anyhow::Result<String> {
    fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    fs::write(path, text).with_context(|| format!("writing {text:?} to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DISK: Device = Device {
        major: 254,
        minor: 0,
    };

    #[test]
    fn reads_v1_write_counts_of_the_device_only() {
        let text = "8:0 Read 5\n8:0 Write 99\n254:0 Read 8\n254:0 Write 303\n254:0 Sync 311\n\
                    Total 311\n";
        assert_eq!(read_v1_writes(text, DISK), Some(303));
        assert_eq!(read_v1_writes("Total 0\n", DISK), None);
    }

    #[test]
    fn reads_v2_wios_of_the_device_only() {
        let text = "8:0 rbytes=1 wbytes=2 rios=3 wios=4\n\
                    254:0 rbytes=4096 wbytes=8192 rios=1 wios=17 dbytes=0 dios=0\n";
        assert_eq!(read_v2_writes(text, DISK), Some(17));
        assert_eq!(read_v2_writes("", DISK), None);
    }

    #[test]
    fn parses_devices_and_mountinfo_escapes() {
        assert_eq!(parse_device("254:0").expect("parses"), DISK);
        assert!(parse_device("254").is_err());
        assert_eq!(unescape(r"/sys/fs/cgroup/a\040b"), "/sys/fs/cgroup/a b");
        assert_eq!(unescape(r"/plain\x"), r"/plain\x");
        assert_eq!(DISK.to_string(), "254:0");
    }

    /// A child process moved in writes 20 synced blocks; the cgroup counts them, the child
    /// leaves, and the cgroup is gone after drop. Needs root and a block-IO hierarchy: without
    /// them it fails under CI and says what it skipped elsewhere (`requirement::missing`).
    #[test]
    fn counts_a_members_synced_writes_and_removes_itself() {
        use std::io::Write as _;
        use std::process::{Command, Stdio};
        let dir = tempfile::tempdir_in(std::env::temp_dir()).expect("temp dir");
        let cgroup = match DiskCgroup::create(dir.path(), Limit::WriteIops(1000)) {
            Ok(c) => c,
            Err(e) => {
                crate::requirement::missing(
                    "root and a block-IO cgroup hierarchy",
                    &format!("{e:#}"),
                );
                return;
            }
        };
        let path = cgroup.path.clone();
        let file = dir.path().join("blocks");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "read go && dd if=/dev/zero of={} bs=4096 count=20 oflag=dsync 2>/dev/null",
                file.display()
            ))
            .stdin(Stdio::piped())
            .spawn()
            .expect("spawns sh");
        assert!(!cgroup.holds(child.id()).expect("reads its cgroup"));
        let member = cgroup.enter(child.id()).expect("enters");
        assert!(cgroup.holds(child.id()).expect("reads its cgroup"));
        let before = cgroup.write_requests().expect("counter");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"go\n")
            .expect("starts the child");
        assert!(child.wait().expect("waits").success());
        let writes = cgroup.write_requests().expect("counter") - before;
        assert!(writes >= 20, "20 synced writes, {writes} counted");
        drop(member);
        drop(cgroup);
        assert!(!path.exists(), "{} removed", path.display());
    }

    #[test]
    fn a_zero_limit_is_refused_before_touching_the_kernel() {
        let e = DiskCgroup::create(Path::new("/"), Limit::WriteIops(0)).expect_err("refused");
        assert!(e.to_string().contains("at least 1"), "{e:#}");
    }
}
