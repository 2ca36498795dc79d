//! Properties of form decoding: arbitrary bytes never panic, and what an encoder writes reads back.

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value};

use super::{nested, pairs};

/// `cases` per property, or `PROPTEST_CASES` when set; nothing is written into the source tree
/// (a failure prints its input).
fn config(cases: u32) -> Config {
    let default = Config::default();
    Config {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            default.cases
        } else {
            cases
        },
        failure_persistence: None,
        ..default
    }
}

/// Bodies built from the characters that mean something in a form, escapes (good and broken),
/// bracketed keys and arbitrary bytes.
fn form_like() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        proptest::sample::select(vec![
            "&",
            "=",
            "+",
            "%",
            "%2",
            "%25",
            "%zz",
            "%C3%A9",
            "%FF",
            "[",
            "]",
            "[0]",
            "[]",
            "a",
            "0",
            "line_items",
            "metadata[",
            "][",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        proptest::collection::vec(any::<u8>(), 0..12),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

/// Text with the characters a form encoder must escape, and anything else.
fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[+%&= a-zé😀\u{0}\n]{0,10}", ".{0,10}", any::<String>()]
}

/// Every byte as `%XX`: what an encoder that escapes everything writes.
fn escape_all(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// A Stripe parameter value: strings, and non-empty objects and lists of them.
fn param() -> impl Strategy<Value = Value> {
    let leaf = text().prop_map(Value::String);
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_é]{1,8}", inner, 1..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// `value` as Stripe's clients write it: `key[child][0]=leaf`.
fn flatten(key: &str, value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                flatten(&format!("{key}[{k}]"), v, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                flatten(&format!("{key}[{i}]"), v, out);
            }
        }
        Value::String(s) => out.push((key.to_owned(), s.clone())),
        other => out.push((key.to_owned(), other.to_string())),
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bodies_never_panic(body in form_like()) {
        let flat = pairs(&body);
        let tree = nested(&body);
        // Nothing is read from nothing, and every pair lands under its name.
        prop_assert!(!flat.is_empty() || tree == Value::Object(Map::new()));
        if let Value::Object(map) = &tree {
            for (key, _) in &flat {
                let head = key.split('[').next().unwrap_or_default();
                prop_assert!(map.contains_key(head), "{key:?} in {tree}");
            }
        }
    }

    #[test]
    fn encoded_pairs_decode_to_themselves(
        fields in proptest::collection::vec((text(), text()), 0..8),
    ) {
        let encoded = serde_urlencoded::to_string(&fields)
            .unwrap_or_else(|e| panic!("encoding {fields:?}: {e}"));
        prop_assert_eq!(&pairs(encoded.as_bytes()), &fields);
        let escaped: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("{}={}", escape_all(k), escape_all(v)))
            .collect();
        prop_assert_eq!(&pairs(escaped.join("&").as_bytes()), &fields);
    }

    #[test]
    fn bracketed_parameters_nest_back_into_their_value(
        params in proptest::collection::btree_map("[a-z_é]{1,12}", param(), 0..5),
    ) {
        let mut fields = Vec::new();
        for (key, value) in &params {
            flatten(key, value, &mut fields);
        }
        let encoded = serde_urlencoded::to_string(&fields)
            .unwrap_or_else(|e| panic!("encoding {fields:?}: {e}"));
        let expected = Value::Object(params.into_iter().collect());
        prop_assert_eq!(nested(encoded.as_bytes()), expected);
    }
}
