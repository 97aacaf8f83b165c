//! CPU time: the process's (user + system, all threads) from `/proc/self/stat`, and the calling
//! thread's from its CPU clock, without unsafe code.
//!
//! Process time has the 10 ms resolution of `/proc` ([`crate::process_tree`]): enough for runs
//! of a second or more. A thread's clock counts nanoseconds, for spans as short as one round's
//! feed.

use std::time::Duration;

use crate::process_tree;

/// CPU time this process has used so far, or `None` where `/proc` is unavailable.
pub fn process_cpu_time() -> Option<Duration> {
    process_tree::stat("self").map(|s| s.own())
}

/// CPU time the calling thread has used so far.
pub fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_has_a_cpu_time() {
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
