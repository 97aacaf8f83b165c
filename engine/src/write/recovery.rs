//! Recovery at open: the partial writes of imports a crash interrupted are removed before the
//! store serves.
//!
//! Invariant kept at open: no `events` key belongs to a session number without metadata, except
//! while an import of that number is in progress in this process. An import that spills marks
//! its number with a `P ‖ number` key in its first spilled batch (`session_writer.rs`), so every
//! interrupted import is found through its marker and its ranges deleted with it.

use crate::error::Result;
use crate::layout::keys::{self, CF_SESSIONS};
use crate::store::{visit, Store};
use crate::write::session_batch::SessionBatch;

impl Store {
    /// Remove the partial writes of every interrupted import (see the module invariant).
    pub(crate) fn recover_interrupted_imports(&self) -> Result<()> {
        let mut interrupted = Vec::new();
        let mut it = self.iter_below(CF_SESSIONS, vec![keys::PENDING_TAG + 1])?;
        it.seek([keys::PENDING_TAG]);
        visit(
            &mut it,
            "scanning interrupted imports".into(),
            &mut |k, _| {
                if let Some(number) = keys::parse_pending_key(k) {
                    interrupted.push(number);
                }
                Ok(true)
            },
        )?;
        if interrupted.is_empty() {
            return Ok(());
        }
        let mut batch = SessionBatch::new(self);
        for number in interrupted {
            batch.discard(number)?;
        }
        batch.commit("removing interrupted imports")
    }
}
