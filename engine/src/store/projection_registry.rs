//! The registered message projections (DSH 0.2's `registerMessageProjection`), one per event
//! type. It starts as the store's [`Options::message_projections`] name it: none by default, as
//! DSH 0.2's `SessionStore` starts. A plain registry: it knows nothing of the store.
//!
//! [`Options::message_projections`]: crate::options::Options::message_projections

use std::sync::{Arc, RwLock};

use sessionlog_codec::rules::surface::{
    duplicate_projection, missing_projection, removed_projection, ImageOffload, MessageProjection,
};

use crate::options::BuiltinProjection;

/// The registered projections, one per event type, and the types whose projection was removed
/// since the store opened.
pub(crate) struct Registry(RwLock<Vec<Arc<dyn MessageProjection>>>, RwLock<Vec<String>>);

impl Registry {
    /// A registry holding `builtins` (distinct: `Options::validate` checks it).
    pub(crate) fn with(builtins: &[BuiltinProjection]) -> Self {
        let list = builtins
            .iter()
            .map(|b| match b {
                BuiltinProjection::ImageOffload => Arc::new(ImageOffload) as Arc<_>,
            })
            .collect();
        Registry(RwLock::new(list), RwLock::new(Vec::new()))
    }

    /// The projection of event type `ty`, if one is registered.
    pub(crate) fn get(&self, ty: &str) -> Option<Arc<dyn MessageProjection>> {
        let list = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        list.iter().find(|p| p.event_type() == ty).cloned()
    }

    /// Every registered projection.
    pub(crate) fn list(&self) -> Vec<Arc<dyn MessageProjection>> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
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
        let removed = list.len() != before;
        if removed {
            let mut gone = self
                .1
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !gone.iter().any(|t| t == ty) {
                gone.push(ty.to_owned());
            }
        }
        removed
    }

    /// DSH's refusal of a session that used the projection of `ty`, which is not registered: a
    /// projection removed since the store opened was "removed or replaced" (DSH's live
    /// session); one never registered is missing (DSH's restore).
    pub(crate) fn unregistered(&self, ty: &str) -> String {
        let gone = self
            .1
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if gone.iter().any(|t| t == ty) {
            removed_projection(ty)
        } else {
            missing_projection(ty)
        }
    }

    /// The list, for a change. A push or retain cannot be left half-done by a panic elsewhere,
    /// so a poisoned lock still holds a whole list.
    fn list_mut(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<dyn MessageProjection>>> {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::Registry;
    use crate::options::BuiltinProjection;

    #[test]
    fn starts_with_the_builtins_asked_for_and_none_by_default() {
        assert!(Registry::with(&[]).get("image/offload").is_none());
        let r = Registry::with(&[BuiltinProjection::ImageOffload]);
        assert_eq!(
            r.get("image/offload").map(|p| p.event_type().to_owned()),
            Some("image/offload".to_owned())
        );
        assert!(r.get("image/offload").is_some());
        assert!(r
            .unregistered("image/offload")
            .contains("requires a message projection"));
        assert!(r.remove("image/offload"));
        assert!(r.list().is_empty());
        assert!(r
            .unregistered("image/offload")
            .contains("was removed or replaced"));
    }
}
