use proptest::prelude::*;

use super::*;

/// RocksDB's `crc32c::Mask`.
fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Writes logical records the way RocksDB's `log::Writer` does: fragments cut at block
/// boundaries, a block tail too short for a header padded with zeros. Returns each logical
/// record's offset.
struct Writer {
    bytes: Vec<u8>,
    log: u32,
    recyclable: bool,
    /// The zero padding written at block tails.
    padding: Vec<std::ops::Range<usize>>,
}

impl Writer {
    fn new(log: u32, recyclable: bool) -> Self {
        Writer {
            bytes: Vec::new(),
            log,
            recyclable,
            padding: Vec::new(),
        }
    }

    fn header(&self) -> usize {
        if self.recyclable {
            RECYCLABLE_HEADER
        } else {
            HEADER
        }
    }

    fn add(&mut self, payload: &[u8]) -> usize {
        let mut rest = payload;
        let mut first = true;
        let mut start = None;
        loop {
            let left = BLOCK - self.bytes.len() % BLOCK;
            if left < self.header() {
                let at = self.bytes.len();
                self.padding.push(at..at + left);
                self.bytes.resize(at + left, 0);
                continue;
            }
            start.get_or_insert(self.bytes.len());
            let n = rest.len().min(left - self.header());
            let last = n == rest.len();
            let ty = match (first, last) {
                (true, true) => 1,
                (true, false) => 2,
                (false, false) => 3,
                (false, true) => 4,
            } + if self.recyclable { 4 } else { 0 };
            let mut covered = vec![ty];
            if self.recyclable {
                covered.extend_from_slice(&self.log.to_le_bytes());
            }
            covered.extend_from_slice(&rest[..n]);
            self.bytes
                .extend_from_slice(&mask(crc32c(&covered)).to_le_bytes());
            self.bytes
                .extend_from_slice(&u16::try_from(n).expect("fragment").to_le_bytes());
            self.bytes.extend_from_slice(&covered);
            rest = &rest[n..];
            first = false;
            if last {
                return start.expect("started");
            }
        }
    }
}

fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

/// A file of `sizes` records, the records' offsets, and where it is padding.
fn padded_file(
    log: u32,
    recyclable: bool,
    sizes: &[usize],
) -> (Vec<u8>, Vec<usize>, Vec<std::ops::Range<usize>>) {
    let mut w = Writer::new(log, recyclable);
    let offsets = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| w.add(&payload(i, n)))
        .collect();
    (w.bytes, offsets, w.padding)
}

/// A file of `sizes` records, and the records' offsets.
fn file(log: u32, recyclable: bool, sizes: &[usize]) -> (Vec<u8>, Vec<usize>) {
    let (bytes, offsets, _) = padded_file(log, recyclable, sizes);
    (bytes, offsets)
}

#[test]
fn crc32c_is_castagnoli_and_unmask_inverts_rocksdbs_mask() {
    assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    assert_eq!(crc32c(b""), 0);
    // The slicing path and the bytewise tail agree at every split.
    let data = payload(3, 100);
    for cut in 0..data.len() {
        let bytewise = data[..cut].iter().fold(!0u32, |crc, &b| {
            CRC_TABLES[0][((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8)
        });
        assert_eq!(crc32c(&data[..cut]), !bytewise, "at {cut}");
    }
    for x in [0, 1, 0xdead_beef, u32::MAX] {
        assert_eq!(unmask(mask(x)), x);
    }
}

#[test]
fn whole_files_pass_in_both_formats() {
    for recyclable in [true, false] {
        // Small records, and records cut into fragments across blocks.
        let (bytes, _) = file(9, recyclable, &[10, 3000, 40_000, 5, 100_000, 32_757, 1]);
        assert_eq!(damage(&bytes, 9, true), None, "recyclable {recyclable}");
    }
}

#[test]
fn a_torn_last_record_passes() {
    let (bytes, offsets) = file(9, true, &[500, 700, 90_000]);
    let last = offsets[2];
    for cut in [
        last + 1,
        last + 11,
        last + 5000,
        last + 40_000,
        bytes.len() - 1,
    ] {
        assert_eq!(damage(&bytes[..cut], 9, true), None, "cut at {cut}");
    }
}

/// A reused file: this life's records over the longer older life's, which read as its end;
/// where this life padded its blocks.
fn reused_padded(current: &[usize]) -> (Vec<u8>, Vec<usize>, Vec<std::ops::Range<usize>>) {
    let (now, offsets, padding) = padded_file(12, true, current);
    let older = vec![700; (now.len() + 2 * BLOCK) / 700];
    let (mut bytes, _) = file(4, true, &older);
    bytes[..now.len()].copy_from_slice(&now);
    (bytes, offsets, padding)
}

fn reused(current: &[usize]) -> (Vec<u8>, Vec<usize>) {
    let (bytes, offsets, _) = reused_padded(current);
    (bytes, offsets)
}

#[test]
fn a_reused_files_older_life_reads_as_its_end() {
    for current in [&[][..], &[1][..], &[300, 50_000, 20][..], &[32_757][..]] {
        let (bytes, _) = reused(current);
        assert_eq!(damage(&bytes, 12, true), None, "{current:?}");
    }
}

#[test]
fn damage_with_a_complete_record_after_it_is_named() {
    let (bytes, offsets) = reused(&[400, 900, 70_000, 300, 20]);
    // A flipped payload byte, header byte, length byte, and a fragment of the long record.
    for (at, record) in [
        (offsets[0] + 20, 0),
        (offsets[1], 1),
        (offsets[1] + 4, 1),
        (offsets[2] + BLOCK, 2),
        (offsets[3] + 11, 3),
    ] {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        let found = damage(&damaged, 12, true);
        let (end, next) = found.unwrap_or_else(|| panic!("flip at {at} not found"));
        assert!(end <= at, "flip at {at}: damage named at {end}");
        assert!(
            next > at && offsets[record + 1..].contains(&next),
            "flip at {at}: complete record named at {next}, offsets {offsets:?}"
        );
    }
}

#[test]
fn damage_in_the_last_record_of_a_reused_file_looks_torn_and_passes() {
    let (bytes, offsets) = reused(&[400, 900, 300]);
    let mut damaged = bytes.clone();
    damaged[offsets[2] + 50] ^= 1;
    assert_eq!(damage(&damaged, 12, true), None);
}

#[test]
fn legacy_files_are_audited_only_when_asked() {
    let (mut bytes, offsets) = file(5, false, &[400, 900, 300]);
    bytes[offsets[0] + 30] ^= 4;
    assert_eq!(damage(&bytes, 5, false), None);
    assert!(damage(&bytes, 5, true).is_some());
}

#[test]
fn zeroed_space_after_the_records_passes() {
    let (mut bytes, _) = file(5, true, &[400, 900]);
    bytes.resize(3 * BLOCK + 100, 0);
    assert_eq!(damage(&bytes, 5, true), None);
}

#[test]
fn the_audit_names_the_file_and_offsets_and_skips_other_files() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (mut bytes, offsets) = file(7, true, &[400, 900, 300]);
    std::fs::write(tmp.path().join("000007.log"), &bytes).expect("write");
    std::fs::write(tmp.path().join("LOG"), b"not a wal").expect("write");
    std::fs::write(tmp.path().join("000008.sst"), b"\x01\x02").expect("write");
    audit(tmp.path(), true).expect("a whole WAL passes");
    bytes[offsets[1] + 15] ^= 2;
    std::fs::write(tmp.path().join("000007.log"), &bytes).expect("write");
    let err = audit(tmp.path(), false).expect_err("damage before a complete record");
    let text = err.to_string();
    assert!(text.contains("000007.log"), "{text}");
    assert!(
        text.contains(&format!("byte {}", offsets[1])),
        "{text} (record 1 at {})",
        offsets[1]
    );
    assert!(text.contains(&format!("byte {}", offsets[2])), "{text}");
    assert!(text.contains("corrupt"), "{text}");
    audit(&tmp.path().join("missing"), true).expect("no directory, no WAL");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any single flipped bit of a record before the last record is found in a reused file, and
    /// an undamaged file of any shape passes.
    #[test]
    fn a_flip_before_the_last_record_is_always_found(
        sizes in proptest::collection::vec(0usize..40_000, 2..12),
        pick in any::<proptest::sample::Index>(),
        bit in 0u8..8,
    ) {
        let (bytes, offsets, padding) = reused_padded(&sizes);
        prop_assert_eq!(damage(&bytes, 12, true), None);
        let last = *offsets.last().expect("records");
        let at = pick.index(last);
        // A block's zero tail is no record's byte: RocksDB skips it.
        prop_assume!(!padding.iter().any(|p| p.contains(&at)));
        let mut damaged = bytes.clone();
        damaged[at] ^= 1 << bit;
        let found = damage(&damaged, 12, true);
        prop_assert!(found.is_some(), "flip at {} of {:?} ({:?}) not found", at, offsets, sizes);
    }
}
