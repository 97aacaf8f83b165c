//! Listing stored sessions.

use rocksdb::{Direction, IteratorMode};

use crate::meta::{SessionMeta, Verdict};
use crate::store::{Store, CF_SESSIONS};
use crate::{Error, Result};

/// One line of `ls`.
#[derive(Clone, Debug)]
pub struct SessionSummary {
    /// Session id.
    pub id: String,
    /// Header `createdAt`.
    pub created_at: Option<i64>,
    /// Header `cwd`.
    pub cwd: Option<String>,
    /// DSH's verdict.
    pub verdict: Verdict,
    /// Logical events.
    pub events: u64,
    /// Stored bytes (as exported).
    pub bytes: u64,
}

impl From<&SessionMeta> for SessionSummary {
    fn from(m: &SessionMeta) -> Self {
        SessionSummary {
            id: m.id_lossy(),
            created_at: m.created_at,
            cwd: m.cwd.clone(),
            verdict: m.verdict.clone(),
            events: m.events,
            bytes: m.total_bytes,
        }
    }
}

impl Store {
    /// Every stored session, ordered by id.
    pub fn list(&self) -> Result<Vec<SessionSummary>> {
        let mut out = Vec::new();
        self.for_each_meta(&mut |m| {
            out.push(SessionSummary::from(m));
            Ok(())
        })?;
        Ok(out)
    }

    /// Visit every session's metadata in id order.
    pub(crate) fn for_each_meta(
        &self,
        each: &mut dyn FnMut(&SessionMeta) -> Result<()>,
    ) -> Result<()> {
        let cf = self.cf(CF_SESSIONS)?;
        for item in self
            .db
            .iterator_cf(cf, IteratorMode::From(b"S", Direction::Forward))
        {
            let (k, v) = item.map_err(Error::storage("listing sessions"))?;
            let Some((&b'S', id)) = k.split_first() else {
                break;
            };
            each(&SessionMeta::decode(id, &v)?)?;
        }
        Ok(())
    }

    /// Stored ids, for callers that only need names.
    pub fn ids(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        self.for_each_meta(&mut |m| {
            out.push(m.id_lossy());
            Ok(())
        })?;
        Ok(out)
    }
}
