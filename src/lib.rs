//! facade
pub use sessionlog_codec as codec;
pub use sessionlog_engine as engine;
