//! The RocksDB options the store opens with: the WAL policy (recycling, recovery mode, atomic
//! flushes) and every column family's table, compression, compaction and memtable settings.
//! Each setting's comment says what it buys; docs/PERFORMANCE.md records the measurements by
//! topic.

use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, DBRecoveryMode, SliceTransform};

use crate::layout::counter;
use crate::layout::keys::{
    CF_CHECKPOINTS, CF_EVENTS, CF_SURFACE, SESSION_PREFIX_LEN, SESSION_RANGE_CFS,
};
use crate::options::Options;

/// WAL files kept for reuse when `Options::wal_recycling` is set (one is live at a time, and
/// another while its memtables flush; docs/PERFORMANCE.md, "WAL recycling").
const RECYCLED_WAL_FILES: usize = 4;

/// How the WAL is recovered, and whether its files are reused (`Options::wal_recycling`).
pub(crate) fn set_wal_policy(db_opts: &mut rocksdb::Options, options: &Options) {
    if options.recycles_wal() {
        // RocksDB recycles only under point-in-time recovery: a reused file's tail holds its
        // previous life's records, which replay must take as the end. Damage before the end is
        // refused by the WAL audit that runs before every open (`wal_audit`).
        db_opts.set_wal_recovery_mode(DBRecoveryMode::PointInTime);
        db_opts.set_recycle_log_file_num(RECYCLED_WAL_FILES);
        // A WAL is reusable only once every column family with data in it has flushed; left
        // alone, the small ones keep every WAL alive. Atomic flushes flush them all whenever the
        // events memtable fills, so each WAL closes obsolete and at about one size, and a reused
        // file has room for the next (writing past its end would write the inode again). A WAL
        // size limit instead closed every other WAL early, leaving reused files too small.
        // RocksDB runs atomic flushes only without pipelined writes.
        db_opts.set_atomic_flush(true);
        db_opts.set_enable_pipelined_write(false);
        // Without pipelined writes, the write group's leader inserts every member's keys into the
        // memtables: members do not insert in parallel, so they are woken once (when their group
        // is durable) rather than again to insert, and inserts use the per-session hints
        // ([`insert_hint_options`]), which RocksDB ignores under concurrent inserts. Measured at
        // (1000,32): RocksDB's write path fell from 15% to 12% of the process's CPU samples.
        // Pipelined writes (below) keep concurrent inserts: there the leader's inserts were
        // measured no cheaper (buffered, 1000 sessions: 49.9 -> 51.0 us per batch at the median).
        db_opts.set_allow_concurrent_memtable_write(false);
    } else {
        // A torn last WAL record (power loss mid-write: never acknowledged) is dropped; damage
        // anywhere else fails the open (in a reused file left by an earlier open, the WAL audit
        // refuses it). Point-in-time recovery alone would stop replay at the damage and
        // silently lose every acknowledged write after it.
        db_opts.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
        db_opts.set_enable_pipelined_write(true);
    }
}

/// With `Options::blob_files`, the `events` column family keeps its values (blocks of lines, a
/// few KB each) in RocksDB's blob files, its SSTs only their keys and references. Each flushed L0
/// file holds keys of every active session, so every L0 compaction rewrites the active sessions'
/// blocks in the level below, Zstd-compressing them again; a blob is written (and compressed)
/// once, at flush, and compaction moves only references. Values under 512 bytes stay inline:
/// compressing small values one at a time at flush cost more CPU than their compaction saved
/// (measured with 256 bytes: compaction CPU fell further, the total did not). Zstd level 1 per
/// value keeps a store of appended blocks at 1.4-1.5x the size of Zstd over 64 KiB SST blocks; LZ4
/// per value, 1.8-2.0x, was cheaper in some runs and dearer in others (docs/PERFORMANCE.md, "Blob
/// files"). Blob garbage collection stays off while the store runs: appends make no garbage, and
/// with it on every compaction of the active sessions' keys relocated their blobs held in older
/// files, which gave back most of the saving. The blocks of purged or replaced sessions are
/// collected by `Store::compact` (`maintenance.rs`, `BlobGc::Full`). Set through RocksDB's options string:
/// the per-blob compression level has no setter.
const EVENTS_BLOB_OPTIONS: &str = "enable_blob_files=true;min_blob_size=512;\
    blob_compression_type=kZSTD;blob_compression_opts={level=1}";

/// The Zstd level of the last level's blocks as the store runs (see [`cf_options`]).
const BOTTOMMOST_ZSTD_LEVEL: i32 = 1;
/// RocksDB's default Zstd window (`CompressionOptions::window_bits`), kept when the level is set.
const ZSTD_DEFAULT_WINDOW_BITS: i32 = -14;

/// The Zstd level of the last level's blocks written by a full compaction
/// ([`LastLevel::Archive`]). Level 19 over 1 MiB blocks with a dictionary stores generated V0
/// sessions' lines in 6.9x fewer bytes where level 1 over 64 KiB blocks did 4.1x, at 2.3-3.5 MB/s
/// of one core instead of hundreds: affordable once, for sessions compacted for keeps, not for
/// every background compaction of a running host (docs/PERFORMANCE.md, "Compaction for keeps").
const ARCHIVE_ZSTD_LEVEL: i32 = 19;
/// The Zstd dictionary a full compaction trains for each last-level SST of the column families
/// keyed by session number: JSON lines repeat their keys, type names and ids from block to
/// block, which a block compressed alone has to spell out again.
const ARCHIVE_DICT_BYTES: i32 = 64 << 10;
/// The samples each dictionary is trained on (Zstd's guidance: about 100x the dictionary).
const ARCHIVE_DICT_TRAIN_BYTES: i32 = 100 * ARCHIVE_DICT_BYTES;
/// The SST block size of `events` written by a full compaction: a 1 MiB block compresses as a
/// whole what 64 KiB blocks compress in sixteen pieces. Point-in-time queries read `surface` and
/// `checkpoints`, which keep their blocks; a scan of `events` (export, replay) reads whole
/// blocks anyway; a single stored block read cold costs a 1 MiB decompression.
const ARCHIVE_EVENTS_BLOCK_BYTES: usize = 1 << 20;

/// Per-session memtable insert hints, as an options string (RocksDB has no setter for them): a
/// memtable remembers where each session's last key went, so the next one (a session's keys only
/// grow) is placed from there instead of searched for from the skiplist's head; that halved the
/// skiplist search's CPU. Costs ~250 bytes per session in each memtable (docs/PERFORMANCE.md,
/// "Memtable insert hints").
fn insert_hint_options() -> String {
    format!("memtable_insert_with_hint_prefix_extractor=rocksdb.FixedPrefix.{SESSION_PREFIX_LEN}")
}

/// The memtable prefix bloom's size. RocksDB sizes it as a fraction of the memtable, but it holds
/// one entry per session written since the last flush (a few thousand), not one per byte: 2 Mbit
/// keep its false positives under 1e-3 up to 100,000 sessions per memtable. The 10% of a 128 MiB
/// memtable it was before (12.8 MiB in each column family keyed by session) was allocated and
/// zeroed at every memtable switch: 3% of the append path's CPU samples in the bloom's
/// constructor, and most of its page faults (5.7% of the samples before, 0.8% after;
/// docs/PERFORMANCE.md, "Memtable bloom").
const MEMTABLE_BLOOM_BYTES: usize = 256 << 10;
/// The largest memtable bloom ratio RocksDB takes.
const MAX_MEMTABLE_BLOOM_RATIO: f64 = 0.25;

/// How many L0 files of `events` start a compaction (RocksDB's default is 4). Each flushed L0
/// file holds blocks of every active session, so every L0 compaction rewrites the level below's
/// files holding their earlier blocks: twice the L0 files per compaction halves those rewrites.
/// The level below is sized to match ([`events_level_base_bytes`]), as RocksDB's tuning guide
/// has it (L0 about the size of the base level). With 8 files and a 1 GiB base instead of 4 and
/// 256 MiB, V0 hosting at (1000,32) spent 30-32% less compaction CPU in 45- and 90-second runs
/// and 7-11% less CPU per durable batch (docs/PERFORMANCE.md, "L0 compaction trigger"). The
/// price: a read of a session appended to lately may merge up to twice the L0 files (`bench
/// pit`, whose stores are imported, measured no slower; reads beside a full L0 were not
/// measured apart), and L0 holds up to twice the bytes before they are compacted.
const EVENTS_L0_COMPACTION_TRIGGER: i32 = 8;

/// The base level's size for `events`: the L0 files that start a compaction, memtables of
/// `write_buffer_bytes` each.
fn events_level_base_bytes(write_buffer_bytes: usize) -> u64 {
    u64::from(EVENTS_L0_COMPACTION_TRIGGER.unsigned_abs())
        .saturating_mul(u64::try_from(write_buffer_bytes).unwrap_or(u64::MAX))
}

/// The SST size of `events` and `sessions`.
const FILE_BYTES: u64 = 64 << 20;
/// The SST size of `surface` and `checkpoints`, small beside `events` and keyed by session
/// number. Sessions are numbered as they are created, so the ones being appended to hold the
/// newest numbers, and a compaction into a level rewrites only that level's files overlapping
/// them. In [`FILE_BYTES`] files the last level of these column families stayed one file for a
/// long time (1 to 3 after 45 s of V4 hosting), which every L0 compaction rewrote whole: a cost
/// that grew with the store. Smaller files leave the finished sessions' keys alone
/// (docs/PERFORMANCE.md, "Small column families' files").
const SMALL_CF_FILE_BYTES: u64 = 4 << 20;

/// The SST block size of the column families keyed by session number (`events`, `surface`,
/// `checkpoints`). They are read by ranges (a session's events, its checkpoints and surface
/// records from a seq on) and an appended batch is one value of a few KB, so a block holds
/// many values of few sessions: Zstd level 1 over 64 KiB blocks of V0 lines compresses 4.06x at
/// 454 MB/s and decompresses at 1,874 MB/s, over 16 KiB blocks 3.42x, 407 and 1,235 MB/s. A
/// compacted hosting store took 15-21% less disk, and cold point-in-time reads (fewer, larger
/// reads) got faster; warm reads and the append path's CPU did not move
/// (docs/PERFORMANCE.md, "Block size"). Imported blocks are single values of ~64 KiB,
/// so this changes little for them. SSTs keep the block size they were written with.
const SESSION_RANGE_BLOCK_BYTES: usize = 64 << 10;
/// The SST block size of `sessions`, read by point lookups of one small record.
const SESSIONS_BLOCK_BYTES: usize = 16 << 10;

/// The SST size of column family `name` ([`FILE_BYTES`], [`SMALL_CF_FILE_BYTES`]).
fn target_file_bytes(name: &str) -> u64 {
    if name == CF_SURFACE || name == CF_CHECKPOINTS {
        SMALL_CF_FILE_BYTES
    } else {
        FILE_BYTES
    }
}

/// Per-CF options: bloom filters and a shared cache everywhere (blobs too); the session-number
/// prefix extractor (with a [`MEMTABLE_BLOOM_BYTES`] memtable bloom and insert hints) and
/// [`SESSION_RANGE_BLOCK_BYTES`] blocks on the CFs keyed by session number; blob files for
/// `events` when asked.
pub(crate) fn cf_options(
    name: &str,
    options: &Options,
    cache: &Cache,
) -> std::result::Result<rocksdb::Options, rocksdb::Error> {
    let keyed_by_session = SESSION_RANGE_CFS.contains(&name);
    let mut from_string = Vec::new();
    if name == CF_EVENTS && options.blob_files {
        from_string.push(EVENTS_BLOB_OPTIONS.to_owned());
    }
    if keyed_by_session {
        from_string.push(insert_hint_options());
    }
    let mut o = if from_string.is_empty() {
        rocksdb::Options::default()
    } else {
        rocksdb::Options::default().get_options_from_string(from_string.join(";"))?
    };
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    table.set_bloom_filter(10.0, false);
    table.set_cache_index_and_filter_blocks(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    table.set_block_size(if keyed_by_session {
        SESSION_RANGE_BLOCK_BYTES
    } else {
        SESSIONS_BLOCK_BYTES
    });
    o.set_block_based_table_factory(&table);
    o.set_blob_cache(cache);
    o.set_write_buffer_size(options.write_buffer_bytes);
    o.set_level_compaction_dynamic_level_bytes(true);
    // Flushes write L0 uncompressed: an L0 file lives until its first compaction, so compressing
    // it costs CPU on every appended byte (LZ4 at flush, again on the compaction's read) for
    // space held only briefly; the levels below keep LZ4, the last one Zstd (docs/PERFORMANCE.md,
    // "Flush compression").
    o.set_compression_per_level(&[
        DBCompressionType::None,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
    ]);
    o.set_bottommost_compression_type(DBCompressionType::Zstd);
    // Zstd level 1 instead of its default 3 at the last level: compaction Zstd-compresses every
    // appended byte there, and level 1 takes ~10% less compaction CPU for ~5% more disk
    // (docs/PERFORMANCE.md, "Bottommost Zstd level").
    let (strategy, max_dict_bytes) = (0, 0);
    o.set_bottommost_compression_options(
        ZSTD_DEFAULT_WINDOW_BITS,
        BOTTOMMOST_ZSTD_LEVEL,
        strategy,
        max_dict_bytes,
        true,
    );
    o.set_bottommost_zstd_max_train_bytes(0, true);
    o.set_target_file_size_base(target_file_bytes(name));
    if name == CF_EVENTS {
        o.set_level_zero_file_num_compaction_trigger(EVENTS_L0_COMPACTION_TRIGGER);
        o.set_max_bytes_for_level_base(events_level_base_bytes(options.write_buffer_bytes));
    }
    if keyed_by_session {
        o.set_prefix_extractor(SliceTransform::create_fixed_prefix(SESSION_PREFIX_LEN));
        let ratio = MEMTABLE_BLOOM_BYTES as f64 / options.write_buffer_bytes.max(1) as f64;
        o.set_memtable_prefix_bloom_ratio(ratio.min(MAX_MEMTABLE_BLOOM_RATIO));
    } else {
        o.set_merge_operator_associative(counter::MERGE_OPERATOR, |_key, existing, operands| {
            counter::merge_max(existing, operands)
        });
    }
    Ok(o)
}

/// How a column family's last level is written: as the store runs, or by a full compaction
/// (`Store::compact`), which writes sessions for keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LastLevel {
    /// [`cf_options`]' settings: Zstd level 1, no dictionary, the blocks it opens with.
    Running,
    /// Zstd level [`ARCHIVE_ZSTD_LEVEL`] with a trained dictionary on the column families keyed
    /// by session number, and [`ARCHIVE_EVENTS_BLOCK_BYTES`] blocks in `events`.
    Archive,
}

/// The `SetOptions` settings that make column family `name` write its last level as `mode`
/// says (both modes set every field either changes, so each undoes the other).
pub(crate) fn last_level_settings(name: &str, mode: LastLevel) -> Vec<(&'static str, String)> {
    let archive = mode == LastLevel::Archive && SESSION_RANGE_CFS.contains(&name);
    let (level, dict_bytes, train_bytes) = if archive {
        (
            ARCHIVE_ZSTD_LEVEL,
            ARCHIVE_DICT_BYTES,
            ARCHIVE_DICT_TRAIN_BYTES,
        )
    } else {
        (BOTTOMMOST_ZSTD_LEVEL, 0, 0)
    };
    let mut settings = vec![(
        "bottommost_compression_opts",
        format!(
            "{{window_bits={ZSTD_DEFAULT_WINDOW_BITS};level={level};strategy=0;\
             max_dict_bytes={dict_bytes};zstd_max_train_bytes={train_bytes};enabled=true}}"
        ),
    )];
    if name == CF_EVENTS {
        let block_bytes = if archive {
            ARCHIVE_EVENTS_BLOCK_BYTES
        } else {
            SESSION_RANGE_BLOCK_BYTES
        };
        settings.push((
            "block_based_table_factory",
            format!("{{block_size={block_bytes}}}"),
        ));
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::{
        LastLevel, ARCHIVE_DICT_BYTES, ARCHIVE_DICT_TRAIN_BYTES, ARCHIVE_EVENTS_BLOCK_BYTES,
        ARCHIVE_ZSTD_LEVEL, BOTTOMMOST_ZSTD_LEVEL, FILE_BYTES, MEMTABLE_BLOOM_BYTES,
        SESSIONS_BLOCK_BYTES, SESSION_RANGE_BLOCK_BYTES, SMALL_CF_FILE_BYTES,
    };
    use crate::layout::keys::{
        ALL_CFS, CF_CHECKPOINTS, CF_EVENTS, CF_SESSIONS, CF_SURFACE, SESSION_PREFIX_LEN,
        SESSION_RANGE_CFS,
    };
    use crate::options::{Durability, Options};
    use crate::store::Store;

    /// The section of the newest OPTIONS file RocksDB wrote in `dir` whose header is
    /// `[<header>]`.
    fn options_section(dir: &std::path::Path, header: &str) -> String {
        let newest = std::fs::read_dir(dir)
            .expect("store directory")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.starts_with("OPTIONS-"))
            .max_by_key(|n| n["OPTIONS-".len()..].parse::<u64>().unwrap_or(0))
            .expect("an OPTIONS file");
        let text = std::fs::read_to_string(dir.join(newest)).expect("OPTIONS text");
        let header = format!("{header}]");
        text.split("\n[")
            .find(|section| section.starts_with(&header))
            .expect("the section")
            .to_owned()
    }

    /// The `key=value` setting's value in an OPTIONS section.
    fn setting<'s>(section: &'s str, key: &str) -> &'s str {
        section
            .lines()
            .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("{key} in {section}"))
    }

    #[test]
    fn every_column_family_gets_its_bloom_hints_sizes_levels_and_last_levels_zstd_level() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let options = Options::default();
        let memtable = options.write_buffer_bytes;
        let store = Store::open(tmp.path(), options).expect("open");
        let db = options_section(store.path(), "DBOptions");
        assert_eq!(setting(&db, "allow_concurrent_memtable_write"), "false");
        assert_eq!(setting(&db, "enable_pipelined_write"), "false");
        for name in ALL_CFS {
            let section = options_section(store.path(), &format!("CFOptions \"{name}\""));
            let memtable_size = memtable.to_string();
            assert_eq!(
                setting(&section, "write_buffer_size"),
                memtable_size,
                "{name}"
            );
            let (l0_trigger, level_base) = if name == CF_EVENTS {
                (8, 8 * memtable as u64)
            } else {
                (4, 256 << 20)
            };
            assert_eq!(
                setting(&section, "level0_file_num_compaction_trigger"),
                l0_trigger.to_string(),
                "{name}"
            );
            assert_eq!(
                setting(&section, "max_bytes_for_level_base"),
                level_base.to_string(),
                "{name}"
            );
            let file_bytes = if [CF_SURFACE, CF_CHECKPOINTS].contains(&name) {
                SMALL_CF_FILE_BYTES
            } else {
                FILE_BYTES
            };
            assert_eq!(
                setting(&section, "target_file_size_base"),
                file_bytes.to_string(),
                "{name}"
            );
            let table = options_section(
                store.path(),
                &format!("TableOptions/BlockBasedTable \"{name}\""),
            );
            let block_bytes = if SESSION_RANGE_CFS.contains(&name) {
                SESSION_RANGE_BLOCK_BYTES
            } else {
                SESSIONS_BLOCK_BYTES
            };
            assert_eq!(
                setting(&table, "block_size"),
                block_bytes.to_string(),
                "{name}"
            );
            let bottommost = setting(&section, "bottommost_compression_opts");
            assert!(
                bottommost.contains(&format!(";level={BOTTOMMOST_ZSTD_LEVEL};"))
                    && bottommost.contains("enabled=true"),
                "{name}: {bottommost}"
            );
            let ratio: f64 = setting(&section, "memtable_prefix_bloom_size_ratio")
                .parse()
                .expect("a ratio");
            let hints = setting(&section, "memtable_insert_with_hint_prefix_extractor");
            if name == CF_SESSIONS {
                assert_eq!(ratio, 0.0, "{name}: no prefix extractor, no memtable bloom");
                assert_eq!(hints, "nullptr", "{name}");
            } else {
                let bloom = ratio * memtable as f64;
                let want = MEMTABLE_BLOOM_BYTES as f64;
                assert!((bloom - want).abs() < want * 0.01, "{name}: {bloom} bytes");
                let prefix = format!("rocksdb.FixedPrefix.{SESSION_PREFIX_LEN}");
                assert_eq!(setting(&section, "prefix_extractor"), prefix, "{name}");
                assert_eq!(hints, prefix, "{name}");
            }
        }
    }

    /// The last-level settings of column family `name` in the newest OPTIONS file: its
    /// bottommost Zstd level, dictionary bytes, dictionary training bytes and block size.
    fn last_level(store: &Store, name: &str) -> (String, String, String, String) {
        let section = options_section(store.path(), &format!("CFOptions \"{name}\""));
        let bottommost = setting(&section, "bottommost_compression_opts");
        let field = |key: &str| {
            bottommost
                .trim_matches(|c| c == '{' || c == '}')
                .split(';')
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("{key} in {bottommost}"))
                .to_owned()
        };
        let table = options_section(
            store.path(),
            &format!("TableOptions/BlockBasedTable \"{name}\""),
        );
        (
            field("level"),
            field("max_dict_bytes"),
            field("zstd_max_train_bytes"),
            setting(&table, "block_size").to_owned(),
        )
    }

    /// A full compaction writes the session-keyed column families' last level with Zstd level
    /// 19, a trained dictionary and (`events`) 1 MiB blocks, and sets the running settings back
    /// after it: the ones the store opens with.
    #[test]
    fn a_full_compaction_writes_for_keeps_and_then_sets_the_running_settings_back() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::open(tmp.path(), Options::default()).expect("open");
        let opened: Vec<_> = ALL_CFS.iter().map(|n| last_level(&store, n)).collect();
        store.set_last_level(LastLevel::Archive).expect("archive");
        for name in ALL_CFS {
            let (level, dict, train, block) = last_level(&store, name);
            if SESSION_RANGE_CFS.contains(&name) {
                assert_eq!(level, ARCHIVE_ZSTD_LEVEL.to_string(), "{name}");
                assert_eq!(dict, ARCHIVE_DICT_BYTES.to_string(), "{name}");
                assert_eq!(train, ARCHIVE_DICT_TRAIN_BYTES.to_string(), "{name}");
            } else {
                assert_eq!(level, BOTTOMMOST_ZSTD_LEVEL.to_string(), "{name}");
                assert_eq!(dict, "0", "{name}");
            }
            let want_block = match name {
                CF_EVENTS => ARCHIVE_EVENTS_BLOCK_BYTES,
                CF_SESSIONS => SESSIONS_BLOCK_BYTES,
                _ => SESSION_RANGE_BLOCK_BYTES,
            };
            assert_eq!(block, want_block.to_string(), "{name}");
        }
        store.compact().expect("compact");
        let after: Vec<_> = ALL_CFS.iter().map(|n| last_level(&store, n)).collect();
        assert_eq!(after, opened);
        assert_eq!(opened[1].0, BOTTOMMOST_ZSTD_LEVEL.to_string());
        assert_eq!(opened[1].3, SESSION_RANGE_BLOCK_BYTES.to_string());
    }

    /// Pipelined writes (buffered durability, or no WAL reuse) keep RocksDB's concurrent inserts.
    #[test]
    fn pipelined_writes_keep_concurrent_memtable_inserts() {
        for options in [
            Options {
                durability: Durability::Buffered,
                ..Options::default()
            },
            Options {
                wal_recycling: false,
                ..Options::default()
            },
        ] {
            let tmp = tempfile::tempdir().expect("tempdir");
            let store = Store::open(tmp.path(), options).expect("open");
            let db = options_section(store.path(), "DBOptions");
            assert_eq!(setting(&db, "enable_pipelined_write"), "true");
            assert_eq!(setting(&db, "allow_concurrent_memtable_write"), "true");
        }
    }
}
