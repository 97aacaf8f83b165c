//! Byte-vector fields of bincode records (`#[serde(with = "byte_fields")]`), encoded as serde
//! bytes: one length and one copy. Serde's default writes a `Vec<u8>` element by element, one
//! encoder call per byte; for a session's header (hundreds of bytes) in the metadata rewritten
//! with every appended batch that was most of the record's encoding time.
//!
//! Invariant: the encoding is bincode's for a byte sequence either way (a varint length, then
//! the bytes), so records written before this module read back unchanged (pinned below).

use serde::de::{Error, Visitor};
use serde::{Deserializer, Serializer};

/// Serialize `bytes` as serde bytes.
pub(crate) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(bytes)
}

/// Deserialize serde bytes.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    d.deserialize_byte_buf(ByteBuf)
}

struct ByteBuf;

impl<'de> Visitor<'de> for ByteBuf {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a byte array")
    }

    fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }

    fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Elementwise {
        before: u64,
        bytes: Vec<u8>,
        after: Option<String>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct AsBytes {
        before: u64,
        #[serde(with = "super")]
        bytes: Vec<u8>,
        after: Option<String>,
    }

    fn encoded<T: Serialize>(v: &T) -> Vec<u8> {
        bincode::serde::encode_to_vec(v, bincode::config::standard()).expect("encodes")
    }

    fn decoded<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> T {
        let (v, read) =
            bincode::serde::decode_from_slice(bytes, bincode::config::standard()).expect("decodes");
        assert_eq!(read, bytes.len());
        v
    }

    proptest! {
        /// Both encodings are the same bytes, so each reads the other's records.
        #[test]
        fn bytes_encode_as_serde_s_default_does(
            before in any::<u64>(),
            bytes in proptest::collection::vec(any::<u8>(), 0..600),
            after in proptest::option::of(".{0,8}"),
        ) {
            let old = Elementwise { before, bytes: bytes.clone(), after: after.clone() };
            let new = AsBytes { before, bytes, after };
            let text = encoded(&old);
            prop_assert_eq!(&text, &encoded(&new));
            prop_assert_eq!(decoded::<AsBytes>(&text), new);
            prop_assert_eq!(decoded::<Elementwise>(&encoded(&old)), old);
        }
    }
}
