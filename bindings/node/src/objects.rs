//! Object storage for Node hosts (`exportAll`, `archive`, `restore`, and reads of archived
//! sessions), through `sessionlog-archive`, each result its report's serde rendering
//! (`reply.rs`), which `index.js` parses.
//! The endpoint and region come from the call or the AWS environment; credentials only from
//! the environment, and no reply ever carries them.

use sessionlog_archive::{ArchiveRoot, ArchiveSources, Bucket, S3Config, Transfer};
use sessionlog_engine::{ExportFormat, Options, Store};

use crate::reply::Reply;

/// Where object storage is: the AWS environment, with the call's endpoint and region over it.
#[derive(Clone, Debug, Default)]
pub struct Endpoint {
    /// The service's URL.
    pub url: Option<String>,
    /// The region requests are signed for.
    pub region: Option<String>,
}

impl Endpoint {
    /// The call's endpoint and region (each over the environment's when given).
    pub fn new(url: Option<String>, region: Option<String>) -> Self {
        Endpoint { url, region }
    }

    fn config(&self) -> S3Config {
        let mut config = S3Config::from_env();
        if self.url.is_some() {
            config.endpoint.clone_from(&self.url);
        }
        if self.region.is_some() {
            config.region.clone_from(&self.region);
        }
        config
    }

    fn bucket(&self, url: &str) -> Result<Bucket, Reply> {
        let root = ArchiveRoot::parse(url).map_err(failed)?;
        Bucket::open(root, &self.config(), Transfer::default()).map_err(failed)
    }

    fn sources(&self) -> ArchiveSources {
        ArchiveSources::new(self.config(), Transfer::default())
    }
}

/// An archive error as a reply: the engine's with its own code, the others as object storage's.
fn failed(e: sessionlog_archive::Error) -> Reply {
    match e {
        sessionlog_archive::Error::Engine(e) => e.into(),
        other => Reply::failed("SESSIONLOG_OBJECT_STORAGE", other.to_string()),
    }
}

/// Export every session to `to`: the summary.
pub fn export_all(
    store: &Store,
    endpoint: &Endpoint,
    to: &str,
    format: Option<ExportFormat>,
) -> Reply {
    let bucket = match endpoint.bucket(to) {
        Ok(b) => b,
        Err(reply) => return reply,
    };
    match sessionlog_archive::export_all(store, &bucket, &endpoint.sources(), format, &|_| {}) {
        Ok(summary) => Reply::json(&summary),
        Err(e) => failed(e),
    }
}

/// Archive the sessions idle for `older_than_ms` to `to`: the summary.
pub fn archive(store: &Store, endpoint: &Endpoint, to: &str, older_than_ms: i64) -> Reply {
    let bucket = match endpoint.bucket(to) {
        Ok(b) => b,
        Err(reply) => return reply,
    };
    match sessionlog_archive::archive(store, &bucket, older_than_ms, &|_| {}) {
        Ok(summary) => Reply::json(&summary),
        Err(e) => failed(e),
    }
}

/// Bring archived session `id` back: its `RestoreReport`.
pub fn restore(store: &Store, endpoint: &Endpoint, id: &str) -> Reply {
    match sessionlog_archive::restore(store, &endpoint.sources(), id) {
        Ok(report) => Reply::json(&report),
        Err(e) => failed(e),
    }
}

/// Run `read` of session `id` on `store`, or, when it is archived there, on a scratch store
/// holding it, fetched from its archive.
pub fn read_through(
    store: &Store,
    endpoint: &Endpoint,
    id: &str,
    read: impl Fn(&Store) -> Reply,
) -> Reply {
    match read(store) {
        Reply::Failed {
            code: "SESSIONLOG_ARCHIVED",
            ..
        } => match sessionlog_archive::ArchivedView::open(
            store,
            &endpoint.sources(),
            id,
            Options::default(),
        ) {
            Ok(view) => read(view.store()),
            Err(e) => failed(e),
        },
        other => other,
    }
}
