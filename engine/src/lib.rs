//! The sessionlog store: DSH session logs in RocksDB.
//!
//! Raw bytes are the truth, logical events are an index: every imported line keeps its exact
//! bytes (export concatenates them, never re-serializes), and the logical events are derived once
//! at write time. See `docs/format.md` for the on-disk layout.
//!
//! The engine is built in layers, each importing only itself and the layers before it (the
//! `layering` test checks every `crate::` path): `layout` (keys, value framing, metadata) →
//! `store` (the handle and its primitives) → `read` (events, surface, checkpoints, message
//! projections, migrated views) → `write` (the one session batch, line authoring, indexing) →
//! `ops` (the public operations). `error`, `options` and `metrics` (the counters every layer
//! records, and their Prometheus rendering) sit beneath them all.
#![deny(unsafe_code)]

mod error;
mod layout;
mod metrics;
mod ops;
mod options;
mod read;
mod store;
mod write;

#[cfg(test)]
mod layering;
#[cfg(test)]
mod test_support;

pub use error::{Error, Refusal, RefusalKind, Result};
pub use layout::changes::ChangeKind;
pub use layout::meta::{ArchivedCopy, ArchivedFile, FrozenGeneration, SourceEncoding, Verdict};
pub use metrics::{
    AppendMetrics, ColumnFamilyMetrics, CommitDistributions, CommitStats, HistogramSnapshot,
    Metrics, RefusalReason, RocksDbMetrics, SubscriptionStats,
};
pub use ops::append::{
    AppendBatch, AppendItem, AppendQueue, AppendReceipt, NewSession, StoreAccess,
};
pub use ops::archive::{ArchiveCandidates, ArchivePlan};
pub use ops::export::ExportFormat;
pub use ops::fork::{ForkFile, ForkReport, LineageEntry};
pub use ops::generations::{scan_session_dir, GenerationFile, SessionDir};
pub use ops::import::{ImportOptions, ImportReport, RootLocation};
pub use ops::kinds::EventKinds;
pub use ops::list::{ListOrder, ListPage, SessionSummary};
pub use ops::migrate::{MigrateOptions, MigrationOutcome, MigrationReport};
pub use ops::repair::RepairReport;
pub use ops::retention::{PurgeReport, RecordedChange};
pub use ops::root::{is_session_root, scan_root, RootFile, RootScan};
pub use ops::search::{
    parse_time, IndexFollower, PageEnd, ReindexReport, SearchHit, SearchMatch, SearchPage,
    SearchQuery, SearchWatermark, SessionRow, TokenTotals, MAX_TEXT_BYTES,
};
pub use ops::subscribe::{
    Feed, FeedChange, FeedCursor, FeedItem, Subscription, Watch, WatchKey, BUFFERED_EVENTS,
};
pub use ops::verify::{VerifyProblem, VerifyReport};
pub use options::{BuiltinProjection, Durability, Options, V0Reads};
pub use read::surface::SurfaceView;
pub use store::{
    direct_io_supported, CommitHook, CommitRecord, CreatedSession, Store, SECONDARY_POLL,
};
pub use write::indexer::CHECKPOINT_EVERY;
