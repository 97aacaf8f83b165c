//! The registered message projections (DSH 0.2's `registerMessageProjection`), one per event
//! type; `image/offload` is built in. A plain registry: it knows nothing of the store.

use std::sync::{Arc, RwLock};

use sessionlog_codec::rules::surface::{duplicate_projection, ImageOffload, MessageProjection};

/// The registered projections, one per event type; `image/offload` is built in.
pub(crate) struct Registry(RwLock<Vec<Arc<dyn MessageProjection>>>);

impl Default for Registry {
    fn default() -> Self {
        Registry(RwLock::new(vec![Arc::new(ImageOffload)]))
    }
}

impl Registry {
    /// The projection of event type `ty`, if one is registered.
    pub(crate) fn get(&self, ty: &str) -> Option<Arc<dyn MessageProjection>> {
        let list = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        list.iter().find(|p| p.event_type() == ty).cloned()
    }

    /// Register `projection` for its event type; `Err` is DSH's text when the type has one.
    pub(crate) fn register(
        &self,
        projection: Arc<dyn MessageProjection>,
    ) -> std::result::Result<(), String> {
        let mut list = self.list_mut();
        let ty = projection.event_type().to_owned();
        if list.iter().any(|p| p.event_type() == ty) {
            return Err(duplicate_projection(&ty));
        }
        list.push(projection);
        Ok(())
    }

    /// Remove the projection of `ty`; whether one was registered.
    pub(crate) fn remove(&self, ty: &str) -> bool {
        let mut list = self.list_mut();
        let before = list.len();
        list.retain(|p| p.event_type() != ty);
        list.len() != before
    }

    /// The list, for a change. A push or retain cannot be left half-done by a panic elsewhere,
    /// so a poisoned lock still holds a whole list.
    fn list_mut(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<dyn MessageProjection>>> {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
