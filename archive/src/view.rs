//! Reading an archived session without restoring it: its files are fetched (and checked) into
//! a scratch store in a temporary directory, imported there as any session directory is, and
//! every read (export, events, the point-in-time queries) is answered by that store, as the
//! store holding the session would answer it. The scratch store goes when the view drops; the
//! store the session is archived in is not written.

use sessionlog_engine::{Durability, ImportOptions, Options, Store};
use tempfile::TempDir;

use crate::error::{Error, Result};
use crate::fetch::fetch_session;
use crate::sources::ArchiveSources;

/// A scratch store holding one archived session.
pub struct ArchivedView {
    // Dropped in order: the store closes before its directory goes.
    store: Store,
    _dir: TempDir,
}

impl ArchivedView {
    /// Fetch archived session `id` of `store` into a scratch store opened with `options` (its
    /// durability aside: nothing there needs to outlive the view).
    pub fn open(
        store: &Store,
        sources: &ArchiveSources,
        id: &str,
        options: Options,
    ) -> Result<ArchivedView> {
        let copy = store.archived_copy(id)?.ok_or_else(|| {
            Error::Engine(sessionlog_engine::Error::Archive {
                id: id.to_owned(),
                reason: "it is not archived".into(),
            })
        })?;
        let fetched = fetch_session(sources, &copy.root, &copy.files)?;
        let dir = tempfile::Builder::new()
            .prefix("sessionlog-view-")
            .tempdir()
            .map_err(Error::io("creating a temporary directory"))?;
        let scratch = Store::open(
            dir.path(),
            Options {
                durability: Durability::Buffered,
                ..options
            },
        )?;
        let import = ImportOptions {
            generations: Some(fetched.dir.clone()),
            name: Some(copy.location()),
            ..ImportOptions::default()
        };
        scratch.import_path(&fetched.dir.served.path, &import, &mut |_| {})?;
        Ok(ArchivedView {
            store: scratch,
            _dir: dir,
        })
    }

    /// The scratch store: it holds the session under its own id.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

/// Run `read` on `store`, or, when the session it reads is archived there, on a scratch store
/// holding it (see [`ArchivedView`]).
pub fn read_through<T>(
    store: &Store,
    sources: &ArchiveSources,
    id: &str,
    options: &Options,
    read: impl Fn(&Store) -> sessionlog_engine::Result<T>,
) -> Result<T> {
    match read(store) {
        Err(sessionlog_engine::Error::Archived { .. }) => {
            let view = ArchivedView::open(store, sources, id, options.clone())?;
            Ok(read(view.store())?)
        }
        other => Ok(other?),
    }
}
