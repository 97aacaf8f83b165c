//! CPU time: the process's (user + system, all threads) from `/proc/self/stat`, and the calling
//! thread's from its CPU clock, without unsafe code.
//!
//! Linux reports process time in clock ticks of `USER_HZ`, which the kernel ABI fixes at 100 per
//! second for `/proc`, so the resolution is 10 ms: enough for runs of a second or more. A
//! thread's clock counts nanoseconds, for spans as short as one round's feed.

use std::time::Duration;

/// `USER_HZ`: the unit of `utime`/`stime` in `/proc/<pid>/stat`.
const TICKS_PER_SECOND: u64 = 100;

/// CPU time this process has used so far, or `None` where `/proc` is unavailable.
pub fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat(&stat)
}

/// CPU time the calling thread has used so far.
pub fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// `utime + stime` of a `/proc/<pid>/stat` line. The command name (field 2) is parenthesized and
/// may hold spaces or parentheses, so fields are counted from the last `)`: `state` is field 3,
/// `utime` field 14 and `stime` field 15.
fn parse_stat(stat: &str) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let ticks = utime + stime;
    Some(Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_utime_plus_stime() {
        let line = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 1 0 5 0 0";
        assert_eq!(parse_stat(line), Some(Duration::from_millis(2810)));
        assert_eq!(parse_stat("garbage"), None);
        assert!(process_cpu_time().is_some());
    }

    /// Work advances the thread's clock and sleep does not. Decided by the clock itself, not by
    /// wall time, so a loaded machine (other threads taking the cores) cannot fail it.
    #[test]
    fn a_thread_clock_counts_the_threads_work_only() {
        let before = thread_cpu_time();
        let started = std::time::Instant::now();
        while thread_cpu_time() - before < Duration::from_millis(20) {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the thread clock does not advance with work"
            );
            std::hint::black_box(0u64);
        }
        let before = thread_cpu_time();
        std::thread::sleep(Duration::from_millis(50));
        let slept = thread_cpu_time() - before;
        assert!(
            slept < Duration::from_millis(25),
            "a sleeping thread was charged {slept:?}"
        );
    }
}
