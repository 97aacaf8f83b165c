//! The store flags both binaries take, as global flags, and the engine [`Options`] they make; the
//! log-format flag's values. Doc comments are the help text.

use clap::{Args, ValueEnum};
use sessionlog_engine::{BuiltinProjection, Durability, Options, V0Reads};

/// How the store is opened: flattened into a binary's top-level arguments
/// (`#[command(flatten)]`), so every subcommand takes them.
#[derive(Args, Clone, Debug)]
pub struct StoreArgs {
    /// Durability of writes: `sync` fsyncs before acknowledging, `buffered` leaves it to the OS.
    #[arg(long, global = true, value_enum, default_value_t = DurabilityArg::Sync)]
    pub durability: DurabilityArg,
    /// The model V0 sessions' views answer in: `native` (DSH 0.1's, indexed) or `migrated`
    /// (DSH 0.2's: the V4 successor made in memory, at its seqs). V1–V3 always answer DSH 0.2's.
    #[arg(long, global = true, value_enum, default_value_t = V0ReadsArg::Native)]
    pub v0_reads: V0ReadsArg,
    /// Create a new WAL file for every memtable instead of reusing old ones in place (the
    /// default under `--durability sync`, which saves a device write per durable commit and
    /// audits the WAL before every open: docs/RELIABILITY.md).
    #[arg(long, global = true)]
    pub no_wal_recycling: bool,
    /// Keep the events' blocks in RocksDB's blob files: compaction no longer rewrites them (for
    /// hosts whose compaction falls behind), for ~1.5x the disk, slower point-in-time reads and
    /// no CPU saved per batch (docs/PERFORMANCE.md, "Blob files").
    #[arg(long, global = true)]
    pub blob_files: bool,
    /// Flush and compact through the page cache even where the filesystem takes direct I/O
    /// (the default uses it there: less CPU per batch; docs/PERFORMANCE.md, "Direct I/O").
    #[arg(long, global = true)]
    pub no_direct_io: bool,
    /// Register a built-in message projection (repeatable): `image/offload`, the projection of
    /// DSH's image-offload plugin. Without it, a V4 log holding `image/offload` events is judged
    /// as DSH 0.2's own `SessionStore` judges it (`corrupt: … requires a message projection …`)
    /// and appending one is refused.
    #[arg(long, global = true, value_name = "TYPE", value_parser = str::parse::<BuiltinProjection>)]
    pub message_projection: Vec<BuiltinProjection>,
}

impl StoreArgs {
    /// `--durability` as the engine's.
    pub fn durability(&self) -> Durability {
        match self.durability {
            DurabilityArg::Sync => Durability::Sync,
            DurabilityArg::Buffered => Durability::Buffered,
        }
    }

    /// The store options these flags ask for (every other field at its default).
    pub fn options(&self) -> Options {
        Options {
            durability: self.durability(),
            v0_reads: match self.v0_reads {
                V0ReadsArg::Native => V0Reads::Native,
                V0ReadsArg::Migrated => V0Reads::Migrated,
            },
            wal_recycling: !self.no_wal_recycling,
            blob_files: self.blob_files,
            direct_io: !self.no_direct_io,
            message_projections: dedup(&self.message_projection),
            ..Options::default()
        }
    }

    /// These flags as a command line spells them, for a child process that must open its store
    /// the same way (a benchmark's host processes).
    pub fn flags(&self) -> Vec<String> {
        let name = |v: Option<clap::builder::PossibleValue>| {
            v.map(|v| v.get_name().to_owned()).unwrap_or_default()
        };
        let mut flags = vec![
            "--durability".to_owned(),
            name(self.durability.to_possible_value()),
            "--v0-reads".to_owned(),
            name(self.v0_reads.to_possible_value()),
        ];
        for (set, flag) in [
            (self.no_wal_recycling, "--no-wal-recycling"),
            (self.blob_files, "--blob-files"),
            (self.no_direct_io, "--no-direct-io"),
        ] {
            if set {
                flags.push(flag.to_owned());
            }
        }
        for p in dedup(&self.message_projection) {
            flags.push("--message-projection".to_owned());
            flags.push(p.event_type().to_owned());
        }
        flags
    }
}

/// `list` without repeats, in first-seen order (naming a projection twice asks for it once).
fn dedup(list: &[BuiltinProjection]) -> Vec<BuiltinProjection> {
    let mut out = Vec::new();
    for p in list {
        if !out.contains(p) {
            out.push(*p);
        }
    }
    out
}

/// `--durability` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DurabilityArg {
    /// fsync before acknowledging.
    Sync,
    /// Acknowledge after the WAL write.
    Buffered,
}

/// `--v0-reads` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum V0ReadsArg {
    /// DSH 0.1's model.
    Native,
    /// DSH 0.2's, through the migration chain.
    Migrated,
}

/// Log format generations sessionlog writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormatArg {
    /// DSH 0.1's format (`session.jsonl`).
    #[value(name = "v0")]
    V0,
    /// DSH 0.2's format (`session.v4.jsonl`).
    #[value(name = "v4")]
    V4,
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use sessionlog_engine::BuiltinProjection;

    use super::StoreArgs;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        store: StoreArgs,
    }

    #[test]
    fn message_projections_are_none_unless_named_and_named_once() {
        let none = Flags::try_parse_from(["x"]).expect("parse");
        assert!(none.store.options().message_projections.is_empty());
        let twice = Flags::try_parse_from([
            "x",
            "--message-projection",
            "image/offload",
            "--message-projection",
            "image/offload",
        ])
        .expect("parse");
        assert_eq!(
            twice.store.options().message_projections,
            [BuiltinProjection::ImageOffload]
        );
        let unknown = Flags::try_parse_from(["x", "--message-projection", "image/blur"])
            .err()
            .expect("refused");
        assert!(
            unknown.to_string().contains(
                "\"image/blur\" is not a built-in message projection (built in: image/offload)"
            ),
            "{unknown}"
        );
    }
}
