//! The store directory's own lock (`sessionlog.lock`): held from before the WAL audit until the
//! handle drops, against every other open, by other processes and by other handles in this one.
//! RocksDB's own lock (`LOCK`) is taken inside its open, too late: the audit must never read a
//! WAL another handle is appending to, whose unfinished writes could look like damage.
//!
//! The lock is an `flock` on the file, which conflicts between open files, so a second open in
//! this process is refused as one in another process is. An `flock` also belongs to every copy
//! of its file: a process another thread of this one starts holds a copy of each open file until
//! it runs its program (the copies are close-on-exec). A handle closed in that window leaves its
//! lock held by the copy, and the next open here would be refused for no holder at all. So a
//! refusal is looked at: when no handle of this process holds the directory ([`HELD`]) and the
//! kernel names no other process as an owner of the lock (`/proc/locks`: what holds it is a copy
//! of our own), the open waits for the copy to go, at most [`COPY_PATIENCE`].
//!
//! Invariant: [`HELD`] holds a directory exactly while a [`DirLock`] of it lives; every step of
//! taking and giving up a lock runs under its mutex.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The store's own lock file in its directory.
const DIR_LOCK: &str = "sessionlog.lock";

/// How long an open waits for copies of this process's own lock, held by processes that other
/// threads are starting, to close.
const COPY_PATIENCE: Duration = Duration::from_secs(5);

/// The store directories (device, inode) a live handle of this process holds.
static HELD: Mutex<Option<HashSet<(u64, u64)>>> = Mutex::new(None);

/// The lock on one store directory, given up when dropped.
pub(crate) struct DirLock {
    file: Option<File>,
    dir: (u64, u64),
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        drop(self.file.take());
        if let Some(held) = held.as_mut() {
            held.remove(&self.dir);
        }
    }
}

/// Hold the store directory at `path` against every other open (see the module docs).
pub(crate) fn lock_dir(path: &Path) -> Result<DirLock> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let meta = std::fs::metadata(path).map_err(io(path))?;
    let dir = (meta.dev(), meta.ino());
    let locked = |reason: String| Error::Locked {
        path: path.to_path_buf(),
        reason,
    };
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    let held = held.get_or_insert_with(HashSet::new);
    let lock_path = path.join(DIR_LOCK);
    if held.contains(&dir) {
        return Err(locked(format!(
            "{} is held by another handle in this process",
            lock_path.display()
        )));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    let inode = file.metadata().map_err(io(&lock_path))?.ino();
    let deadline = Instant::now() + COPY_PATIENCE;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock)
                if !held_elsewhere(inode) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(locked(format!("{} is held", lock_path.display())));
            }
            Err(std::fs::TryLockError::Error(source)) => return Err(io(&lock_path)(source)),
        }
    }
    held.insert(dir);
    Ok(DirLock {
        file: Some(file),
        dir,
    })
}

/// Whether another process owns an `flock` on the file with inode `inode`: `/proc/locks` names
/// the process that took a lock, whichever copy of the file holds it now, so a copy of this
/// process's own lock is not another's. True where `/proc/locks` cannot be read: the refusal
/// then stands.
fn held_elsewhere(inode: u64) -> bool {
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
        return true;
    };
    let me = std::process::id().to_string();
    let suffix = format!(":{inode}");
    locks.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // `N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END`; waiters' lines start with `->`.
        matches!(fields.as_slice(),
            [_, "FLOCK", _, _, pid, file, ..] if file.ends_with(&suffix) && *pid != me)
    })
}

#[cfg(test)]
mod tests {
    use super::lock_dir;

    /// A second open in this process is refused at once, naming why, and the directory opens
    /// again once the first handle is gone.
    #[test]
    fn a_second_handle_in_this_process_is_refused_until_the_first_is_gone() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let first = lock_dir(tmp.path()).expect("first");
        let e = lock_dir(tmp.path()).err().expect("refused");
        assert!(
            e.to_string().contains("another handle in this process"),
            "{e}"
        );
        drop(first);
        lock_dir(tmp.path()).expect("again");
    }

    /// A process started by another thread holds a copy of every open file until it runs its
    /// program. A store closed and opened again meanwhile still opens: the lock's holder then is
    /// that copy, not another open.
    #[test]
    fn a_store_closed_while_another_thread_starts_processes_opens_again() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                        let _ = std::process::Command::new("true").status();
                    }
                });
            }
            let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
            let (mut opens, mut refused) = (0, Vec::new());
            while std::time::Instant::now() < until {
                opens += 1;
                if let Err(e) = lock_dir(tmp.path()) {
                    refused.push(e.to_string());
                }
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            assert!(
                refused.is_empty(),
                "{} of {opens} refused: {:?}",
                refused.len(),
                refused.first()
            );
        });
    }
}
