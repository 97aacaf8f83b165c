//! JS-faithful JSON: `JSON.parse` semantics in, byte-exact `JSON.stringify` text out.
//!
//! The engine never re-serializes imported lines (raw bytes are the truth); this module is for
//! decoding lines into logical events and for authoring lines exactly as DSH would.
//!
//! - `value`: the JS value model ([`Value`], [`JsString`] in WTF-8, [`Object`] in key order);
//! - `parse`: `JSON.parse`; `stringify`: `JSON.stringify` and `String(v)`; `number`: JS's
//!   `Number::toString`; `plain_run`: the bytes a string holds unescaped, for both directions;
//! - `gate`: the lossless-JSON admission gate ([`admit`]);
//! - `skim`: `JSON.parse`'s verdict without building the value, with the envelope's member
//!   spans ([`skim()`]), for readers that build only what they use;
//! - `interned`: DSH's repeated words held as `&'static str`, looked up through `by_length`.

pub(crate) mod by_length;
mod gate;
mod interned;
mod number;
mod parse;
mod plain_run;
pub mod skim;
mod stringify;
mod value;

#[cfg(test)]
pub(crate) mod roundtrip_tests;

pub use gate::admit;
pub use number::number_to_string;
pub use parse::{parse, parse_bytes, MAX_DEPTH};
pub use stringify::{js_string_of, stringify, write_object_replacing, write_value};
pub use value::{array_index, safe_integer, JsString, Object, Value, MAX_SAFE_INTEGER};
