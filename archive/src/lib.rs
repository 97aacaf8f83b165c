//! Object storage for a sessionlog store: bulk export, import and archive of sessions to any
//! S3-compatible service, laid out as DSH session roots.
//!
//! The engine does no network I/O; this crate sits above it and drives it, as the CLI and the
//! Node binding do:
//!
//! - [`export_all`]: the whole store into `s3://BUCKET/PREFIX` under the names `export-all
//!   --out` gives its files, every generation, uploaded in parallel (multipart for large
//!   files), never overwriting an object (`If-None-Match: *`); an object already there with the
//!   same bytes counts as done, so a rerun after a kill resumes and ends byte-identical;
//! - [`import_root`]: a DSH root in a bucket, with the rules and verdicts of a local root;
//! - [`archive()`] and [`restore`]: cold sessions' bytes moved to the bucket (uploaded, read
//!   back, compared, and only then given up by the store in one commit) and back;
//!   [`ArchivedView`] and [`read_through`] read an archived session without restoring it.
//!
//! The client is `object_store`'s (SigV4, retries), configured as AWS's tools are
//! ([`S3Config::from_env`]); credentials are never shown in an error or a report.
#![forbid(unsafe_code)]

mod archive;
mod bucket;
mod conditional;
mod config;
mod error;
mod export;
mod fetch;
mod import;
mod location;
mod par;
mod render;
mod sources;
mod upload;
mod view;

pub use archive::{archive, archive_session, restore, ArchiveSummary, RestoreReport};
pub use bucket::{hex, Bucket, Digest};
pub use config::{S3Config, Secret, Transfer};
pub use error::{Error, Result};
pub use export::{export_all, ExportSummary};
pub use import::{import_root, BucketImport};
pub use location::ArchiveRoot;
pub use sources::ArchiveSources;
pub use upload::Stored;
pub use view::{read_through, ArchivedView};
