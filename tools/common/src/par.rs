//! Running one job per item on one worker per core, results in item order.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` over every item, in parallel; the results come back in the items' order. A panicking
/// job propagates its panic.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(items.len())
        .max(1);
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    let mut i = next.fetch_add(1, Ordering::Relaxed);
                    while let Some(item) = items.get(i) {
                        mine.push((i, f(item)));
                        i = next.fetch_add(1, Ordering::Relaxed);
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// `produce` over every item on one worker per core, each result handed to `consume` on the
/// calling thread in the items' order: the results of a stream (one output written in order)
/// made in parallel. Worker `w` takes items `w`, `w + n`, ...; at most `depth` of its results wait
/// to be consumed, which bounds memory. The first error `consume` returns ends the run: the
/// workers stop at their next result. A panicking job propagates its panic.
pub fn map_ordered<'a, T: Sync, R: Send, E>(
    items: &'a [T],
    depth: usize,
    produce: impl Fn(&'a T) -> R + Sync,
    mut consume: impl FnMut(R) -> Result<(), E>,
) -> Result<(), E> {
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(items.len())
        .max(1);
    std::thread::scope(|s| {
        let produce = &produce;
        let receivers: Vec<_> = (0..workers)
            .map(|w| {
                let (tx, rx) = std::sync::mpsc::sync_channel(depth);
                s.spawn(move || {
                    for item in items.iter().skip(w).step_by(workers) {
                        if tx.send(produce(item)).is_err() {
                            break;
                        }
                    }
                });
                rx
            })
            .collect();
        for i in 0..items.len() {
            // A worker's channel closes early only when its job panicked: the scope's join
            // propagates that panic.
            let Ok(r) = receivers[i % workers].recv() else {
                break;
            };
            consume(r)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_keep_item_order() {
        let items: Vec<u64> = (0..1000).collect();
        assert_eq!(
            super::map(&items, |x| x * 2),
            items.iter().map(|x| x * 2).collect::<Vec<_>>()
        );
        assert!(super::map(&Vec::<u8>::new(), |x| *x).is_empty());
    }

    #[test]
    fn ordered_results_are_consumed_in_item_order_and_an_error_stops_the_run() {
        let items: Vec<u64> = (0..1000).collect();
        let mut seen = Vec::new();
        let done: Result<(), ()> = super::map_ordered(
            &items,
            2,
            |x| x * 2,
            |r| {
                seen.push(r);
                Ok(())
            },
        );
        assert_eq!(done, Ok(()));
        assert_eq!(seen, items.iter().map(|x| x * 2).collect::<Vec<_>>());

        let mut consumed = 0;
        let stopped = super::map_ordered(
            &items,
            2,
            |x| *x,
            |r| {
                consumed += 1;
                if r == 10 {
                    Err(r)
                } else {
                    Ok(())
                }
            },
        );
        assert_eq!(stopped, Err(10));
        assert_eq!(consumed, 11);
    }
}
