//! Process CPU time (user + system, all threads) from `/proc/self/stat`, without unsafe code.
//!
//! Linux reports it in clock ticks of `USER_HZ`, which the kernel ABI fixes at 100 per second
//! for `/proc`, so the resolution is 10 ms: enough for runs of a second or more.

use std::time::Duration;

/// `USER_HZ`: the unit of `utime`/`stime` in `/proc/<pid>/stat`.
const TICKS_PER_SECOND: u64 = 100;

/// CPU time this process has used so far, or `None` where `/proc` is unavailable.
pub fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat(&stat)
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
}
