//! The synthetic workload behind `sessionlog-harness gen`: DSH-shaped session logs, deterministic
//! for a seed, written as `<dir>/<session id>.jsonl`.
//!
//! Each session is a function of `(seed, index)` alone ([`session_bytes`]), so corpora can be
//! regenerated, sharded or generated in memory by benches. Files look like what DSH's JSONL
//! backend writes: a header line, then batches of packed records (`pack_chunk_runs` per batch,
//! `JSON.stringify` text, `"\n"` after each record). A configurable fraction of sessions end in a
//! torn tail: the last record cut part-way, without its `"\n"`.
//!
//! [`session_batches`] yields the same session as a live feed (header line, then batch by batch)
//! for benchmarks that append rather than import; [`session_batches_v4`] the same session in
//! DSH 0.2's format (V4).
//!
//! Module map: [`session`] (turn loop and batch writer), [`feed`] (a feed's batches), [`stream`]
//! (model calls and tools), [`compact`] (surface replacements), [`text`] (pseudo-text), [`rng`]
//! (the PRNG).

mod compact;
mod feed;
mod rng;
mod session;
mod stream;
mod text;
mod v4;

#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};

pub use feed::{Batch, SessionFeed};
use rng::Rng;
pub(crate) use text::uuid_from_bits;
pub use v4::{session_batches_v4, session_v4_each};

/// The store options of a host of the generated sessions: `options` with the message
/// projections their events need registered. The V4 generator writes `image/offload` events, as
/// a DSH 0.2 host with its image-offload plugin loaded does, and the store judges a log holding
/// them by its registered projections, as DSH does.
pub fn host_options(options: sessionlog_engine::Options) -> sessionlog_engine::Options {
    let offload = sessionlog_engine::BuiltinProjection::ImageOffload;
    let mut options = options;
    if !options.message_projections.contains(&offload) {
        options.message_projections.push(offload);
    }
    options
}

/// The log format a generated session is written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// DSH 0.1 (`session.jsonl`): packed chunk rows.
    #[default]
    V0,
    /// DSH 0.2 (`session.v4.jsonl`): one row per event.
    V4,
}

impl LogFormat {
    /// The format version its sessions' headers carry.
    pub fn version(self) -> u32 {
        match self {
            LogFormat::V0 => 0,
            LogFormat::V4 => 4,
        }
    }
}

/// Session number `index` of the corpus `opts` describes, as a live feed in `format`.
pub fn session_feed(index: u64, opts: &GenOptions, format: LogFormat) -> SessionFeed {
    match format {
        LogFormat::V0 => session_batches(index, opts),
        LogFormat::V4 => session_batches_v4(index, opts),
    }
}

/// Session number `index` of the corpus `opts` describes, as a feed of batches. Its content is
/// that of [`session_bytes`]`(index, opts)`; `opts.torn_fraction` is ignored.
pub fn session_batches(index: u64, opts: &GenOptions) -> SessionFeed {
    let built = session::build_with(index, opts, true);
    let header_line = built
        .out
        .strip_suffix('\n')
        .unwrap_or(&built.out)
        .to_owned();
    SessionFeed {
        id: built.id,
        header_line,
        batches: built.batches,
    }
}

/// Salt of the PRNG stream that decides torn tails, kept apart from content so changing
/// `torn_fraction` never changes what the untorn part of a session says.
const TORN_STREAM: u64 = 0x746f_726e_7461_696c;

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenOptions {
    /// Number of session files to write. Default: 10.
    pub sessions: u64,
    /// Mean logical events per session; each session draws its length uniformly from 0.5x to
    /// 1.5x of this (whole turns, so it may overshoot by one turn). Default: 2000.
    pub events_per_session: u64,
    /// PRNG seed; the same seed and options give byte-identical files. Default: 0.
    pub seed: u64,
    /// Fraction of sessions (0.0..=1.0) whose last record is cut mid-line without `"\n"`.
    /// Default: 0.02.
    pub torn_fraction: f64,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            sessions: 10,
            events_per_session: 2_000,
            seed: 0,
            torn_fraction: 0.02,
        }
    }
}

impl GenOptions {
    /// Reject options that cannot produce a corpus.
    pub fn validate(&self) -> io::Result<()> {
        if !(0.0..=1.0).contains(&self.torn_fraction) {
            return Err(invalid(format!(
                "torn fraction must be within 0..=1, got {}",
                self.torn_fraction
            )));
        }
        if self.events_per_session == 0 {
            return Err(invalid("events per session must be at least 1".to_owned()));
        }
        Ok(())
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// What [`generate`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GenReport {
    /// Session files written.
    pub files: u64,
    /// Total bytes written.
    pub bytes: u64,
    /// Logical events generated (packed rows count each member; a torn record's events count).
    pub events: u64,
    /// Sessions written with a torn tail.
    pub torn: u64,
}

/// One generated session.
#[derive(Clone, Debug)]
pub struct GenSession {
    /// The session id (the header's `id`, and the file stem).
    pub id: String,
    /// The file bytes.
    pub bytes: Vec<u8>,
    /// Logical events it holds.
    pub events: u64,
    /// Whether its tail is torn.
    pub torn: bool,
}

/// Generate session number `index` of the corpus described by `opts`, in memory.
pub fn session(index: u64, opts: &GenOptions) -> GenSession {
    let (id, mut bytes, events) = session::build(index, opts);
    let mut torn_rng = Rng::new(opts.seed ^ TORN_STREAM, index);
    let torn = torn_rng.chance(opts.torn_fraction);
    if torn {
        tear(&mut torn_rng, &mut bytes);
    }
    GenSession {
        id,
        bytes,
        events,
        torn,
    }
}

/// The file bytes of session number `index` (see [`session`]).
pub fn session_bytes(index: u64, opts: &GenOptions) -> Vec<u8> {
    session(index, opts).bytes
}

/// Cut the last record part-way: keep at least one byte of it, drop at least its `"\n"`.
fn tear(rng: &mut Rng, bytes: &mut Vec<u8>) {
    let body_end = bytes.len().saturating_sub(1);
    let line_start = bytes[..body_end]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line_len = body_end - line_start;
    if line_len > 1 {
        bytes.truncate(line_start + 1 + rng.index(line_len - 1));
    }
}

/// Write `opts.sessions` files into `out_dir` (created if missing).
pub fn generate(out_dir: &Path, opts: &GenOptions) -> io::Result<GenReport> {
    generate_with_progress(out_dir, opts, |_| {})
}

/// [`generate`], calling `progress` with the running totals after each file.
pub fn generate_with_progress(
    out_dir: &Path,
    opts: &GenOptions,
    mut progress: impl FnMut(&GenReport),
) -> io::Result<GenReport> {
    opts.validate()?;
    std::fs::create_dir_all(out_dir)?;
    let mut report = GenReport::default();
    for index in 0..opts.sessions {
        let s = session(index, opts);
        let path: PathBuf = out_dir.join(format!("{}.jsonl", s.id));
        std::fs::write(&path, &s.bytes)?;
        report.files += 1;
        report.bytes += s.bytes.len() as u64;
        report.events += s.events;
        report.torn += u64::from(s.torn);
        progress(&report);
    }
    Ok(report)
}
