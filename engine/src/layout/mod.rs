//! The storage layout, the engine's lowest layer: every column family, key and section byte
//! (`keys.rs`), every value's framing and encoding (`values.rs`), the session metadata record
//! (`meta.rs`) and the session counter with its merge rule (`counter.rs`). Nothing here touches
//! RocksDB or knows the store; every layer above builds and parses keys and values only through
//! these modules, so the format lives in one place (described in `docs/format.md`).
//!
//! Layers, each importing only itself and the ones before it (checked by `layering.rs`):
//! `layout` → `store` → `read` → `write` → `ops`.

pub(crate) mod changes;
pub(crate) mod counter;
pub(crate) mod keys;
pub(crate) mod meta;
pub(crate) mod values;
