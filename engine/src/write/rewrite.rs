//! Rewriting one stored session outside the append path (delete, undelete, repair, resume)
//! under its write lock.
//!
//! Invariant: the session's cached write state is dropped with every committed rewrite, so the
//! next append reloads it from the store and never trusts state from before the rewrite.

use crate::error::Result;
use crate::layout::meta::SessionMeta;
use crate::store::{lock_session, Recorded, Store};
use crate::write::session_batch::SessionBatch;

impl Store {
    /// Rewrite session `id`: under its write lock, `stage` builds a batch from its committed
    /// metadata; a non-empty batch is committed (`context` names the write in errors; `recorded`
    /// when its system of record made the change) and the session's cached write state dropped.
    pub(crate) fn rewrite_session<T>(
        &self,
        id: &str,
        context: &str,
        recorded: Option<Recorded>,
        stage: impl FnOnce(SessionMeta, &mut SessionBatch<'_>) -> Result<T>,
    ) -> Result<T> {
        self.check_writable()?;
        let handle = self.write_states.handle(id.as_bytes());
        let mut state = lock_session(&handle);
        let meta = self.require_meta(id.as_bytes())?;
        let mut batch = SessionBatch::recorded(self, recorded);
        let staged = stage(meta, &mut batch)?;
        if !batch.is_empty() {
            batch.commit(&format!("{context} \"{id}\""))?;
            *state = None;
        }
        Ok(staged)
    }
}
