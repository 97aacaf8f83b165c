//! Operations, the engine's top layer: the public API of [`Store`](crate::store::Store) —
//! import, create and append, repair and resume, fork and lineage, migrate, delete and purge,
//! archive and restore, export and roots, verify, listing and request reconstruction. Each decides what to read and
//! write through the layers below and owns its operation's rules.

pub(crate) mod append;
pub(crate) mod archive;
pub(crate) mod events_as_written;
pub(crate) mod export;
pub(crate) mod fork;
pub(crate) mod generations;
pub(crate) mod import;
pub(crate) mod kinds;
pub(crate) mod list;
pub(crate) mod migrate;
pub(crate) mod open;
mod render;
pub(crate) mod repair;
pub(crate) mod request;
pub(crate) mod retention;
pub(crate) mod root;
pub(crate) mod search;
pub(crate) mod subscribe;
mod verbs;
pub(crate) mod verify;

#[cfg(test)]
mod tests;
