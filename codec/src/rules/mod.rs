//! DSH's rules over a log's events: what its reader commits and refuses, what the model sees,
//! what the projections fold to, and how an interrupted or forked log is closed. These read
//! events through [`crate::format`]; nothing here touches bytes on its own.
//!
//! - [`scanner`]: DSH's strict reader over a body, line by line: the committed region, the torn
//!   tail, and the verdict (clean, torn, corrupt, unsupported);
//! - [`fold_reads`]: what an import's folds read of a V0 event, built from the skim alone;
//! - [`relations`]: DSH 0.2's lifecycle relationships of a V4 log, which its reader checks over
//!   the committed events;
//! - [`surface`]: the model-visible surface fold, message projections, the derived message list,
//!   the transcript and the request-header fold, and the naive whole-log replay;
//! - [`projection`]: the projection units (title, todos, token usage, turns, goal, …) the engine
//!   checkpoints and serves at any seq;
//! - [`repair`]: crash repair of an interrupted log (the closers and the end-seed marker);
//! - [`open_turn`]: DSH 0.2's open-turn closers, for V4 fork and repair;
//! - [`invariant`]: DSH's invariant companion (turn, step and tool-call pairing), checked on
//!   strict appends;
//! - [`message_shape`]: the message a DSH 0.2 `Session` requires of a message event.

pub mod fold_reads;
pub mod invariant;
pub mod message_shape;
pub mod open_turn;
pub mod projection;
pub mod relations;
pub mod repair;
pub mod scanner;
pub mod surface;
