//! The change log: one record per session change, in commit order, for the store-wide feed
//! (`Store::subscribe_all`).
//!
//! `sessions` CF: `L ‖ position` (position: u64, big-endian) → [`Change`] behind a crc32
//! ([`checked_value`]): kind (u8) ‖ first (u64 BE) ‖ count (u64 BE) ‖ session id length (u32 BE)
//! ‖ session id ‖ other (UTF-8, the rest). Positions are handed out by the group commit's leader, one per
//! change, increasing in commit order; a failed write leaves its positions unused, so the log may
//! skip numbers but never reorders them. The oldest records are trimmed (the store's
//! `feed_retained_changes`), and `L` alone records where the log now starts.
//!
//! Invariant: a change's record is written in the same WriteBatch as the change itself, so the
//! log holds exactly the committed changes (a reader never sees one before it is durable, and a
//! restart loses none).

use crate::error::{Error, Result};
use crate::layout::values::{checked_bytes, checked_value};

/// Tag of `L ‖ position` keys.
pub(crate) const CHANGE_TAG: u8 = b'L';

/// `L` alone → the first position the log retains (u64 BE behind a crc32), written with the
/// range delete that trims the positions before it; absent until the first trim. It sorts
/// before every `L ‖ position` key, so a read of the log never meets it.
pub(crate) const RETAINED_START_KEY: [u8; 1] = [CHANGE_TAG];

/// `L ‖ position`.
pub(crate) fn change_key(position: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = CHANGE_TAG;
    k[1..].copy_from_slice(&position.to_be_bytes());
    k
}

/// The position of an `L ‖ position` key; `None` for any other key.
pub(crate) fn parse_change_key(k: &[u8]) -> Option<u64> {
    match k.split_first() {
        Some((&CHANGE_TAG, rest)) => Some(u64::from_be_bytes(rest.try_into().ok()?)),
        _ => None,
    }
}

/// What a change did to its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeKind {
    /// A live batch appended events `first..first + count`.
    Appended,
    /// The session was created with its first batch (events `first..first + count`).
    Created,
    /// The session was imported whole (events `0..count`).
    Imported,
    /// The session was created as a fork of `other` at seq `first` (its inherited events are
    /// `0..count`).
    Forked,
    /// The session was migrated to V4: its log is now the successor's events `0..count`.
    Migrated,
    /// The session's log was repaired or resumed: its torn tail cut, and the events recovered
    /// from it and DSH's closers appended (events `first..first + count`).
    Repaired,
    /// The session was marked deleted.
    Deleted,
    /// The session's deletion was undone.
    Undeleted,
    /// The session was purged: nothing of it is stored any more.
    Purged,
    /// The session's bytes moved to object storage (`other`: where).
    Archived,
    /// The session was brought back from object storage (events `0..count`).
    Restored,
}

impl ChangeKind {
    /// Whether the change's events (`first..first + count`) are part of the feed: a consumer
    /// of the feed sees them after the change.
    pub fn carries_events(self) -> bool {
        matches!(
            self,
            ChangeKind::Appended
                | ChangeKind::Created
                | ChangeKind::Imported
                | ChangeKind::Forked
                | ChangeKind::Migrated
                | ChangeKind::Repaired
                | ChangeKind::Restored
        )
    }
}

/// One session change as the change log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) kind: ChangeKind,
    /// The session's id.
    pub(crate) session: Vec<u8>,
    /// The first seq the change concerns (see [`ChangeKind`]).
    pub(crate) first: u64,
    /// How many events it concerns.
    pub(crate) count: u64,
    /// What else the kind names (a fork's parent id, an archive's location), else empty.
    pub(crate) other: String,
}

impl Change {
    /// A change of `kind` to session `session` concerning events `first..first + count`.
    pub(crate) fn new(kind: ChangeKind, session: &[u8], first: u64, count: u64) -> Change {
        Change {
            kind,
            session: session.to_vec(),
            first,
            count,
            other: String::new(),
        }
    }

    /// This change naming `other` (see [`Change::other`]).
    pub(crate) fn with_other(mut self, other: impl Into<String>) -> Change {
        self.other = other.into();
        self
    }

    /// The stored record.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(21 + self.session.len() + self.other.len());
        v.push(self.kind.byte());
        v.extend_from_slice(&self.first.to_be_bytes());
        v.extend_from_slice(&self.count.to_be_bytes());
        let len = u32::try_from(self.session.len()).unwrap_or(u32::MAX);
        v.extend_from_slice(&len.to_be_bytes());
        v.extend_from_slice(&self.session);
        v.extend_from_slice(self.other.as_bytes());
        checked_value(&v)
    }

    /// The change a record at `position` holds.
    pub(crate) fn decode(position: u64, value: &[u8]) -> Result<Change> {
        let corrupt = |what: &str| Error::Corrupt {
            id: String::new(),
            detail: format!("change log record {position} {what}"),
        };
        let bytes = checked_bytes(value).ok_or_else(|| corrupt("fails its checksum"))?;
        let short = || corrupt("is too short");
        let (&kind, rest) = bytes.split_first().ok_or_else(short)?;
        let kind = ChangeKind::of_byte(kind).ok_or_else(|| corrupt("has an unknown kind"))?;
        let (first, rest) = rest.split_first_chunk::<8>().ok_or_else(short)?;
        let (count, rest) = rest.split_first_chunk::<8>().ok_or_else(short)?;
        let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(short)?;
        let len = usize::try_from(u32::from_be_bytes(*len)).map_err(|_| short())?;
        let (session, other) = rest.split_at_checked(len).ok_or_else(short)?;
        Ok(Change {
            kind,
            session: session.to_vec(),
            first: u64::from_be_bytes(*first),
            count: u64::from_be_bytes(*count),
            other: String::from_utf8(other.to_vec()).map_err(|_| corrupt("is not UTF-8"))?,
        })
    }
}

/// The kinds in their stored order: a kind's byte is its index.
const KINDS: [ChangeKind; 11] = [
    ChangeKind::Appended,
    ChangeKind::Created,
    ChangeKind::Imported,
    ChangeKind::Forked,
    ChangeKind::Migrated,
    ChangeKind::Repaired,
    ChangeKind::Deleted,
    ChangeKind::Undeleted,
    ChangeKind::Purged,
    ChangeKind::Archived,
    ChangeKind::Restored,
];

impl ChangeKind {
    /// The kind's stored byte.
    fn byte(self) -> u8 {
        KINDS
            .iter()
            .position(|k| *k == self)
            .and_then(|i| u8::try_from(i).ok())
            .unwrap_or(u8::MAX)
    }

    /// The kind stored as `byte`.
    fn of_byte(byte: u8) -> Option<ChangeKind> {
        KINDS.get(usize::from(byte)).copied()
    }

    /// The kind's name in the feed's text (`sessionlog tail --all`).
    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::Appended => "appended",
            ChangeKind::Created => "created",
            ChangeKind::Imported => "imported",
            ChangeKind::Forked => "forked",
            ChangeKind::Migrated => "migrated",
            ChangeKind::Repaired => "repaired",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Undeleted => "undeleted",
            ChangeKind::Purged => "purged",
            ChangeKind::Archived => "archived",
            ChangeKind::Restored => "restored",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_round_trips_and_a_flipped_bit_is_refused() {
        let change = Change::new(ChangeKind::Forked, b"child", 3, 3).with_other("parent");
        let mut value = change.encode();
        assert_eq!(Change::decode(7, &value).expect("decode"), change);
        let last = value.len() - 1;
        value[last] ^= 1;
        let err = Change::decode(7, &value).expect_err("flipped");
        assert!(err.to_string().contains("change log record 7"), "{err}");
    }

    #[test]
    fn every_kind_round_trips_through_its_byte() {
        for kind in KINDS {
            assert_eq!(ChangeKind::of_byte(kind.byte()), Some(kind));
        }
        assert_eq!(ChangeKind::of_byte(11), None);
    }

    #[test]
    fn change_keys_sort_by_position_and_parse_back() {
        assert!(change_key(1) < change_key(256));
        assert_eq!(parse_change_key(&change_key(42)), Some(42));
        assert_eq!(parse_change_key(b"S42"), None);
    }
}
