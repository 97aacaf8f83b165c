//! The WAL audit: before RocksDB replays a store's WAL files, refuse to open when one of them
//! holds a complete record after damage.
//!
//! Why it exists: RocksDB reuses WAL files (`Options::wal_recycling`) only under point-in-time
//! recovery, and a reused file's current records are followed by its older life's bytes, so its
//! reader cannot tell damage from the end of the log: replay stops at the first damaged record,
//! under either recovery mode, and drops every write after it without an error. Without reuse,
//! the store's `TolerateCorruptedTailRecords` mode refuses to open instead. The audit brings that
//! refusal back for reused files, and for files written without reuse that are replayed under
//! point-in-time recovery.
//!
//! The rule (the invariant the open keeps): in every audited file, no complete, checksummed
//! record of that file lies after the first point where its records stop reading cleanly. A torn
//! last write is never acknowledged, and nothing complete follows it. Under `Durability::Sync`
//! with reused files every record is synced before the next is written (RocksDB's group commit
//! without pipelining, and `Store::commit_unsynced` syncing too), so the only unsynced bytes at
//! any moment are the last record's, and a complete record after the damage proves the damage is
//! in synced, acknowledged data.
//!
//! What it cannot see: damage inside the last record of a reused file looks exactly like a torn
//! last write (whose rest holds the older life's bytes), so that one record is lost, as in
//! SQLite's WAL.
//!
//! RocksDB's WAL layout (`db/log_format.h`), which this module reads and never writes:
//!
//! | part | bytes | content |
//! |---|---|---|
//! | block | 32 KiB | physical records back to back; a tail too short for a header is zero padding |
//! | header | 7 | masked crc32c (u32 LE), payload length (u16 LE), type (u8) |
//! | recyclable header | 11 | the same, then the file's log number (low 32 bits, u32 LE) |
//! | payload | length | a fragment of a logical record (types: full, first, middle, last) |
//!
//! The crc32c covers the type byte, the log number (recyclable types) and the payload. A
//! logical record longer than a block's room is cut into a first, middles and a last fragment;
//! every fragment but the last fills its block, so padding only ever follows a whole record.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// RocksDB's `kBlockSize`.
const BLOCK: usize = 32 * 1024;
/// RocksDB's `kHeaderSize`.
const HEADER: usize = 7;
/// RocksDB's `kRecyclableHeaderSize`.
const RECYCLABLE_HEADER: usize = 11;
/// Offset of the first byte the crc32c covers (the type).
const CRC_FROM: usize = 6;
/// RocksDB's `crc32c::kMaskDelta`.
const MASK_DELTA: u32 = 0xa282_ead8;
/// Record types with this bit set are skipped by readers that do not know them.
const SAFE_IGNORE: u8 = 0x80;

/// Where a physical record sits in its logical record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fragment {
    Full,
    First,
    Middle,
    Last,
}

/// A record type's place and header size (`None`: not a type RocksDB writes or skips).
fn record_type(ty: u8) -> Option<(Fragment, bool)> {
    use Fragment::{First, Full, Last, Middle};
    Some(match ty {
        1 => (Full, false),
        2 => (First, false),
        3 => (Middle, false),
        4 => (Last, false),
        5 => (Full, true),
        6 => (First, true),
        7 => (Middle, true),
        8 => (Last, true),
        // Compression type, timestamp sizes, predecessor WAL info: one-fragment records.
        9 | 10 | 130 => (Full, false),
        11 | 131 => (Full, true),
        t if t & SAFE_IGNORE != 0 => (Full, false),
        _ => return None,
    })
}

/// What the bytes at one position of a block are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Header {
    /// A checksummed physical record of this file, `size` bytes with its header.
    Record {
        fragment: Fragment,
        recyclable: bool,
        size: usize,
    },
    /// The rest of the block is padding: too few bytes for a header, or a zero header
    /// (preallocated or padded space).
    Padding,
    /// A checksummed record of an earlier file that reused this one: the end of this file's.
    Old,
    /// Anything else: a bad type, length or checksum.
    Bad,
}

/// Read the header at `at` in `block` (a 32 KiB block, or the file's shorter last one) of the
/// file whose log number is `log`.
fn header_at(block: &[u8], at: usize, log: u32) -> Header {
    if padding_at(block, at) {
        return Header::Padding;
    }
    let rest = &block[at..];
    let len = usize::from(u16::from_le_bytes([rest[4], rest[5]]));
    let Some((fragment, recyclable)) = record_type(rest[6]) else {
        return Header::Bad;
    };
    let header = if recyclable {
        RECYCLABLE_HEADER
    } else {
        HEADER
    };
    if header + len > rest.len() {
        return Header::Bad;
    }
    if recyclable && u32::from_le_bytes([rest[7], rest[8], rest[9], rest[10]]) != log {
        return Header::Old;
    }
    let stored = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
    if unmask(stored) != crc32c(&rest[CRC_FROM..header + len]) {
        return Header::Bad;
    }
    Header::Record {
        fragment,
        recyclable,
        size: header + len,
    }
}

/// Whether the rest of `block` from `at` is padding: too short for a header (a recyclable
/// type needs 11 bytes), or a zero header. Checks no checksum.
fn padding_at(block: &[u8], at: usize) -> bool {
    let rest = &block[at..];
    if rest.len() < HEADER {
        return true;
    }
    let (ty, len) = (rest[6], u16::from_le_bytes([rest[4], rest[5]]));
    (ty == 0 && len == 0)
        || (rest.len() < RECYCLABLE_HEADER
            && record_type(ty).is_some_and(|(_, recyclable)| recyclable))
}

/// A WAL file's bytes, read as blocks.
struct Wal<'a> {
    bytes: &'a [u8],
    log: u32,
    /// The file's header format, taken from its first header: a file keeps one.
    recyclable: bool,
}

impl Wal<'_> {
    /// The block holding file offset `pos`, and `pos` within it.
    fn block(&self, pos: usize) -> (&[u8], usize) {
        let start = pos - pos % BLOCK;
        let end = (start + BLOCK).min(self.bytes.len());
        (&self.bytes[start..end], pos - start)
    }

    fn header(&self, pos: usize) -> Header {
        let (block, at) = self.block(pos);
        header_at(block, at, self.log)
    }

    /// The checksummed record of this file's format at `pos`, if one is there.
    fn record(&self, pos: usize) -> Option<(Fragment, usize)> {
        match self.header(pos) {
            Header::Record {
                fragment,
                recyclable,
                size,
            } if recyclable == self.recyclable => Some((fragment, size)),
            _ => None,
        }
    }

    /// Where the file's records stop reading cleanly: `None` when they run to its end (a torn
    /// last record included, as nothing follows it).
    fn end(&self) -> Option<usize> {
        let mut pos = 0;
        let mut in_record = false;
        while pos < self.bytes.len() {
            match self.header(pos) {
                Header::Padding => {
                    if self.block(pos).0.len() < BLOCK {
                        return None;
                    }
                    pos += BLOCK - pos % BLOCK;
                }
                Header::Old | Header::Bad => return Some(pos),
                Header::Record {
                    fragment,
                    recyclable,
                    size,
                } => {
                    // A fragment must continue its logical record, in the file's one format.
                    let continues = matches!(fragment, Fragment::Middle | Fragment::Last);
                    if recyclable != self.recyclable || continues != in_record {
                        return Some(pos);
                    }
                    in_record = matches!(fragment, Fragment::First | Fragment::Middle);
                    pos += size;
                }
            }
        }
        None
    }

    /// Whether a complete logical record starts at `pos`: a full fragment, or a first one whose
    /// middles and last follow, all checksummed.
    fn complete_record_at(&self, pos: usize) -> bool {
        let Some((fragment, size)) = self.record(pos) else {
            return false;
        };
        match fragment {
            Fragment::Full => true,
            Fragment::Middle | Fragment::Last => false,
            Fragment::First => {
                let mut pos = pos + size;
                while let Some((fragment, size)) = self.record(pos) {
                    match fragment {
                        Fragment::Middle => pos += size,
                        Fragment::Last => return true,
                        Fragment::Full | Fragment::First => return false,
                    }
                }
                false
            }
        }
    }

    /// The first complete record after the damage at `end`: searched at every byte of the
    /// damaged block (the damaged length cannot be trusted), then record by record from the
    /// start of each later block (every block starts with a header).
    fn record_after(&self, end: usize) -> Option<usize> {
        let block_end = (end - end % BLOCK + BLOCK).min(self.bytes.len());
        if let Some(pos) = (end + 1..block_end).find(|&p| self.complete_record_at(p)) {
            return Some(pos);
        }
        let mut block = block_end;
        while block < self.bytes.len() {
            let mut pos = block;
            while pos < (block + BLOCK).min(self.bytes.len()) {
                if self.complete_record_at(pos) {
                    return Some(pos);
                }
                match self.record(pos) {
                    Some((_, size)) => pos += size,
                    None => break,
                }
            }
            block += BLOCK;
        }
        None
    }
}

/// Where damage hides a complete record in one WAL file: (damage offset, record offset).
fn damage(bytes: &[u8], log: u32, legacy_too: bool) -> Option<(usize, usize)> {
    let recyclable = bytes
        .get(6)
        .and_then(|&ty| record_type(ty))
        .is_some_and(|(_, recyclable)| recyclable);
    let wal = Wal {
        bytes,
        log,
        recyclable,
    };
    if !legacy_too && !recyclable {
        return None;
    }
    let end = wal.end()?;
    wal.record_after(end).map(|record| (end, record))
}

/// Audit every WAL file (`NNNNNN.log`) in the store directory `dir`: files in the recyclable
/// format always (RocksDB's replay of them never refuses), the others too when `legacy_too` (the
/// store is about to open under point-in-time recovery). Refuses with the file, the damage's
/// offset and the complete record's offset; reads only.
pub(crate) fn audit(dir: &Path, legacy_too: bool) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(dir)(e)),
    };
    let mut wals: Vec<(u64, PathBuf)> = Vec::new();
    for entry in entries {
        let path = entry.map_err(io(dir))?.path();
        let number = path
            .extension()
            .filter(|x| *x == "log")
            .and(path.file_stem())
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse::<u64>().ok());
        if let Some(number) = number {
            wals.push((number, path));
        }
    }
    wals.sort();
    for (number, path) in wals {
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        // RocksDB's headers carry the log number's low 32 bits.
        let log = (number & u64::from(u32::MAX)) as u32;
        if let Some((at, record)) = damage(&bytes, log, legacy_too) {
            return Err(Error::WalDamaged {
                path,
                offset: at as u64,
                record: record as u64,
            });
        }
    }
    Ok(())
}

/// RocksDB's `crc32c::Unmask`.
fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// CRC-32C (Castagnoli), slicing by 8.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        crc = CRC_TABLES[7][(lo & 0xff) as usize]
            ^ CRC_TABLES[6][((lo >> 8) & 0xff) as usize]
            ^ CRC_TABLES[5][((lo >> 16) & 0xff) as usize]
            ^ CRC_TABLES[4][(lo >> 24) as usize]
            ^ CRC_TABLES[3][usize::from(c[4])]
            ^ CRC_TABLES[2][usize::from(c[5])]
            ^ CRC_TABLES[1][usize::from(c[6])]
            ^ CRC_TABLES[0][usize::from(c[7])];
    }
    for &b in chunks.remainder() {
        crc = CRC_TABLES[0][((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

/// The slicing-by-8 tables of the reflected Castagnoli polynomial.
static CRC_TABLES: [[u32; 256]; 8] = crc_tables();

const fn crc_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

#[cfg(test)]
mod tests;
