//! Opening a store for use: the RocksDB handle (`store/open.rs`), then what must happen before
//! the store serves: interrupted imports removed (`write/recovery.rs`) and session numbering
//! started past every stored session.

use std::path::Path;

use crate::error::Result;
use crate::options::Options;
use crate::store::Store;

impl Store {
    /// Open (creating if needed) the store at `path`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Store> {
        let store = Store::open_handle(path.as_ref(), options)?;
        store.recover_interrupted_imports()?;
        store.start_numbering()?;
        Ok(store)
    }
}
