//! JSON written by hand, for the few hot bodies whose shape is fixed (a page of rows): the same
//! bytes serde_json writes, without a serializer call per key and per value. Through serde, each
//! field costs a few hundred instructions (the key escaped again, a buffer check per piece); here
//! a key is a literal copied with its neighbours and a value is checked once and copied.
//!
//! Every writer built on these keeps a test that compares its bytes with serde_json's for the
//! same value, any text included.

use chrono::NaiveDateTime;

/// Appends `s` as a JSON string, quoted and escaped exactly as serde_json escapes it.
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    // Whole-string check without an early exit, so that it compiles to a vector loop.
    let plain = s.bytes().fold(true, |plain, b| {
        plain & (b >= 0x20 && b != b'"' && b != b'\\')
    });
    if plain {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Rare (a quote, a backslash, a control character): serde_json's own escaping.
        let _ = serde_json::to_writer(&mut *out, s); // a str into a Vec cannot fail
    }
}

/// Appends `n` as a JSON number.
pub fn push_int(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends `t` as a JSON string in the API's format ([`crate::time`]: RFC 3339, `Z`, six digits).
pub fn push_time(out: &mut Vec<u8>, t: &NaiveDateTime) {
    let mut buf = [0; crate::time::RFC3339_LEN];
    out.push(b'"');
    match crate::time::write_rfc3339(t, &mut buf) {
        Some(text) => out.extend_from_slice(text.as_bytes()),
        None => out.extend_from_slice(crate::time::slow_format(t).as_bytes()),
    }
    out.push(b'"');
}

/// True when `stored` is a JSON object with at least one member that can be spliced into a
/// larger one (see [`open_with_id`]): what a module writes once and keeps beside a row (a post's
/// or a transaction's fields as the API shows them). Anything else (only a hand edit of the
/// column could store it) is to be written from the row's columns instead.
pub fn is_spliceable(stored: &str) -> bool {
    stored.len() > 2 && stored.starts_with('{') && stored.ends_with('}')
}

/// Appends `{"id":ID,` and the members of `stored` (a [spliceable](is_spliceable) object),
/// leaving the object open for more members or its closing `}`.
pub fn open_with_id(out: &mut Vec<u8>, id: i64, stored: &str) {
    out.extend_from_slice(b"{\"id\":");
    push_int(out, id);
    out.push(b',');
    let members = stored
        .get(1..stored.len().saturating_sub(1))
        .unwrap_or_default();
    out.extend_from_slice(members.as_bytes());
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn as_serde<T: serde::Serialize + ?Sized>(value: &T) -> Vec<u8> {
        serde_json::to_vec(value).unwrap()
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let every_ascii: String = (0u8..=0x7f).map(char::from).collect();
        for s in [
            "",
            "plain",
            "quote \" and backslash \\",
            "tab\tnew line\nreturn\rform feed\u{c}backspace\u{8}",
            "nul \0 and \u{1f} and \u{7f}",
            "é ü 漢字 🎉 and / slash",
            every_ascii.as_str(),
        ] {
            let mut out = b"x".to_vec();
            push_str(&mut out, s);
            assert_eq!(out[1..], as_serde(s)[..], "{s:?}");
        }
    }

    #[test]
    fn numbers_and_times_are_written_as_serde_json_writes_them() {
        for n in [0, 7, -1, 1_000_000, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            push_int(&mut out, n);
            assert_eq!(out, as_serde(&n));
        }
        for text in [
            "2026-11-21T15:27:40.254637",
            "2026-01-01T00:00:00",
            "0001-02-03T04:05:06.000007",
            "+12345-01-01T00:00:00",
            "2016-12-31T23:59:60.5", // a leap second
        ] {
            let t: NaiveDateTime = text.parse().unwrap();
            let mut out = Vec::new();
            push_time(&mut out, &t);
            assert_eq!(out, as_serde(&crate::Timestamp(t)), "{text}");
        }
    }

    #[test]
    fn a_stored_object_is_spliced_after_its_id() {
        assert!(is_spliceable(r#"{"title":"x"}"#));
        for bad in ["", "{}", "{", "}", "[1]", r#""x""#, "null", r#" {"a":1}"#] {
            assert!(!is_spliceable(bad), "{bad:?}");
        }
        let mut out = Vec::new();
        open_with_id(&mut out, -7, r#"{"a":null,"b":[1,{"c":"}"}]}"#);
        out.push(b'}');
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"id": -7, "a": null, "b": [1, {"c": "}"}]})
        );
    }
}
