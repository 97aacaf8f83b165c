//! Archived sessions: a read of a session whose bytes went to object storage is answered by a
//! scratch store holding it ([`ArchivedView`]: fetched, checked against the recorded SHA-256s and
//! imported, as `sessionlog messages` and the other read commands do). The last
//! [`KEPT_VIEWS`] views are kept, so scrubbing an archived session fetches it once; a view is
//! dropped (and fetched again) when the session's record names another archive copy, after a
//! restore and a new archive.

use std::sync::{Arc, Mutex, PoisonError};

use axum::http::StatusCode;
use sessionlog_archive::{ArchiveSources, ArchivedView};
use sessionlog_engine::{Options, Store};

use crate::reply::ApiError;

/// How many archived sessions' scratch stores are kept open.
pub const KEPT_VIEWS: usize = 4;

/// A kept view: its session, the archive location it was fetched from, the scratch store.
type Kept = (String, String, Arc<ArchivedView>);

pub(crate) struct Archived {
    options: Options,
    sources: Option<ArchiveSources>,
    /// Most recently used last.
    views: Mutex<Vec<Kept>>,
}

impl Archived {
    pub(crate) fn new(options: Options, sources: Option<ArchiveSources>) -> Archived {
        Archived {
            options,
            sources,
            views: Mutex::new(Vec::new()),
        }
    }

    /// The scratch store holding archived session `id` of `store`.
    pub(crate) fn view(&self, store: &Store, id: &str) -> Result<Arc<ArchivedView>, ApiError> {
        let location = store.summary(id)?.archived.unwrap_or_default();
        let mut views = self.views.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = views.iter().position(|(i, l, _)| i == id && *l == location) {
            let kept = views.remove(at);
            let view = Arc::clone(&kept.2);
            views.push(kept);
            return Ok(view);
        }
        let Some(sources) = &self.sources else {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("session \"{id}\" is archived at {location}, and this console reaches no object storage"),
            ));
        };
        let view = ArchivedView::open(store, sources, id, self.options.clone()).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_GATEWAY,
                format!("session \"{id}\" is archived at {location}, and fetching it failed: {e}"),
            )
        })?;
        let view = Arc::new(view);
        views.retain(|(i, _, _)| i != id);
        if views.len() >= KEPT_VIEWS {
            views.remove(0);
        }
        views.push((id.to_owned(), location, Arc::clone(&view)));
        Ok(view)
    }
}
