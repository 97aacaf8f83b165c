//! Key layouts. All integers are big-endian so that a session is one contiguous, ordered range.
//!
//! `events` CF (prefix extractor: the first 8 bytes, the session number):
//!
//! | bytes | field                                              |
//! |-------|----------------------------------------------------|
//! | 0..8  | session number                                     |
//! | 8     | section: [`BLOCK`], [`FRAME`], [`TAIL`] or [`GENERATION`] |
//! | 9..17 | BLOCK: first seq of its first line; FRAME, TAIL: ordinal; GENERATION: version ‖ chunk (u32 ‖ u32) |
//!
//! BLOCK < FRAME < TAIL, so each export is one forward scan: a `.jsonl` session's file is its
//! BLOCKs then its TAIL; a `.jsonl.zstd` import's file is its FRAMEs then its TAIL.
//!
//! `sessions` CF: `S ‖ id` → session metadata; `N ‖ number` → id; `P ‖ number` → an import in
//! progress (its partial writes are removed at open); `A`, `R` → the listing indexes; `F` → fork
//! lineage; `C` → the next session number. Only `write::session_batch` writes them.
//!
//! `surface` CF (same prefix extractor): `number ‖ section ‖ seq`, sections [`OP`], [`SNAP`],
//! [`REPL`], [`PROJ`], and the 25-byte [`target_key`]s of section [`PROJN`].
//!
//! `checkpoints` CF (same prefix extractor): `number ‖ CHECKPOINT_POINTS ‖ seq`, every unit's
//! checkpoint after event `seq` in one record (see [`CHECKPOINT_POINTS`]); the closed-turn
//! records of section [`TURN_RECORDS`]; and, in stores written before point records, one
//! `number ‖ unit index ‖ seq` key per unit (see [`unit_section`]), still read.

/// Session metadata, id ↔ number maps, listing indexes, lineage, counters.
pub(crate) const CF_SESSIONS: &str = "sessions";
/// Stored lines, frames, tails and frozen generations.
pub(crate) const CF_EVENTS: &str = "events";
/// The surface index and message-projection records.
pub(crate) const CF_SURFACE: &str = "surface";
/// Projection-unit checkpoints and closed-turn records.
pub(crate) const CF_CHECKPOINTS: &str = "checkpoints";
/// Every column family, `sessions` first.
pub(crate) const ALL_CFS: [&str; 4] = [CF_SESSIONS, CF_EVENTS, CF_SURFACE, CF_CHECKPOINTS];
/// The column families keyed by session number: a session's range in each is all it stores.
pub(crate) const SESSION_RANGE_CFS: [&str; 3] = [CF_EVENTS, CF_SURFACE, CF_CHECKPOINTS];

/// Length of the prefix every key of the [`SESSION_RANGE_CFS`] starts with: its session number,
/// big-endian ([`session_start`]).
pub(crate) const SESSION_PREFIX_LEN: usize = 8;

/// Section byte of blocks of committed lines (`codec::stored`).
pub const BLOCK: u8 = 0;
/// Section byte of verbatim zstd frames.
pub const FRAME: u8 = 1;
/// Section byte of tail chunks (bytes past the committed region, as in the file).
pub const TAIL: u8 = 2;

/// Section byte of frozen lower generations (their file bytes, in chunks); after TAIL, so the
/// served generation's scans stop before them.
pub const GENERATION: u8 = 3;

/// Section byte of the session's counters record (one key, `n` = 0: `layout::meta`'s
/// `SessionCounters`); last, so every other section's scan stops before it.
pub const COUNTERS: u8 = 4;

/// The `n` of a GENERATION key: chunk `chunk` of generation `version`.
pub fn generation_n(version: u32, chunk: u32) -> u64 {
    (u64::from(version) << 32) | u64::from(chunk)
}

/// Length of an `events` key.
pub const EVENT_KEY_LEN: usize = 17;

/// The `events` key of `(session, section, n)`.
pub fn event_key(session: u64, section: u8, n: u64) -> [u8; EVENT_KEY_LEN] {
    let mut k = [0u8; EVENT_KEY_LEN];
    k[..8].copy_from_slice(&session.to_be_bytes());
    k[8] = section;
    k[9..].copy_from_slice(&n.to_be_bytes());
    k
}

/// Split an `events` key into `(session, section, n)`.
pub fn parse_event_key(k: &[u8]) -> Option<(u64, u8, u64)> {
    if k.len() != EVENT_KEY_LEN {
        return None;
    }
    let session = u64::from_be_bytes(k[..8].try_into().ok()?);
    let n = u64::from_be_bytes(k[9..].try_into().ok()?);
    Some((session, k[8], n))
}

/// First key of a session's range.
pub fn session_start(session: u64) -> Vec<u8> {
    session.to_be_bytes().to_vec()
}

/// Exclusive end of a session's range.
pub fn session_end(session: u64) -> Vec<u8> {
    session.saturating_add(1).to_be_bytes().to_vec()
}

/// Tag of `S ‖ id` keys (session metadata).
pub(crate) const META_TAG: u8 = b'S';
/// Tag of `P ‖ number` keys (imports in progress).
pub(crate) const PENDING_TAG: u8 = b'P';
/// Tag of `A` keys (the activity index).
pub(crate) const ACTIVITY_TAG: u8 = b'A';
/// Tag of `R` keys (the creation index).
pub(crate) const CREATED_TAG: u8 = b'R';

/// `S ‖ id`.
pub fn meta_key(id: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + id.len());
    k.push(META_TAG);
    k.extend_from_slice(id);
    k
}

/// Tag of the number → id map.
const NUMBER_TAG: u8 = b'N';

/// `N ‖ number`.
pub fn number_key(session: u64) -> Vec<u8> {
    let mut k = vec![NUMBER_TAG];
    k.extend_from_slice(&session.to_be_bytes());
    k
}

/// The number of an `N ‖ number` key; `None` for any other key.
pub fn parse_number_key(k: &[u8]) -> Option<u64> {
    let (&NUMBER_TAG, number) = k.split_first()? else {
        return None;
    };
    <[u8; 8]>::try_from(number).ok().map(u64::from_be_bytes)
}

/// `P ‖ number`.
pub fn pending_key(session: u64) -> Vec<u8> {
    let mut k = vec![PENDING_TAG];
    k.extend_from_slice(&session.to_be_bytes());
    k
}

/// The number of a `P ‖ number` key; `None` for any other key.
pub fn parse_pending_key(k: &[u8]) -> Option<u64> {
    let (&PENDING_TAG, number) = k.split_first()? else {
        return None;
    };
    <[u8; 8]>::try_from(number).ok().map(u64::from_be_bytes)
}

/// `A ‖ !activity ‖ number`: the activity index, most recent first (no activity sorts last).
pub fn activity_key(activity_ms: Option<i64>, number: u64) -> Vec<u8> {
    order_key(ACTIVITY_TAG, activity_ms, number)
}

/// `R ‖ !created ‖ number`: the creation index, newest first.
pub fn created_key(created_ms: Option<i64>, number: u64) -> Vec<u8> {
    order_key(CREATED_TAG, created_ms, number)
}

fn order_key(tag: u8, time_ms: Option<i64>, number: u64) -> Vec<u8> {
    let t = u64::try_from(time_ms.unwrap_or(0).max(0)).unwrap_or(0);
    let mut k = Vec::with_capacity(17);
    k.push(tag);
    k.extend_from_slice(&(u64::MAX - t).to_be_bytes());
    k.extend_from_slice(&number.to_be_bytes());
    k
}

/// `F ‖ parent number ‖ child number`: a fork reads its parent's prefix (value: child id).
pub fn fork_key(parent: u64, child: u64) -> Vec<u8> {
    let mut k = vec![b'F'];
    k.extend_from_slice(&parent.to_be_bytes());
    k.extend_from_slice(&child.to_be_bytes());
    k
}

/// The next-session-number counter.
pub const COUNTER_KEY: &[u8] = b"C";

/// `F ‖ parent number`: the prefix of every fork key of `parent`.
pub fn fork_prefix(parent: u64) -> Vec<u8> {
    let mut k = fork_key(parent, 0);
    k.truncate(9);
    k
}

/// Surface section of per-event ops: the [`SurfaceChange`] of surface event `seq`.
///
/// [`SurfaceChange`]: sessionlog_codec::rules::surface::SurfaceChange
pub(crate) const OP: u8 = 0;
/// Surface section of snapshots: the fold after event `seq`.
pub(crate) const SNAP: u8 = 1;
/// Surface section of replacements: the [`Replacement`] made by event `seq`.
///
/// [`Replacement`]: sessionlog_codec::rules::surface::Replacement
pub(crate) const REPL: u8 = 2;
/// Surface section of message-projection events: what event `seq` made (JSON).
pub(crate) const PROJ: u8 = 3;
/// Surface section of projected messages (25-byte keys: number, section, target, seq).
pub(crate) const PROJN: u8 = 4;

/// `number ‖ PROJN ‖ target ‖ seq`: the message projection event `seq` made of node `target`.
pub(crate) fn target_key(number: u64, target: u64, seq: u64) -> [u8; 25] {
    let mut k = [0u8; 25];
    k[..8].copy_from_slice(&number.to_be_bytes());
    k[8] = PROJN;
    k[9..17].copy_from_slice(&target.to_be_bytes());
    k[17..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// `(target, seq)` of a PROJN key.
pub(crate) fn parse_target_key(k: &[u8]) -> Option<(u64, u64)> {
    if k.len() != 25 || k[8] != PROJN {
        return None;
    }
    let target = u64::from_be_bytes(k[9..17].try_into().ok()?);
    let seq = u64::from_be_bytes(k[17..].try_into().ok()?);
    Some((target, seq))
}

/// Checkpoint section of the point records: after a checkpoint point's event, every unit's
/// checkpoint in one value (`layout/values.rs`), so a point costs one key, not one per unit.
pub(crate) const CHECKPOINT_POINTS: u8 = 0xE0;

/// The legacy checkpoint section of projection unit `index` (one key per unit and point, as
/// stores written before [`CHECKPOINT_POINTS`] hold them; read, no longer written).
pub(crate) fn unit_section(index: usize) -> u8 {
    u8::try_from(index).unwrap_or(u8::MAX)
}

/// Checkpoint section of closed-turn records (apart from the unit indexes), keyed by the
/// `turn/end` seq.
pub(crate) const TURN_RECORDS: u8 = 0xF0;

/// The `turns` unit: its state keeps only open turns; each closed turn is a record of its own
/// in [`TURN_RECORDS`], so checkpoints do not grow with the log.
pub(crate) const TURNS: &str = "turns";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_session_then_section_then_seq() {
        let mut keys = [
            event_key(2, BLOCK, 0),
            event_key(1, TAIL, 0),
            event_key(1, BLOCK, 256),
            event_key(1, BLOCK, 3),
        ];
        keys.sort();
        let parsed: Vec<_> = keys.iter().filter_map(|k| parse_event_key(k)).collect();
        assert_eq!(
            parsed,
            [(1, BLOCK, 3), (1, BLOCK, 256), (1, TAIL, 0), (2, BLOCK, 0)]
        );
    }
}
