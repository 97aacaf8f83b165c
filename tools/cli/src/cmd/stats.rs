//! `sessionlog stats`: the store's metrics, as a summary for a person or, with `--prometheus`,
//! as the Prometheus text exposition a host serves (docs/METRICS.md). The write-path counters
//! count from this process's open of the store, so here they are mostly RocksDB's state on disk
//! (file and memtable bytes per column family, compaction debt, the block cache).

use std::io::Write;
use std::process::ExitCode;

use sessionlog_engine::{Metrics, Store};

pub fn run(store: &Store, prometheus: bool) -> anyhow::Result<ExitCode> {
    let metrics = store.metrics()?;
    let mut out = std::io::stdout().lock();
    if prometheus {
        out.write_all(metrics.to_prometheus().as_bytes())?;
    } else {
        out.write_all(summary(store, &metrics).as_bytes())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The metrics as lines a person reads.
fn summary(store: &Store, m: &Metrics) -> String {
    let r = &m.rocksdb;
    let mut lines = vec![format!(
        "store {}{}",
        store.path().display(),
        if m.poisoned {
            " (refuses writes after a failed durable write: reopen it)"
        } else {
            ""
        }
    )];
    lines.push(format!(
        "{:<14}{:>12}{:>12}{:>12}{:>17}{:>10}",
        "column family", "memtable", "live SST", "live blob", "compaction debt", "L0 files"
    ));
    for cf in &r.column_families {
        lines.push(format!(
            "{:<14}{:>12}{:>12}{:>12}{:>17}{:>10}",
            cf.name,
            size(cf.memtable_bytes),
            size(cf.live_sst_bytes),
            size(cf.live_blob_bytes),
            size(cf.pending_compaction_bytes),
            cf.l0_files
        ));
    }
    lines.push(format!(
        "block cache   {} of {} in use; {} hits, {} misses",
        size(r.block_cache_usage_bytes),
        size(r.block_cache_capacity_bytes),
        r.block_cache_hits,
        r.block_cache_misses
    ));
    lines.push(format!(
        "background    {} compactions and {} flushes running; writes {}",
        r.running_compactions,
        r.running_flushes,
        match (r.write_stopped, r.delayed_write_rate) {
            (true, _) => "stopped".to_owned(),
            (false, 0) => "not slowed".to_owned(),
            (false, rate) => format!("slowed to {}/s", size(rate)),
        }
    ));
    let (c, a) = (&m.commits, &m.appends);
    let refused: Vec<String> = a
        .refused
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(reason, n)| format!("{} {n}", reason.label()))
        .collect();
    lines.push("since this open of the store:".into());
    lines.push(format!(
        "  appends     {} acknowledged ({} events, {}, {} sessions created); refused: {}",
        c.appends,
        a.events,
        size(a.bytes),
        a.sessions_created,
        if refused.is_empty() {
            "none".to_owned()
        } else {
            refused.join(", ")
        }
    ));
    lines.push(format!(
        "  writes      {} ({} fsynced); {:.3} s stalled by RocksDB",
        c.writes,
        c.synced_writes,
        r.write_stall.as_secs_f64()
    ));
    lines.push(format!(
        "  background  compactions read {} and wrote {}; flushes wrote {}",
        size(r.compaction_read_bytes),
        size(r.compaction_written_bytes),
        size(r.flush_written_bytes)
    ));
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// `bytes` in binary units, one decimal.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} B"),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(256 << 20), "256.0 MiB");
    }
}
