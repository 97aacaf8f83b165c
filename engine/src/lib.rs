//! The sessionlog store: DSH session logs in RocksDB.
//!
//! Raw bytes are the truth, logical events are an index: every imported line keeps its exact
//! bytes (export concatenates them, never re-serializes), and the logical events are derived once
//! at write time. See `docs/format.md` for the on-disk layout.
#![deny(unsafe_code)]

mod append;
mod error;
mod events;
mod export;
mod fork;
mod generations;
mod import;
mod keys;
mod list;
mod meta;
mod migrate;
mod migrated_view;
mod options;
mod projection;
mod projections;
mod repair;
mod request;
mod retention;
mod root;
mod store;
mod surface;
#[cfg(test)]
mod test_support;
mod verify;

pub use append::{AppendItem, AppendReceipt};
pub use error::{Error, Result};
pub use export::ExportFormat;
pub use fork::{ForkReport, LineageEntry};
pub use generations::{scan_session_dir, GenerationFile, SessionDir};
pub use import::{ImportOptions, ImportReport, RootLocation};
pub use list::{ListOrder, ListPage, SessionSummary};
pub use meta::{FrozenGeneration, SourceEncoding, Verdict};
pub use migrate::{MigrateOptions, MigrationOutcome, MigrationReport};
pub use options::{Durability, Options, V0Reads};
pub use projection::CHECKPOINT_EVERY;
pub use repair::RepairReport;
pub use retention::PurgeReport;
pub use root::{is_session_root, scan_root, RootScan};
pub use store::Store;
pub use surface::SurfaceView;
pub use verify::{VerifyProblem, VerifyReport};
