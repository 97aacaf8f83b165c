//! JS-faithful JSON: `JSON.parse` semantics in, byte-exact `JSON.stringify` text out.
//!
//! The engine never re-serializes imported lines (raw bytes are the truth); this module is for
//! decoding lines into logical events and for authoring lines exactly as DSH would.

mod gate;
mod interned;
mod number;
mod parse;
mod plain_run;
mod stringify;
mod value;

#[cfg(test)]
pub(crate) mod roundtrip_tests;

pub use gate::admit;
pub use number::number_to_string;
pub use parse::{parse, MAX_DEPTH};
pub use stringify::{js_string_of, stringify, write_object_replacing, write_value};
pub use value::{array_index, safe_integer, JsString, Object, Value, MAX_SAFE_INTEGER};
