//! Whether a store directory's filesystem takes `O_DIRECT` writes, asked before RocksDB is told
//! to flush and compact with direct I/O (`Options::direct_io`).
//!
//! Why a probe: RocksDB opens every flushed and compacted file with `O_DIRECT` once the option
//! is set, and a filesystem that refuses it (tmpfs before Linux 6.6, some FUSE and network
//! mounts) would fail the first flush, which stops every write to the store. The probe writes
//! what RocksDB writes, a block aligned in memory, offset and length, into a scratch file it
//! then removes; any failure means buffered I/O, which is always correct.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The scratch file's name in the store directory (removed before the probe returns).
const PROBE_FILE: &str = "direct-io-probe";
/// Alignment and length of the probe's write: a page, a multiple of every logical block size
/// RocksDB aligns its direct writes to.
const BLOCK: usize = 4096;

/// Whether a direct (`O_DIRECT`) write of an aligned block succeeds in `dir`.
pub fn supported(dir: &Path) -> bool {
    let path = dir.join(PROBE_FILE);
    let written = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .and_then(|mut file| file.write_all(aligned_block(&vec![0u8; 2 * BLOCK])));
    // A file left behind by a failed write is removed too; it holds nothing the store reads.
    let removed = std::fs::remove_file(&path).is_ok();
    written.is_ok() && removed
}

/// The first `BLOCK`-aligned `BLOCK` bytes of `buf` (which holds `2 * BLOCK`).
fn aligned_block(buf: &[u8]) -> &[u8] {
    let start = buf.as_ptr().align_offset(BLOCK).min(BLOCK);
    &buf[start..start + BLOCK]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_block_is_aligned_and_whole() {
        let buf = vec![0u8; 2 * BLOCK];
        let block = aligned_block(&buf);
        assert_eq!(block.len(), BLOCK);
        assert_eq!(block.as_ptr() as usize % BLOCK, 0);
    }

    #[test]
    fn the_probe_leaves_no_file_behind() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // The answer depends on the filesystem under the temp dir; either way nothing remains.
        let _answer = supported(tmp.path());
        assert!(!tmp.path().join(PROBE_FILE).exists());
    }

    #[test]
    fn a_directory_that_does_not_exist_takes_no_direct_io() {
        let tmp = tempfile::tempdir().expect("tempdir");
        assert!(!supported(&tmp.path().join("missing")));
    }
}
