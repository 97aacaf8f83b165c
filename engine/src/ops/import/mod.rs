//! Importing DSH session logs (`.jsonl` and `.jsonl.zstd`): exact bytes kept, logical events
//! indexed, DSH's reader verdict recorded.
//!
//! Import of one file is atomic (see `write/session_writer.rs`): a failure midway leaves no
//! trace, and an id that already exists is refused before anything is written.

mod jsonl;
mod zstd;

use sessionlog_codec::format::event::event_type;
use sessionlog_codec::format::generation::NEWEST_VERSION;
use sessionlog_codec::format::header::{Header, HeaderCheck};
use sessionlog_codec::format::known_types::SupportCheck;
use sessionlog_codec::json::Value;
use sessionlog_codec::rules::message_shape::check_message_shape;
use sessionlog_codec::rules::scanner::{BodyScanner, BodyVerdict, LineOutcome};

use crate::error::{Error, Result};
use crate::layout::meta::{human_prompt_time, seed_length, SessionMeta, Verdict};
use crate::ops::generations::{check_served_version, stage_frozen, LowerGeneration, SessionDir};
use crate::store::{ProjectionCheckpoints, Store};
use crate::write::indexer::SurfaceBuilder;
use crate::write::session_batch::SessionBatch;
use crate::write::session_writer::SessionWriter;

/// How to import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Refuse (write nothing) unless DSH's strict reader would load the log cleanly.
    /// Default: false (store any session log byte-exactly, with its verdict).
    pub strict: bool,
    /// Commit without waiting for fsync; the caller makes the imports durable together with
    /// [`Store::sync`] before reporting them (bulk import: one fsync instead of one per file).
    /// Each session is still atomic. Default: false.
    pub defer_sync: bool,
    /// When the file was found in a DSH session root: where, so DSH's identity rule can be
    /// checked (the header's id and cwd must name this location). Default: none.
    pub location: Option<RootLocation>,
    /// When the file is the served generation of a session directory: that directory's
    /// generations. The served file's name must agree with its header's version; the lower
    /// generations are stored frozen with the session. Default: none (a lone file).
    pub generations: Option<SessionDir>,
}

/// Where a file sits in a DSH session root: `<root>/<project_dir>/<session_dir>/session.*`.
#[derive(Clone, Debug)]
pub struct RootLocation {
    /// The file's path, for messages.
    pub path: std::path::PathBuf,
    /// The project directory's name.
    pub project_dir: String,
    /// The session directory's name.
    pub session_dir: String,
}

/// What an import stored.
#[derive(Clone, Debug)]
pub struct ImportReport {
    /// Session id.
    pub id: String,
    /// DSH's verdict.
    pub verdict: Verdict,
    /// Logical events in the committed region.
    pub events: u64,
    /// Body lines (newline-terminated lines after the header).
    pub lines: u64,
    /// Bytes of the imported file.
    pub bytes: u64,
}

/// Where an import lands, beyond what [`ImportOptions`] says (engine-internal: a migration
/// publishing a session's V4 successor).
#[derive(Default)]
pub(crate) struct Landing {
    /// The lower generations, given as bytes; `None`: the files of `options.generations`.
    pub(crate) lower: Option<Vec<LowerGeneration>>,
    /// The stored session (same id) this import replaces, atomically with its final commit.
    pub(crate) replaces: Option<SessionMeta>,
}

/// The zstd magic number, little-endian on disk: how an input announces `.jsonl.zstd`.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

impl Store {
    /// Import one file, choosing the encoding from its first bytes (zstd magic or text).
    pub fn import_path(
        &self,
        path: &std::path::Path,
        options: &ImportOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        use std::io::Read;
        let name = path.display().to_string();
        let io = |source| Error::Io {
            path: path.into(),
            source,
        };
        let mut file = std::fs::File::open(path).map_err(io)?;
        let mut magic = [0u8; 4];
        let n = file.read(&mut magic).map_err(io)?;
        if n == 4 && magic == ZSTD_MAGIC {
            let mut bytes = magic.to_vec();
            file.read_to_end(&mut bytes).map_err(io)?;
            progress(bytes.len() as u64);
            return self.import_zstd(&name, &bytes, options);
        }
        let reader =
            std::io::BufReader::with_capacity(1 << 20, std::io::Read::chain(&magic[..n], file));
        self.import_jsonl(&name, reader, options, progress)
    }

    /// Claim `header`'s id, refuse duplicates, allocate a number and run `body`; on failure,
    /// remove whatever `body` wrote. The claim is released either way (also on a panic).
    pub(crate) fn import_session(
        &self,
        source_name: &str,
        header: &Header,
        options: &ImportOptions,
        landing: Landing,
        body: impl FnOnce(SessionWriter<'_>) -> Result<SessionMeta>,
    ) -> Result<ImportReport> {
        if let Some(location) = &options.location {
            check_location(location, header)?;
        }
        if let Some(dir) = &options.generations {
            check_served_version(&dir.served, header)?;
        }
        let _claim = match &landing.replaces {
            Some(replaced) => {
                let stored = self.meta(header.id.as_wtf8())?.map(|m| m.number);
                if stored != Some(replaced.number) {
                    return Err(Error::DuplicateSession {
                        source_name: source_name.into(),
                        id: header.id.to_string_lossy(),
                    });
                }
                None
            }
            None => Some(self.claim_new(source_name, header)?),
        };
        let number = self.allocate_number();
        let outcome = self
            .stage_lower_generations(number, header, options, landing)
            .and_then(body);
        if outcome.is_err() {
            self.discard(number)?;
        }
        outcome.map(|meta| ImportReport {
            id: meta.id_lossy(),
            verdict: meta.verdict,
            events: meta.events,
            lines: meta.body_lines,
            bytes: meta.total_bytes,
        })
    }

    /// A writer for session `number`, holding the session directory's lower generations.
    fn stage_lower_generations(
        &self,
        number: u64,
        header: &Header,
        options: &ImportOptions,
        landing: Landing,
    ) -> Result<SessionWriter<'_>> {
        let mut w = SessionWriter::new(self, number);
        let lower = match landing.lower {
            Some(lower) => lower,
            None => options
                .generations
                .iter()
                .flat_map(|d| &d.lower)
                .map(LowerGeneration::read)
                .collect::<Result<_>>()?,
        };
        for generation in &lower {
            let frozen = stage_frozen(&mut w, generation, header, self.options.tail_chunk_bytes)?;
            w.frozen.push(frozen);
        }
        w.replaces = landing.replaces;
        Ok(w)
    }

    /// Remove whatever a failed import of `number` wrote.
    fn discard(&self, number: u64) -> Result<()> {
        let mut batch = SessionBatch::new(self);
        batch.discard(number)?;
        batch.commit("discarding a failed import")
    }
}

/// Feeds body lines to DSH's scanner and stores the committed ones.
struct BodyIndexer {
    /// Whether the surface index applies (V0 and V4 have a surface model; see
    /// `SessionMeta::require_surface_model`).
    indexed: bool,
    /// Whether projection checkpoints apply (sessions with a surface model: V0 and V4).
    projected: bool,
    /// The time of the last human prompt committed (the listing's activity).
    activity: Option<i64>,
    /// V0 and V1 refuse event types outside V0's frozen inventory, even ignorable ones.
    closed_v0_vocabulary: bool,
    /// V2 logs: the V2→V3 refusals DSH 0.2 meets reading them.
    /// V1–V3 logs: DSH 0.2 reads them only through the migration chain and its V4 reader, whose
    /// refusal is the verdict (checked without the session's children, whom an import cannot
    /// know yet).
    migration: Option<sessionlog_codec::migrate::MigrationCheck>,
    scanner: BodyScanner,
    support: SupportCheck,
    source_name: String,
    id: sessionlog_codec::json::JsString,
    surface: SurfaceBuilder,
    checkpoints: ProjectionCheckpoints,
    /// V4 logs: DSH 0.2 restores a `Session` from their committed events.
    restores: bool,
    /// V4: DSH 0.2 restores a `Session` from the committed events, which refuses the first
    /// event whose message shape or surface transition it rejects (the append path's rules);
    /// DSH's text.
    restore: Option<String>,
}

impl BodyIndexer {
    fn new(source_name: &str, header: &Header, header_len: u64) -> Self {
        let version = header.version.unwrap_or(0);
        let model = sessionlog_codec::rules::surface::SurfaceModel::for_version(version);
        BodyIndexer {
            indexed: model.is_some(),
            projected: model.is_some(),
            activity: None,
            closed_v0_vocabulary: version <= 1,
            migration: (1..NEWEST_VERSION).contains(&version).then(|| {
                sessionlog_codec::migrate::MigrationCheck::new(version, &header.object, Vec::new())
            }),
            scanner: BodyScanner::for_header(header, header_len),
            support: SupportCheck::default(),
            surface: SurfaceBuilder::for_model(model.unwrap_or_default()),
            checkpoints: ProjectionCheckpoints::new(seed_length(header), model.unwrap_or_default()),
            source_name: source_name.into(),
            id: header.id.clone(),
            restores: version == NEWEST_VERSION,
            restore: None,
        }
    }

    /// Scan one complete line (without `\n`) ending at file offset `end`; store it if committed.
    fn line(
        &mut self,
        w: &mut SessionWriter<'_>,
        bytes: &[u8],
        end: u64,
        batch: u64,
    ) -> Result<bool> {
        let outcome = self
            .scanner
            .push_line(bytes, end)
            .map_err(|e| Error::Unstorable {
                source_name: self.source_name.clone(),
                id: self.id.to_string_lossy(),
                line: self.scanner.lines(),
                reason: e.to_string(),
            })?;
        let LineOutcome::Committed(events) = outcome else {
            return Ok(false);
        };
        let first_seq = self.scanner.events() - events.len() as u64;
        let number = w.number();
        let store = w.store();
        for (k, e) in events.iter().enumerate() {
            if self.closed_v0_vocabulary {
                self.support.observe(&self.id, e);
            }
            if let Some(check) = &mut self.migration {
                check.observe(e);
            }
            if let Some(t) = human_prompt_time(e) {
                self.activity = Some(t);
            }
            let seq = first_seq + k as u64;
            let v4 = self.restores;
            if v4 && self.restore.is_none() {
                let subject = format!("seed {} at index {seq}", event_type(e));
                self.restore = check_message_shape(e, &subject).err();
            }
            if self.indexed {
                let refused_before = self.surface.error.is_some();
                self.surface
                    .apply(store, number, seq, e, &mut |key, value| {
                        w.put_surface(&key, value)
                    })?;
                if v4 && !refused_before && self.restore.is_none() {
                    self.restore = self
                        .surface
                        .rule
                        .as_ref()
                        .map(|rule| format!("invalid seed event at index {seq}: {rule}"));
                }
            }
            if self.projected {
                self.checkpoints.apply(number, seq, e, &mut |key, value| {
                    w.put_checkpoint(key, value)
                })?;
            }
        }
        let members = u32::try_from(events.len()).unwrap_or(u32::MAX);
        w.put_line(first_seq, members, batch, bytes)?;
        Ok(true)
    }

    /// The time of the last human `user/message` committed (the listing's activity).
    fn activity(&self) -> Option<i64> {
        self.activity
    }

    /// The verdict, given the header's and any container-level (zstd) refusal.
    fn verdict(&mut self, header: &Header, container: Option<String>, body_len: u64) -> Verdict {
        match (&header.check, container) {
            (HeaderCheck::Unsupported(m), _) => Verdict::Unsupported(m.clone()),
            (HeaderCheck::Corrupt(m), _) => Verdict::Corrupt(m.clone()),
            (HeaderCheck::Valid, Some(m)) => Verdict::Corrupt(m),
            (HeaderCheck::Valid, None) => match self.scanner.finish(body_len) {
                BodyVerdict::Corrupt(m) => Verdict::Corrupt(m),
                BodyVerdict::Unsupported(m) => Verdict::Unsupported(m),
                body => match self
                    .support
                    .refusal()
                    .map(str::to_owned)
                    .or_else(|| self.migration.as_mut().and_then(|c| c.finish()))
                {
                    Some(m) => Verdict::Unsupported(m),
                    None => match self.restore.clone() {
                        Some(m) => Verdict::Corrupt(m),
                        None if body == BodyVerdict::Torn => Verdict::Torn,
                        None => Verdict::Clean,
                    },
                },
            },
        }
    }
}

/// DSH's identity rule for a file found in a session root: `logPath(root, header.cwd, header.id)`
/// must be where the file is.
fn check_location(location: &RootLocation, header: &Header) -> Result<()> {
    let shown = location.path.display();
    let cwd = match header.object.get("cwd") {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Err(Error::Identity(format!("corrupt session log \"{shown}\": header cwd is not a string, so it names no project directory")));
        }
    };
    let expected = sessionlog_codec::format::dsh_path::log_path_components(cwd, &header.id)
        .map_err(|_| {
            Error::Identity(format!(
                "corrupt session log \"{shown}\": header id cannot name a storage path"
            ))
        })?;
    if expected != (location.project_dir.clone(), location.session_dir.clone()) {
        return Err(Error::Identity(format!(
            "corrupt session log \"{shown}\": header id \"{}\" and cwd identify \"{}/{}\"",
            header.id, expected.0, expected.1
        )));
    }
    Ok(())
}

/// Refuse a non-clean verdict under `--strict`.
fn check_strict(
    options: &ImportOptions,
    source_name: &str,
    header: &Header,
    verdict: &Verdict,
) -> Result<()> {
    if options.strict && *verdict != Verdict::Clean {
        return Err(Error::StrictRejected {
            source_name: source_name.into(),
            id: header.id.to_string_lossy(),
            verdict: verdict.to_string(),
        });
    }
    Ok(())
}
