//! Importing DSH session logs (`.jsonl` and `.jsonl.zstd`): exact bytes kept, logical events
//! indexed, DSH's reader verdict recorded.
//!
//! Import of one file is atomic (see `write/session_writer.rs`): a failure midway leaves no
//! trace, and an id that already exists is refused before anything is written.

mod jsonl;
#[cfg(test)]
mod tests;
pub(crate) mod zstd;

use sessionlog_codec::format::header::Header;
use sessionlog_codec::json::Value;
use sessionlog_codec::log_reader::LogReader;
use sessionlog_codec::rules::scanner::LineOutcome;

use crate::error::{Error, Result};
use crate::layout::meta::{human_prompt_time, seed_length, SessionMeta, Verdict};
use crate::ops::generations::{check_served_version, stage_frozen, LowerGeneration, SessionDir};
use crate::ops::list::SessionSummary;
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
    /// What errors and reports call the input (a file fetched from object storage is named by
    /// its URL, not its temporary path). Default: none (its path).
    pub name: Option<String>,
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

/// What an import stored. Serializes as `{id, verdict, events, lines, bytes}`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ImportReport {
    /// Session id.
    pub id: String,
    /// DSH's verdict.
    #[serde(serialize_with = "crate::ops::render::as_text")]
    pub verdict: Verdict,
    /// Logical events in the committed region.
    pub events: u64,
    /// Body lines (newline-terminated lines after the header).
    pub lines: u64,
    /// Bytes of the imported file.
    pub bytes: u64,
}

impl From<&SessionSummary> for ImportReport {
    /// What an import that stored the session `summary` describes reports (a fleet's import,
    /// committed through its system of record, is reported from the stored session).
    fn from(summary: &SessionSummary) -> Self {
        ImportReport {
            id: summary.id.clone(),
            verdict: summary.verdict.clone(),
            events: summary.events,
            lines: summary.body_lines,
            bytes: summary.bytes,
        }
    }
}

/// Where an import lands, beyond what [`ImportOptions`] says (engine-internal: a migration
/// publishing a session's V4 successor).
#[derive(Default)]
pub(crate) struct Landing {
    /// The lower generations, given as bytes; `None`: the files of `options.generations`.
    pub(crate) lower: Option<Vec<LowerGeneration>>,
    /// The stored session (same id) this import replaces, atomically with its final commit.
    pub(crate) replaces: Option<SessionMeta>,
    /// Build every line's full value instead of only what the folds read (the reference the
    /// indexing reader is tested against).
    pub(crate) full_parse: bool,
}

impl Store {
    /// Import one file, choosing the encoding from its first bytes (zstd magic or text).
    pub fn import_path(
        &self,
        path: &std::path::Path,
        options: &ImportOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        self.land_path(path, options, Landing::default(), progress)
    }

    /// [`Store::import_path`], landing as `landing` says.
    pub(crate) fn land_path(
        &self,
        path: &std::path::Path,
        options: &ImportOptions,
        landing: Landing,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        use std::io::Read;
        let name = options
            .name
            .clone()
            .unwrap_or_else(|| path.display().to_string());
        let io = |source| Error::Io {
            path: path.into(),
            source,
        };
        let mut file = std::fs::File::open(path).map_err(io)?;
        let mut magic = [0u8; 4];
        let n = file.read(&mut magic).map_err(io)?;
        if n == 4 && magic == sessionlog_codec::format::zstd::MAGIC_BYTES {
            let mut bytes = magic.to_vec();
            file.read_to_end(&mut bytes).map_err(io)?;
            progress(bytes.len() as u64);
            return self.land_zstd(&name, &bytes, options, landing);
        }
        let reader =
            std::io::BufReader::with_capacity(1 << 20, std::io::Read::chain(&magic[..n], file));
        self.land_jsonl(&name, reader, options, landing, progress)
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
        // Under a commit hook every commit of an import is refused (`store/commit.rs`): a failed
        // one wrote nothing to remove, and a removal, refused too, would hide its error.
        if outcome.is_err() && !self.has_commit_hook() {
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

/// Feeds body lines to DSH's reader and stores the committed ones with their indexes. The
/// reader hands back events carrying what the folds here read (`LogReader::index_only`): a
/// fold added here that reads more of an event must be added to `codec::rules::fold_reads`.
struct BodyIndexer {
    reader: LogReader,
    /// Whether the surface index applies (V0 and V4 have a surface model; see
    /// `SessionMeta::require_surface_model`).
    indexed: bool,
    /// Whether projection checkpoints apply (sessions with a surface model: V0 and V4).
    projected: bool,
    /// The time of the last human prompt committed (the listing's activity).
    activity: Option<i64>,
    source_name: String,
    id: sessionlog_codec::json::JsString,
    surface: SurfaceBuilder,
    checkpoints: ProjectionCheckpoints,
}

impl BodyIndexer {
    /// An indexer over the body under `header`; its reader builds only what the folds below
    /// read of each event, or, with `full_parse`, every event whole.
    fn new(source_name: &str, header: &Header, header_len: u64, full_parse: bool) -> Self {
        let version = header.version.unwrap_or(0);
        let model = sessionlog_codec::rules::surface::SurfaceModel::for_version(version);
        let reader = LogReader::new(header, header_len);
        BodyIndexer {
            reader: if full_parse {
                reader
            } else {
                reader.index_only()
            },
            indexed: model.is_some(),
            projected: model.is_some(),
            activity: None,
            surface: SurfaceBuilder::for_model(model.unwrap_or_default()),
            checkpoints: ProjectionCheckpoints::new(seed_length(header), model.unwrap_or_default()),
            source_name: source_name.into(),
            id: header.id.clone(),
        }
    }

    /// Scan one complete line (without `\n`); store it if committed.
    fn line(&mut self, w: &mut SessionWriter<'_>, bytes: &[u8], batch: u64) -> Result<bool> {
        let outcome = self
            .reader
            .push_line(bytes)
            .map_err(|e| Error::Unstorable {
                source_name: self.source_name.clone(),
                id: self.id.to_string_lossy(),
                line: self.reader.scanner.lines(),
                reason: e.to_string(),
            })?;
        let LineOutcome::Committed(events) = outcome else {
            return Ok(false);
        };
        let first_seq = self.reader.scanner.events() - events.len() as u64;
        let number = w.number();
        let store = w.store();
        let members = u32::try_from(events.len()).unwrap_or(u32::MAX);
        // The surface fold comes last: it takes the event (and may keep it).
        for (k, e) in events.into_iter().enumerate() {
            let seq = first_seq + k as u64;
            self.reader.observe(seq, &e);
            if let Some(t) = human_prompt_time(&e) {
                self.activity = Some(t);
            }
            if self.projected {
                self.checkpoints.apply(number, seq, &e, &mut |key, value| {
                    w.put_checkpoint(key, value)
                })?;
            }
            if self.indexed {
                let refused_before = self.surface.error.is_some();
                self.surface
                    .apply(store, number, seq, e, &mut |key, value| {
                        w.put_surface(&key, value)
                    })?;
                if let (false, Some(rule)) = (refused_before, &self.surface.rule) {
                    self.reader.surface_refused(seq, rule);
                }
            }
        }
        w.put_line(first_seq, members, batch, bytes)?;
        Ok(true)
    }

    /// The time of the last human `user/message` committed (the listing's activity).
    fn activity(&self) -> Option<i64> {
        self.activity
    }

    /// The verdict, given the header's and any container-level (zstd) refusal.
    fn verdict(&mut self, header: &Header, container: Option<String>, body_len: u64) -> Verdict {
        self.reader.verdict(header, container, body_len).into()
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
