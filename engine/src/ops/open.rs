//! Opening a store for use: the RocksDB handle (`store/open.rs`), then what must happen before
//! the store serves: interrupted imports removed (`write/recovery.rs`) and session numbering
//! started past every stored session, the change log's positions past its last record. Or, for
//! reading beside a process that holds the store, a secondary instance ([`Store::open_reader`]).

use std::path::Path;

use crate::error::{Error, Result};
use crate::options::Options;
use crate::store::Store;

impl Store {
    /// Open (creating if needed) the store at `path`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Store> {
        let store = Store::open_handle(path.as_ref(), options)?;
        store.recover_interrupted_imports()?;
        store.start_numbering()?;
        store.read_change_log_end()?;
        Ok(store)
    }

    /// Open the store at `path` for reading: as [`Store::open`] does when no other process or
    /// handle holds it, else as a RocksDB secondary instance beside the holder, which sees what
    /// the holder committed up to its open and follows it while a subscription waits (every
    /// [`SECONDARY_POLL`](crate::SECONDARY_POLL)). A secondary refuses every write
    /// ([`Error::ReadOnly`](crate::Error::ReadOnly)); the handle says which it is
    /// ([`Store::is_secondary`]).
    pub fn open_reader(path: impl AsRef<Path>, options: Options) -> Result<Store> {
        match Store::open(path.as_ref(), options.clone()) {
            Err(Error::Locked { .. }) => Store::open_beside(path, options),
            opened => opened,
        }
    }

    /// Open the existing store at `path` for reading beside whatever process holds it or will
    /// hold it, as a RocksDB secondary instance (see [`Store::open_reader`]): for a follower
    /// that must not keep writers out, such as `sessionlog tail --follow`, while processes
    /// come and go appending.
    pub fn open_beside(path: impl AsRef<Path>, options: Options) -> Result<Store> {
        Store::open_secondary_handle(path.as_ref(), options)
    }

    /// A new reader beside the store's holder, opened as this one was: what a reader opens when
    /// [`Store::catch_up`] answers [`Error::HolderReopened`].
    pub fn reopen_beside(&self) -> Result<Store> {
        Store::open_secondary_handle(self.path(), self.options.clone())
    }
}
