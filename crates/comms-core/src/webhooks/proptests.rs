//! Properties of the Twilio and Svix (Resend) webhook signature checks over arbitrary headers,
//! form fields and bodies.

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use proptest::prelude::*;
use proptest::test_runner::Config;

use super::{
    BASE64, HmacSha1, HmacSha256, SVIX_TOLERANCE_SECONDS, SvixRefusal, TwilioAlgorithm, TwilioBody,
    TwilioKeys, TwilioRefusal, TwilioRequest, svix_key, svix_verify, twilio_verify,
};

/// `twilio_valid` with the auth token's algorithm over one URL.
fn twilio_valid(token: &str, url: &str, params: &[(String, String)], header: &str) -> bool {
    super::twilio_valid(
        token.as_bytes(),
        TwilioAlgorithm::HmacSha1,
        &[url.to_owned()],
        TwilioBody::Form(params),
        header,
    )
}

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

fn twilio_sign(token: &str, url: &str, params: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort();
    sorted.dedup();
    let mut data = url.to_owned();
    for (name, value) in sorted {
        data.push_str(name);
        data.push_str(value);
    }
    let mut mac = HmacSha1::new_from_slice(token.as_bytes()).unwrap_or_else(|_| unreachable!());
    mac.update(data.as_bytes());
    BASE64.encode(mac.finalize().into_bytes())
}

fn svix_sign(key: &[u8], id: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

/// Form fields as Twilio sends them, repeated names included.
fn params() -> impl Strategy<Value = Vec<(String, String)>> {
    proptest::collection::vec(("[A-Za-z]{1,12}", ".{0,24}"), 0..8)
}

/// Text made of the pieces a header has, plus arbitrary text.
fn header_like(pieces: &'static [&'static str]) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        proptest::sample::select(pieces).prop_map(str::to_owned),
        "[A-Za-z0-9+/=]{0,48}",
        any::<i64>().prop_map(|n| n.to_string()),
        any::<String>(),
    ];
    proptest::collection::vec(piece, 0..10).prop_map(|pieces| pieces.concat())
}

/// `s` with the character at byte `i` replaced by `new`, or `None` when that is no change.
fn replaced(s: &str, at: prop::sample::Index, new: char) -> Option<String> {
    let starts: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
    let i = *starts.get(at.index(starts.len().max(1)))?;
    let old = s[i..].chars().next()?;
    (old != new).then(|| format!("{}{new}{}", &s[..i], &s[i + old.len_utf8()..]))
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn twilio_arbitrary_headers_never_verify(
        header in header_like(&["=", "+", "/", " "]),
        params in params(),
    ) {
        prop_assert!(!twilio_valid("token", "https://k.example/t", &params, &header));
    }

    #[test]
    fn twilio_signed_fields_verify_in_any_order(
        token in ".{1,40}",
        url in "https?://[a-z.]{1,20}/[ -~]{0,40}",
        params in params(),
        shuffle in any::<prop::sample::Index>(),
    ) {
        let header = twilio_sign(&token, &url, &params);
        let mut shuffled = params.clone();
        if !shuffled.is_empty() {
            let n = shuffled.len();
            shuffled.rotate_left(shuffle.index(n));
            shuffled.reverse();
        }
        prop_assert!(twilio_valid(&token, &url, &shuffled, &header));
        let padded = format!(" {header} ");
        prop_assert!(twilio_valid(&token, &url, &shuffled, &padded));
    }

    #[test]
    fn twilio_any_changed_character_fails(
        url in "https://[a-z]{1,12}\\.example/[a-z/]{0,20}",
        params in params(),
        which in 0usize..3,
        at in any::<prop::sample::Index>(),
        field in any::<prop::sample::Index>(),
        new in any::<char>(),
    ) {
        let header = twilio_sign("token", &url, &params);
        let (mut url2, mut params2, mut header2) = (url.clone(), params.clone(), header.clone());
        let changed = match which {
            0 => replaced(&url, at, new).map(|u| url2 = u),
            1 if !params.is_empty() => {
                let k = field.index(params.len());
                // The value, or the name when the value is empty.
                if params[k].1.is_empty() {
                    replaced(&params[k].0, at, new).map(|n| params2[k].0 = n)
                } else {
                    replaced(&params[k].1, at, new).map(|v| params2[k].1 = v)
                }
            }
            _ => replaced(&header, at, new).map(|h| header2 = h),
        };
        prop_assume!(changed.is_some());
        prop_assert!(!twilio_valid("token", &url2, &params2, &header2));
    }

    #[test]
    fn twilio_accepts_the_default_port_either_way_and_no_other(
        https in any::<bool>(),
        host in "[a-z]{1,12}\\.example",
        explicit in any::<bool>(),
        signed_with_port in any::<bool>(),
        path in "/[a-z/]{0,20}(\\?[a-z=&]{0,12})?",
        other_port in 1u16..,
        params in params(),
    ) {
        let (scheme, default) = if https { ("https", 443) } else { ("http", 80) };
        let port = |with: bool| if with { format!(":{default}") } else { String::new() };
        let base = format!("{scheme}://{host}{}", port(explicit));
        let signed_over = format!("{scheme}://{host}{}{path}", port(signed_with_port));
        let keys = TwilioKeys { auth_token: Some("token"), shared_keys: &[] };
        let header = twilio_sign("token", &signed_over, &params);
        let request = TwilioRequest {
            base: Some(&base),
            path_and_query: &path,
            body: TwilioBody::Form(&params),
            signature: Some(&header),
            signature_settings: None,
        };
        prop_assert_eq!(twilio_verify(keys, &request), Ok(()));
        prop_assume!(other_port != default);
        let elsewhere = format!("{scheme}://{host}:{other_port}{path}");
        let header = twilio_sign("token", &elsewhere, &params);
        let request = TwilioRequest { signature: Some(&header), ..request };
        prop_assert_eq!(twilio_verify(keys, &request), Err(TwilioRefusal::BadSignature));
    }

    #[test]
    fn svix_arbitrary_headers_never_verify(
        id in header_like(&["msg_", "."]),
        timestamp in header_like(&["-", "+", " ", "9223372036854775807", "-9223372036854775808"]),
        signatures in header_like(&["v1,", "v1", ",", " ", "v2,"]),
        body in proptest::collection::vec(any::<u8>(), 0..64),
        now in any::<i64>(),
    ) {
        let refused = svix_verify(
            b"0123456789abcdef",
            Some(&id),
            Some(&timestamp),
            Some(&signatures),
            &body,
            now,
        );
        prop_assert!(refused.is_err());
    }

    #[test]
    fn svix_signed_bodies_verify_among_other_signatures(
        key in proptest::collection::vec(any::<u8>(), 1..64),
        id in "msg_[A-Za-z0-9]{1,30}",
        sent_at in -1_000_000_000_000i64..1_000_000_000_000,
        skew in -SVIX_TOLERANCE_SECONDS..=SVIX_TOLERANCE_SECONDS,
        body in proptest::collection::vec(any::<u8>(), 0..2048),
        others in proptest::collection::vec("v1,[A-Za-z0-9+/]{43}=", 0..3),
        position in any::<prop::sample::Index>(),
    ) {
        let timestamp = sent_at.to_string();
        let good = svix_sign(&key, &id, &timestamp, &body);
        let mut entries = others;
        let at = position.index(entries.len() + 1);
        entries.insert(at, good);
        let header = entries.join(" ");
        let secret = format!("whsec_{}", BASE64.encode(&key));
        prop_assert_eq!(svix_key(&secret), Some(key.clone()));
        prop_assert_eq!(
            svix_verify(&key, Some(&id), Some(&timestamp), Some(&header), &body, sent_at + skew),
            Ok(())
        );
    }

    #[test]
    fn svix_any_changed_byte_fails(
        id in "msg_[A-Za-z0-9]{1,30}",
        sent_at in 0i64..4_000_000_000,
        body in proptest::collection::vec(any::<u8>(), 1..512),
        which in 0usize..4,
        at in any::<prop::sample::Index>(),
        new in any::<char>(),
        flip in 1u8..=255,
    ) {
        let key = b"0123456789abcdef";
        let timestamp = sent_at.to_string();
        let signature = svix_sign(key, &id, &timestamp, &body);
        let (mut id2, mut ts2, mut sig2, mut body2) =
            (id.clone(), timestamp.clone(), signature.clone(), body.clone());
        let changed = match which {
            0 => replaced(&id, at, new).map(|v| id2 = v),
            1 => replaced(&timestamp, at, new).map(|v| ts2 = v),
            2 => replaced(&signature, at, new).map(|v| sig2 = v),
            _ => {
                body2[at.index(body.len())] ^= flip;
                Some(())
            }
        };
        prop_assume!(changed.is_some());
        let result = svix_verify(key, Some(&id2), Some(&ts2), Some(&sig2), &body2, sent_at);
        prop_assert!(result.is_err(), "{id2} {ts2} {sig2}");
    }

    #[test]
    fn svix_stale_timestamps_fail(
        sent_at in -4_000_000_000i64..4_000_000_000,
        away in (SVIX_TOLERANCE_SECONDS + 1)..1_000_000_000,
        later in any::<bool>(),
    ) {
        let key = b"0123456789abcdef";
        let timestamp = sent_at.to_string();
        let signature = svix_sign(key, "msg_1", &timestamp, b"{}");
        let now = if later { sent_at + away } else { sent_at - away };
        prop_assert_eq!(
            svix_verify(key, Some("msg_1"), Some(&timestamp), Some(&signature), b"{}", now),
            Err(SvixRefusal::Stale)
        );
    }
}
