//! Property tests: `stringify` output is a fixed point of `parse` then `stringify`, and values the
//! gate admits survive a text round trip unchanged.

use proptest::prelude::*;

use super::value::{JsString, Object, Value};
use super::{admit, parse, stringify};

/// Strings as JS holds them: scalars plus, sometimes, lone surrogates (as WTF-8).
fn js_string() -> impl Strategy<Value = JsString> {
    let piece = prop_oneof![
        4 => any::<char>().prop_map(|c| c.to_string().into_bytes()),
        2 => "[a-z0-9 \"\\\\/]{0,4}".prop_map(String::into_bytes),
        1 => (0u32..0x20).prop_map(|c| vec![u8::try_from(c).unwrap_or(0)]),
        1 => prop::sample::select(vec!["\u{2028}", "\u{7f}", "😀", "é"]).prop_map(|s| s.as_bytes().to_vec()),
        1 => (0xD800u32..=0xDFFF).prop_map(|u| {
            let b = |x: u32| u8::try_from(x).unwrap_or(0);
            vec![b(0xE0 | (u >> 12)), b(0x80 | ((u >> 6) & 0x3F)), b(0x80 | (u & 0x3F))]
        }),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|pieces| {
        let mut bytes: Vec<u8> = Vec::new();
        for p in pieces {
            // Never let a lone high surrogate meet a lone low one: WTF-8 stores that as a pair.
            let high_then_low = bytes.len() >= 3
                && bytes[bytes.len() - 3] == 0xED
                && (0xA0..=0xAF).contains(&bytes[bytes.len() - 2])
                && p.len() == 3
                && p[0] == 0xED
                && p[1] >= 0xB0;
            if !high_then_low {
                bytes.extend(p);
            }
        }
        JsString::from_wtf8_unchecked(bytes)
    })
}

fn key() -> impl Strategy<Value = JsString> {
    prop_oneof![
        prop::sample::select(vec![
            "a",
            "b",
            "0",
            "1",
            "10",
            "4294967294",
            "4294967295",
            "01",
            "",
            "-1"
        ])
        .prop_map(JsString::from),
        js_string(),
    ]
}

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        (-1_000_000i64..1_000_000).prop_map(|i| i as f64),
        prop::sample::select(vec![
            0.0,
            -0.0,
            1e21,
            1e-7,
            5e-324,
            f64::MAX,
            f64::NAN,
            f64::INFINITY
        ]),
    ]
}

/// Any value `Value` can hold, refused numbers and lone surrogates included.
pub(crate) fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number().prop_map(Value::Number),
        js_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6).prop_map(|entries| {
                let mut o = Object::new();
                for (k, v) in entries {
                    o.insert(k, v);
                }
                Value::Object(o)
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn stringify_is_a_fixed_point_of_parse(v in value()) {
        let text = stringify(&v);
        let reparsed = parse(&text);
        prop_assert!(reparsed.is_ok(), "stringify gave unparsable {text:?}");
        let again = stringify(&reparsed.unwrap_or(Value::Null));
        prop_assert_eq!(again, text);
    }

    #[test]
    fn admitted_values_round_trip_exactly(v in value()) {
        if admit(&v).is_ok() {
            let back = parse(&stringify(&v));
            prop_assert_eq!(back.ok(), Some(v));
        }
    }
}
