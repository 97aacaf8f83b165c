//! Per-session metadata (`sessions` CF, `S ‖ id`), bincode-encoded behind a crc32, and the
//! counters every appended batch moves (`events` CF, `keys::COUNTERS`), kept apart from it.
//!
//! Invariant: a session is visible iff its metadata exists; the metadata (its `S` record, or
//! its counters record) is written in the same WriteBatch as the lines it counts, so a reader
//! never sees a partial session.
//!
//! Invariant: where a session's counters record exists, it holds the counters of the session's
//! last commit, and they override its `S` record's. Every write of an `S` record writes the
//! counters record too (`SessionBatch::put_meta`), so it can never hold older counters than
//! the record; an append writes the counters record alone (and, when it moves the activity,
//! the session's `A` key). An append thus rewrites a few dozen bytes under the session's own
//! key range (whose memtable insert starts from the session's previous key) instead of the
//! whole record under a key of the `sessions` column family, where a memtable insert searches
//! from the top (docs/PERFORMANCE.md, "Counters record").

use serde::{Deserialize, Serialize};
use sessionlog_codec::rules::scanner::BodyVerdict;

use crate::error::{Error, Result};

/// The format version of [`SessionMeta`] records; a reader refuses versions it does not know.
/// Version 6 records may be overridden by a counters record; version 5 ones predate those
/// records (no store holding them has one), read the same, and are rewritten as version 6 by
/// their session's next append ([`SessionMeta::legacy_record`]).
const META_VERSION: u8 = 6;

/// The format version of the record of an archived session: a version 6 record's fields
/// followed by its [`ArchivedCopy`]. Only archived sessions are written at this version, so a
/// binary from before archives refuses them (rather than read their emptied ranges) and reads
/// every other session as before.
const ARCHIVED_META_VERSION: u8 = 7;

/// The version of the records written before counters records (see [`META_VERSION`]).
const LEGACY_META_VERSION: u8 = 5;

/// The format version of [`SessionCounters`] records.
const COUNTERS_VERSION: u8 = 2;

/// DSH's strict-reader verdict on a stored log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// DSH loads it as is.
    Clean,
    /// DSH loads the committed prefix and would cut the tail.
    Torn,
    /// DSH refuses it as corrupt; DSH's text without the `corrupt session log: ` prefix.
    Corrupt(String),
    /// DSH refuses to interpret it (foreign version, unknown or legacy event types).
    Unsupported(String),
}

impl Verdict {
    /// Whether logical queries may serve this session (DSH would load its committed prefix).
    pub fn is_loadable(&self) -> bool {
        matches!(self, Verdict::Clean | Verdict::Torn)
    }
}

impl From<BodyVerdict> for Verdict {
    fn from(v: BodyVerdict) -> Self {
        match v {
            BodyVerdict::Clean => Verdict::Clean,
            BodyVerdict::Torn => Verdict::Torn,
            BodyVerdict::Corrupt(m) => Verdict::Corrupt(m),
            BodyVerdict::Unsupported(m) => Verdict::Unsupported(m),
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Clean => f.write_str("clean"),
            Verdict::Torn => f.write_str("torn"),
            Verdict::Corrupt(m) => write!(f, "corrupt: {m}"),
            Verdict::Unsupported(m) => write!(f, "unsupported: {m}"),
        }
    }
}

/// How the session's bytes arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SourceEncoding {
    /// Plain `.jsonl`.
    Jsonl,
    /// `.jsonl.zstd`: frames kept verbatim.
    JsonlZstd,
}

/// Everything the store knows about one session besides its lines.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// Compact session number used in `events` keys.
    pub number: u64,
    /// Session id (WTF-8 bytes of the header's `id`). This and the other byte fields are
    /// encoded as serde bytes (one length, one copy; serde's default writes a byte at a time, in
    /// a record rewritten with every appended batch): bincode's bytes are the same either way,
    /// so records written before read back unchanged (pinned by the test below).
    #[serde(with = "serde_bytes")]
    pub id: Vec<u8>,
    /// The exact header record, including its `\n`.
    #[serde(with = "serde_bytes")]
    pub header: Vec<u8>,
    /// Header `createdAt`, when it is a safe integer.
    pub created_at: Option<i64>,
    /// Header `cwd`, when it is a string.
    pub cwd: Option<String>,
    /// DSH's verdict.
    pub verdict: Verdict,
    /// Logical events in the committed region (= the next seq).
    pub events: u64,
    /// Committed body lines (stored in BLOCK values).
    pub committed_lines: u64,
    /// All newline-terminated body lines, committed or not.
    pub body_lines: u64,
    /// End offset of the committed region in the file.
    pub committed_bytes: u64,
    /// Bytes after the committed region (stored as TAIL chunks).
    pub tail_bytes: u64,
    /// Number of TAIL chunks.
    pub tail_chunks: u64,
    /// Total file size (of the file as imported, in its source encoding).
    pub total_bytes: u64,
    /// Size of the plaintext `.jsonl` rendering: header plus committed lines.
    pub plaintext_bytes: u64,
    /// Verbatim zstd frames stored (0 for `.jsonl` imports).
    pub frames: u64,
    /// Batch number of lines recovered from a torn zstd frame: logical, but not part of any
    /// complete frame (DSH's `readRaw` omits them; repair cuts and re-writes them).
    pub torn_batch: Option<u64>,
    /// The batch number the next append takes (the header is batch 0).
    pub next_batch: u64,
    /// The first event DSH's surface fold refuses (seq, DSH's message): surface queries at or
    /// past it fail, and the session takes no appends.
    pub surface_error: Option<(u64, String)>,
    /// Surface ops indexed since the last surface snapshot (the snapshot policy's counter).
    pub surface_since_snapshot: u64,
    /// How the bytes arrived.
    pub source: SourceEncoding,
    /// Import time, epoch ms.
    pub imported_at_ms: i64,
    /// Time of the last `user/message` a human wrote (`source.kind == "user"`): the listing's
    /// activity order. Titles, end-seeds, repairs and compactions never move it.
    pub activity_ms: Option<i64>,
    /// When the session was deleted (hidden from listings, still exportable, restorable).
    pub deleted_at_ms: Option<i64>,
    /// For a fork: the parent whose first `seed` events this session shares (read from the
    /// parent's storage, never copied).
    pub fork_of: Option<ForkBase>,
    /// The format version of the served generation (the header's `version`; 0 when the header
    /// names none this store reads).
    pub version: u32,
    /// V2+: the inherited cut (seq of the last `{inherited:true}` end-seed), if any.
    pub inherited_cut: Option<u64>,
    /// Lower generations of the session, frozen: byte logs kept exactly and never changed.
    pub frozen: Vec<FrozenGeneration>,
    /// Where the session's bytes are when it is archived: its own ranges then hold nothing but
    /// its counters record (see `ops/archive.rs`). Stored after the other fields (version 7).
    #[serde(skip)]
    pub archived: Option<ArchivedCopy>,
    /// Read from a version 5 `S` record, which a binary from before counters records reads
    /// without them: the session's next append rewrites it as version 6, so that such a binary
    /// refuses the session rather than read its stale counters. Not stored.
    #[serde(skip)]
    pub(crate) legacy_record: bool,
}

/// A header's `seedLength`: the events a fork inherited, from which its inbox reads splices
/// (0 when absent or not a count).
pub(crate) fn seed_length(header: &sessionlog_codec::format::header::Header) -> u64 {
    header
        .object
        .get("seedLength")
        .and_then(sessionlog_codec::json::Value::as_safe_u64)
        .unwrap_or(0)
}

/// The listing's activity rule ([`SessionMeta::activity_ms`]): the time of a `user/message` a
/// human wrote (`source.kind == "user"`); titles, end-seeds, repairs and compaction copies never
/// count.
pub(crate) fn human_prompt_time(event: &sessionlog_codec::json::Value) -> Option<i64> {
    use sessionlog_codec::json::Value;
    let o = event.as_object()?;
    // The type first: most events are not prompts, and it is the envelope's first member.
    if o.get("type")?.as_str()? != "user/message" {
        return None;
    }
    let d = o.get("data")?.as_object()?;
    let human = d.get("source")?.as_object()?.get("kind")?.as_str()? == "user";
    if human {
        o.get("time").and_then(Value::as_safe_integer)
    } else {
        None
    }
}

/// Wall-clock epoch milliseconds (import, deletion and authoring times).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A lower generation file kept beside the served one (`GENERATION` keys, in chunks).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenGeneration {
    /// Its format version (the N of its file name).
    pub version: u32,
    /// Whether it is a `.jsonl.zstd` file.
    pub zstd: bool,
    /// Its size.
    pub bytes: u64,
    /// Chunks stored.
    pub chunks: u64,
}

impl FrozenGeneration {
    /// Its canonical file name.
    pub fn file_name(&self) -> String {
        sessionlog_codec::format::generation::generation_file_name(self.version, self.zstd)
    }
}

/// Where an archived session's bytes went: one object per generation file, under an archive
/// root laid out as a DSH session root, each with the size and SHA-256 that were read back from
/// object storage before the store let go of the bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedCopy {
    /// The archive root the keys are under, `s3://BUCKET[/PREFIX]`.
    pub root: String,
    /// When the session was archived, epoch ms.
    pub archived_at_ms: i64,
    /// Its generation files, lowest version first; the last is the served one.
    pub files: Vec<ArchivedFile>,
}

impl ArchivedCopy {
    /// The served generation's file (the last one).
    pub fn served(&self) -> Option<&ArchivedFile> {
        self.files.last()
    }

    /// Where the served generation's object is, `root/key`, for messages and listings.
    pub fn location(&self) -> String {
        match self.served() {
            Some(file) => format!("{}/{}", self.root.trim_end_matches('/'), file.key),
            None => self.root.clone(),
        }
    }
}

/// One generation file of an archived session, as an object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedFile {
    /// Its key below the archive root: `--<project>--/<session dir>/session[.vN].jsonl[.zstd]`.
    pub key: String,
    /// The generation's format version (the N of its name).
    pub version: u32,
    /// Whether it is a `.jsonl.zstd` file.
    pub zstd: bool,
    /// Its size.
    pub bytes: u64,
    /// The SHA-256 of its bytes.
    pub sha256: [u8; 32],
}

/// Where a fork's inherited prefix lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkBase {
    /// The parent's session number.
    pub number: u64,
    /// The parent's id.
    #[serde(with = "serde_bytes")]
    pub id: Vec<u8>,
    /// Events inherited (the header's `seedLength`): seqs `0..seed`.
    pub seed: u64,
}

impl SessionMeta {
    /// The metadata of a session with no body yet: header fields for listing, no events, no
    /// lines, verdict clean, batch 1 next. Writers set what their body adds.
    pub(crate) fn new(
        number: u64,
        header: &sessionlog_codec::format::header::Header,
        header_record: Vec<u8>,
        source: SourceEncoding,
    ) -> Self {
        use sessionlog_codec::json::Value;
        let o = &header.object;
        let len = header_record.len() as u64;
        SessionMeta {
            number,
            id: header.id.as_wtf8().to_vec(),
            header: header_record,
            created_at: o.get("createdAt").and_then(Value::as_safe_integer),
            cwd: o.get("cwd").and_then(Value::as_str).map(str::to_owned),
            verdict: Verdict::Clean,
            events: 0,
            committed_lines: 0,
            body_lines: 0,
            committed_bytes: len,
            tail_bytes: 0,
            tail_chunks: 0,
            total_bytes: len,
            plaintext_bytes: len,
            frames: 0,
            torn_batch: None,
            next_batch: 1,
            surface_error: None,
            surface_since_snapshot: 0,
            source,
            imported_at_ms: now_ms(),
            activity_ms: None,
            deleted_at_ms: None,
            fork_of: None,
            version: header.version.unwrap_or(0),
            inherited_cut: None,
            frozen: Vec::new(),
            archived: None,
            legacy_record: false,
        }
    }

    /// The file name of the served generation in `encoding`.
    pub fn file_name(&self, encoding: SourceEncoding) -> String {
        sessionlog_codec::format::generation::generation_file_name(
            self.version,
            encoding == SourceEncoding::JsonlZstd,
        )
    }

    /// The surface rules of the served generation, or a refusal of `what`: V0 and V4 have
    /// theirs; V1–V3 have none of their own (DSH 0.2 reads them through migration: see
    /// `read/migrated_view.rs`, and writes migrate them first).
    pub(crate) fn require_surface_model(
        &self,
        what: &str,
    ) -> Result<sessionlog_codec::rules::surface::SurfaceModel> {
        sessionlog_codec::rules::surface::SurfaceModel::for_version(self.version)
            .ok_or_else(|| self.not_served(what))
    }

    /// This metadata, if the session's bytes are in the store; an archived session's are not,
    /// and reading its emptied ranges would answer wrongly, so it is refused naming where they
    /// are.
    pub(crate) fn held(self) -> Result<Self> {
        match &self.archived {
            None => Ok(self),
            Some(copy) => Err(Error::Archived {
                id: self.id_lossy(),
                location: copy.location(),
            }),
        }
    }

    /// Refuse a write that adds events to a deleted session (append, repair, resume): it must
    /// be undeleted first. Purge removes only deleted sessions, so this rule and the session
    /// lock that purge takes keep a purged session from coming back half-written.
    pub(crate) fn require_undeleted(&self) -> Result<()> {
        match self.deleted_at_ms {
            None => Ok(()),
            Some(_) => Err(Error::NotAppendable {
                id: self.id_lossy(),
                reason: "it is deleted; undelete it first (sessionlog undelete)".into(),
            }),
        }
    }

    fn not_served(&self, what: &str) -> Error {
        Error::FormatNotServed {
            id: self.id_lossy(),
            version: self.version,
            what: what.into(),
        }
    }

    /// The stored header line, parsed; one that no longer parses is corrupt stored data.
    pub(crate) fn parsed_header(&self) -> Result<sessionlog_codec::format::header::Header> {
        let line = self.header.strip_suffix(b"\n").unwrap_or(&self.header);
        sessionlog_codec::format::header::parse_header(line).map_err(|e| Error::Corrupt {
            id: self.id_lossy(),
            detail: format!("stored header: {e}"),
        })
    }

    /// The stored header's `seedLength` (see [`seed_length`]).
    pub(crate) fn seed_length(&self) -> Result<u64> {
        Ok(seed_length(&self.parsed_header()?))
    }

    /// A [`Error::Corrupt`] of this session.
    pub(crate) fn corrupt(&self, detail: String) -> Error {
        Error::Corrupt {
            id: self.id_lossy(),
            detail,
        }
    }

    /// The surface model whose folds the session's projection units apply (V0 for a session
    /// without one, whose state queries are refused before any fold).
    pub(crate) fn fold_model(&self) -> sessionlog_codec::rules::surface::SurfaceModel {
        sessionlog_codec::rules::surface::SurfaceModel::for_version(self.version)
            .unwrap_or_default()
    }

    /// The id for messages (lossy for lone surrogates).
    pub fn id_lossy(&self) -> String {
        String::from_utf8_lossy(&self.id).into_owned()
    }

    /// Encode: `[version][crc32 BE of the bincode][bincode]`; an archived session's bincode is
    /// its fields followed by its [`ArchivedCopy`] (version 7).
    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        match &self.archived {
            None => encode_record(META_VERSION, self),
            Some(copy) => encode_record(ARCHIVED_META_VERSION, &(self, copy)),
        }
        .map_err(|e| self.corrupt(format!("session metadata {e}")))
    }

    /// Decode and verify a record stored under `S ‖ id`.
    pub(crate) fn decode(id: &[u8], bytes: &[u8]) -> Result<Self> {
        let decoded = if bytes.first() == Some(&ARCHIVED_META_VERSION) {
            decode_record(&[ARCHIVED_META_VERSION], bytes).map(|(mut meta, copy): (Self, _)| {
                meta.archived = Some(copy);
                meta
            })
        } else {
            decode_record(&[LEGACY_META_VERSION, META_VERSION], bytes)
        };
        let mut meta: Self = decoded.map_err(|e| Error::Corrupt {
            id: String::from_utf8_lossy(id).into_owned(),
            detail: format!("session metadata {e}"),
        })?;
        meta.legacy_record = bytes.first() == Some(&LEGACY_META_VERSION);
        Ok(meta)
    }

    /// The session's plaintext bytes per event so far (its header's, before any event): what
    /// an append sizes its buffers by.
    pub(crate) fn bytes_per_event(&self) -> u64 {
        self.plaintext_bytes / self.events.max(1)
    }

    /// The counters an appended batch moves.
    pub(crate) fn counters(&self) -> SessionCounters {
        SessionCounters {
            events: self.events,
            committed_lines: self.committed_lines,
            body_lines: self.body_lines,
            committed_bytes: self.committed_bytes,
            total_bytes: self.total_bytes,
            plaintext_bytes: self.plaintext_bytes,
            frames: self.frames,
            next_batch: self.next_batch,
            surface_since_snapshot: self.surface_since_snapshot,
            activity_ms: self.activity_ms,
        }
    }

    /// Take `counters` over (a counters record newer than the `S` record this was read from).
    pub(crate) fn apply_counters(&mut self, counters: SessionCounters) {
        let SessionCounters {
            events,
            committed_lines,
            body_lines,
            committed_bytes,
            total_bytes,
            plaintext_bytes,
            frames,
            next_batch,
            surface_since_snapshot,
            activity_ms,
        } = counters;
        self.events = events;
        self.committed_lines = committed_lines;
        self.body_lines = body_lines;
        self.committed_bytes = committed_bytes;
        self.total_bytes = total_bytes;
        self.plaintext_bytes = plaintext_bytes;
        self.frames = frames;
        self.next_batch = next_batch;
        self.surface_since_snapshot = surface_since_snapshot;
        self.activity_ms = activity_ms;
    }
}

/// The fields of [`SessionMeta`] appended batches move (the counts, and the activity a human
/// prompt moves), stored under the session's `keys::COUNTERS` key (see the module's invariant).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SessionCounters {
    events: u64,
    committed_lines: u64,
    body_lines: u64,
    committed_bytes: u64,
    total_bytes: u64,
    plaintext_bytes: u64,
    frames: u64,
    next_batch: u64,
    surface_since_snapshot: u64,
    activity_ms: Option<i64>,
}

impl SessionCounters {
    /// Encode as [`SessionMeta::encode`] does, under its own version.
    pub(crate) fn encode(&self) -> std::result::Result<Vec<u8>, String> {
        encode_record(COUNTERS_VERSION, self)
    }

    /// Decode and verify a counters record; the error names what is wrong.
    pub(crate) fn decode(bytes: &[u8]) -> std::result::Result<Self, String> {
        decode_record(&[COUNTERS_VERSION], bytes)
    }
}

/// Bytes an encoded record is first given: the largest counters record (encoded with every
/// appended batch) fits, so it is encoded without regrowing; a metadata record grows as needed.
const RECORD_CAPACITY: usize = 96;

/// `[version][crc32 BE of the bincode][bincode]` of `value`, encoded in place (a counters
/// record is encoded with every appended batch).
fn encode_record<T: Serialize>(version: u8, value: &T) -> std::result::Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(RECORD_CAPACITY);
    out.extend_from_slice(&[version, 0, 0, 0, 0]);
    bincode::serde::encode_into_std_write(value, &mut out, bincode::config::standard())
        .map_err(|e| format!("does not encode: {e}"))?;
    let crc = crc32fast::hash(&out[5..]);
    out[1..5].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// The value [`encode_record`] wrote in `bytes`, if its version is one of `versions`, its crc32
/// matches and it decodes whole; else what is wrong.
fn decode_record<T: serde::de::DeserializeOwned>(
    versions: &[u8],
    bytes: &[u8],
) -> std::result::Result<T, String> {
    let Some(([version, crc @ ..], body)) = bytes.split_first_chunk::<5>() else {
        return Err(format!("is {} bytes, too short", bytes.len()));
    };
    if !versions.contains(version) {
        return Err(format!("version {version} is not one of {versions:?}"));
    }
    let stored = u32::from_be_bytes(*crc);
    let actual = crc32fast::hash(body);
    if stored != actual {
        return Err(format!(
            "crc32 mismatch (stored {stored:08x}, computed {actual:08x})"
        ));
    }
    let (value, read) = bincode::serde::decode_from_slice(body, bincode::config::standard())
        .map_err(|e| format!("does not decode: {e}"))?;
    if read != body.len() {
        return Err(format!("has {} bytes past its end", body.len() - read));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde::{Deserialize, Serialize};

    use super::{decode_record, SessionCounters, SessionMeta, COUNTERS_VERSION, RECORD_CAPACITY};

    fn meta() -> SessionMeta {
        let line = r#"{"type":"session","version":0,"id":"a","createdAt":1}"#;
        let header =
            sessionlog_codec::format::header::parse_header(line.as_bytes()).expect("header");
        let mut meta = SessionMeta::new(
            7,
            &header,
            format!("{line}\n").into_bytes(),
            super::SourceEncoding::Jsonl,
        );
        meta.events = 41;
        meta.next_batch = 9;
        meta.surface_since_snapshot = 3;
        meta
    }

    /// Records written at version 5, before counters records, read as they were.
    #[test]
    fn version_5_records_still_read() {
        let meta = meta();
        let mut bytes = meta.encode().expect("encode");
        assert_eq!(bytes[0], 6);
        assert!(
            !SessionMeta::decode(b"a", &bytes)
                .expect("decode")
                .legacy_record
        );
        bytes[0] = 5;
        let old = SessionMeta::decode(b"a", &bytes).expect("decode");
        assert!(old.legacy_record);
        assert_eq!(
            SessionMeta {
                legacy_record: false,
                ..old
            },
            meta
        );
        bytes[0] = 4;
        let err = SessionMeta::decode(b"a", &bytes).expect_err("version 4");
        assert!(
            err.to_string().contains("version 4 is not one of [5, 6]"),
            "{err}"
        );
    }

    /// An archived session's record is version 7 (its fields, then where its bytes went) and
    /// reads back whole; without an archive a record stays version 6, so a binary from before
    /// archives still reads every other session.
    #[test]
    fn an_archived_record_is_version_7_and_reads_back() {
        let mut meta = meta();
        assert_eq!(meta.encode().expect("encode")[0], 6);
        meta.archived = Some(super::ArchivedCopy {
            root: "s3://b/p".into(),
            archived_at_ms: 5,
            files: vec![super::ArchivedFile {
                key: "--w--/a/session.jsonl".into(),
                version: 0,
                zstd: false,
                bytes: 9,
                sha256: [3; 32],
            }],
        });
        let bytes = meta.encode().expect("encode");
        assert_eq!(bytes[0], 7);
        let read = SessionMeta::decode(b"a", &bytes).expect("decode");
        assert_eq!(read, meta);
        assert!(!read.legacy_record);
        assert_eq!(
            read.archived
                .as_ref()
                .map(super::ArchivedCopy::location)
                .as_deref(),
            Some("s3://b/p/--w--/a/session.jsonl")
        );
        let mut cut = bytes.clone();
        cut.truncate(bytes.len() - 3);
        assert!(SessionMeta::decode(b"a", &cut).is_err());
    }

    /// A counters record is encoded without regrowing whatever its values: the largest fits
    /// the room [`encode_record`] starts with.
    #[test]
    fn the_largest_counters_record_fits_its_first_allocation() {
        let largest = SessionCounters {
            events: u64::MAX,
            committed_lines: u64::MAX,
            body_lines: u64::MAX,
            committed_bytes: u64::MAX,
            total_bytes: u64::MAX,
            plaintext_bytes: u64::MAX,
            frames: u64::MAX,
            next_batch: u64::MAX,
            surface_since_snapshot: u64::MAX,
            activity_ms: Some(i64::MIN),
        };
        let bytes = largest.encode().expect("encode");
        assert_eq!(SessionCounters::decode(&bytes), Ok(largest));
        assert!(
            bytes.capacity() <= RECORD_CAPACITY,
            "{} bytes regrew past {RECORD_CAPACITY}",
            bytes.len()
        );
    }

    /// A counters record reads back as written, and every damage is named, never read.
    #[test]
    fn counters_round_trip_and_damage_is_named() {
        let mut meta = meta();
        let counters = meta.counters();
        let bytes = counters.encode().expect("encode");
        assert_eq!(SessionCounters::decode(&bytes), Ok(counters));
        let mut moved = meta.clone();
        moved.events = 0;
        moved.next_batch = 1;
        moved.apply_counters(counters);
        assert_eq!(moved, meta);
        meta.events += 1;
        assert_ne!(meta.counters(), counters);

        let mut flipped = bytes.clone();
        *flipped.last_mut().expect("bytes") ^= 0x40;
        let short = &bytes[..4];
        let mut versioned = bytes.clone();
        versioned[0] = COUNTERS_VERSION + 1;
        let mut longer = bytes.clone();
        longer.push(0);
        let crc = crc32fast::hash(&longer[5..]).to_be_bytes();
        longer[1..5].copy_from_slice(&crc);
        for (damaged, named) in [
            (&flipped[..], "crc32 mismatch"),
            (short, "4 bytes, too short"),
            (&versioned[..], "version 3 is not one of [2]"),
            (&longer[..], "1 bytes past its end"),
        ] {
            let err = SessionCounters::decode(damaged).expect_err(named);
            assert!(err.contains(named), "{err}");
        }
        assert!(decode_record::<SessionCounters>(&[COUNTERS_VERSION], &[]).is_err());
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Elementwise {
        before: u64,
        bytes: Vec<u8>,
        after: Option<String>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct AsBytes {
        before: u64,
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
        after: Option<String>,
    }

    fn encoded<T: Serialize>(v: &T) -> Vec<u8> {
        bincode::serde::encode_to_vec(v, bincode::config::standard()).expect("encodes")
    }

    fn decoded<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> T {
        let (v, read) =
            bincode::serde::decode_from_slice(bytes, bincode::config::standard()).expect("decodes");
        assert_eq!(read, bytes.len());
        v
    }

    proptest! {
        /// A byte field encodes as serde bytes to what serde's default wrote element by
        /// element, so each reads the other's records.
        #[test]
        fn bytes_encode_as_serde_s_default_does(
            before in any::<u64>(),
            bytes in proptest::collection::vec(any::<u8>(), 0..600),
            after in proptest::option::of(".{0,8}"),
        ) {
            let old = Elementwise { before, bytes: bytes.clone(), after: after.clone() };
            let new = AsBytes { before, bytes, after };
            let text = encoded(&old);
            prop_assert_eq!(&text, &encoded(&new));
            prop_assert_eq!(decoded::<AsBytes>(&text), new);
            prop_assert_eq!(decoded::<Elementwise>(&encoded(&old)), old);
        }
    }
}
