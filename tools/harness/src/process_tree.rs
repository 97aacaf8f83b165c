//! Processes as `/proc` shows them: a process's parent and CPU time, the descendants of a
//! process, and the CPU time of a whole tree (a PostgreSQL server and its backends, a Patroni
//! node), without unsafe code.
//!
//! Linux reports CPU time in clock ticks of `USER_HZ`, which the kernel ABI fixes at 100 per
//! second for `/proc`, so the resolution is 10 ms: enough for runs of a second or more.

use std::collections::HashMap;
use std::time::Duration;

/// `USER_HZ`: the unit of `utime`/`stime` in `/proc/<pid>/stat`.
const TICKS_PER_SECOND: u64 = 100;

/// The fields of one `/proc/<pid>/stat` line this module reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The parent process.
    pub ppid: u32,
    /// `utime + stime`: the process's own CPU time, in ticks.
    pub own_ticks: u64,
    /// `cutime + cstime`: the CPU time of its children that it has waited for, in ticks.
    pub reaped_ticks: u64,
}

impl Stat {
    /// The process's own CPU time.
    pub fn own(&self) -> Duration {
        ticks(self.own_ticks)
    }
}

/// A tick count as a duration.
fn ticks(n: u64) -> Duration {
    Duration::from_millis(n * 1000 / TICKS_PER_SECOND)
}

/// Parse a `/proc/<pid>/stat` line. The command name (field 2) is parenthesized and may hold
/// spaces or parentheses, so fields are counted from the last `)`: `state` is field 3, `ppid`
/// field 4, `utime` to `cstime` fields 14 to 17.
pub fn parse_stat(stat: &str) -> Option<Stat> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    Some(Stat {
        ppid: u32::try_from(field(4)?).ok()?,
        own_ticks: field(14)? + field(15)?,
        reaped_ticks: field(16)? + field(17)?,
    })
}

/// Process `pid`'s stat, if it is alive (`"self"` for this process).
pub fn stat(pid: &str) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every live process's stat, by pid.
fn all() -> HashMap<u32, Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, stat(&pid.to_string())?)))
        .collect()
}

/// The live descendants of `pid` (children, their children, …).
pub fn descendants(pid: u32) -> Vec<u32> {
    let procs = all();
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for (&child, s) in &procs {
            if s.ppid == parent && !found.contains(&child) {
                found.push(child);
                frontier.push(child);
            }
        }
    }
    found
}

/// The CPU time of `pid` and its live descendants so far, including that of the processes among
/// them that exited and were waited for by a member of the tree (a backend that ended, counted
/// in its server's `cutime`); `None` when `pid` is gone.
pub fn tree_cpu_time(pid: u32) -> Option<Duration> {
    let procs = all();
    let root = procs.get(&pid)?;
    let mut total = root.own_ticks + root.reaped_ticks;
    for child in descendants(pid) {
        if let Some(s) = procs.get(&child) {
            total += s.own_ticks + s.reaped_ticks;
        }
    }
    Some(ticks(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_parent_and_both_cpu_times() {
        let line = "42 (a) b (c)) S 7 42 42 0 -1 4194560 100 0 0 0 250 31 12 8 20 0 1 0 5 0 0";
        let s = parse_stat(line).expect("parsed");
        assert_eq!(s.ppid, 7);
        assert_eq!(s.own(), Duration::from_millis(2810));
        assert_eq!(s.reaped_ticks, 20);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn a_child_is_among_the_descendants_and_its_tree_has_a_cpu_time() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let me = std::process::id();
        assert!(descendants(me).contains(&child.id()));
        assert!(tree_cpu_time(me).is_some());
        child.kill().expect("kill");
        child.wait().expect("wait");
        assert!(!descendants(me).contains(&child.id()));
    }
}
