//! Reads, the engine's third layer: logical events (`events.rs`), the surface index
//! (`surface.rs`), projection-unit checkpoints (`checkpoints.rs`), message projections
//! (`message_projections.rs`), and sessions read through migration (`successor.rs`,
//! `migrated_view.rs`). Nothing here writes; every read goes through the store's primitives and
//! the layout's key and value codecs.

pub(crate) mod checkpoints;
pub(crate) mod events;
pub(crate) mod message_projections;
pub(crate) mod migrated_view;
pub(crate) mod successor;
pub(crate) mod surface;
