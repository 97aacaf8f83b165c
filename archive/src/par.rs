//! Running one job per item on a bounded number of threads. Object storage transfers wait on
//! the network more than they compute, so there are more threads than cores.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Run `f` over every item on at most `threads` threads. A panicking job propagates its panic.
pub(crate) fn for_each<T: Sync>(items: &[T], threads: usize, f: impl Fn(&T) + Sync) {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads.min(items.len()).max(1) {
            s.spawn(|| {
                while let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) {
                    f(item);
                }
            });
        }
    });
}
