//! Properties of `Stripe-Signature` verification over arbitrary headers, bodies and times.

use hmac::{KeyInit, Mac};
use proptest::prelude::*;
use proptest::test_runner::Config;

use super::{HmacSha256, SignatureError, TOLERANCE_SECONDS, verify};

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

fn sign(secret: &str, t: i64, body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).unwrap_or_else(|_| unreachable!());
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// Headers made of the pieces a real one has, in any order and amount, plus arbitrary text.
fn header_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("t=".to_owned()),
        Just("v1=".to_owned()),
        Just("v0=".to_owned()),
        Just(",".to_owned()),
        Just(" ".to_owned()),
        Just("=".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        "[0-9a-fA-F]{0,70}",
        any::<String>(),
    ];
    proptest::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
}

/// A timestamp and a `now` within the tolerance of it.
fn fresh_time() -> impl Strategy<Value = (i64, i64)> {
    (
        (i64::MIN + TOLERANCE_SECONDS)..=(i64::MAX - TOLERANCE_SECONDS),
        -TOLERANCE_SECONDS..=TOLERANCE_SECONDS,
    )
        .prop_map(|(t, skew)| (t, t + skew))
}

/// A byte other than `old`, never one that only changes the case of a letter (hex is read in
/// either case).
fn other_char(old: u8, new: char) -> char {
    if (new as u32) < 128 && (new as u8).eq_ignore_ascii_case(&old) {
        if old == b'~' { '!' } else { '~' }
    } else {
        new
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_headers_never_verify(
        header in header_like(),
        body in proptest::collection::vec(any::<u8>(), 0..64),
        now in any::<i64>(),
    ) {
        prop_assert!(verify("whsec_test", Some(&header), &body, now).is_err());
    }

    #[test]
    fn a_signed_body_verifies_within_the_window(
        secret in ".{0,40}",
        body in proptest::collection::vec(any::<u8>(), 0..2048),
        (t, now) in fresh_time(),
        others in proptest::collection::vec("[0-9a-f]{64}", 0..3),
        first in any::<bool>(),
    ) {
        let good = sign(&secret, t, &body);
        let mut items: Vec<String> = others.iter().map(|o| format!("v1={o}")).collect();
        items.push("v0=0123abcd".to_owned());
        if first {
            items.insert(0, format!("v1={good}"));
        } else {
            items.push(format!("v1={good}"));
        }
        let header = format!("t={t},{}", items.join(","));
        prop_assert_eq!(verify(&secret, Some(&header), &body, now), Ok(()));
    }

    #[test]
    fn any_changed_body_byte_is_a_mismatch(
        body in proptest::collection::vec(any::<u8>(), 1..1024),
        (t, now) in fresh_time(),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let header = format!("t={t},v1={}", sign("whsec_test", t, &body));
        let mut changed = body.clone();
        changed[at.index(body.len())] ^= flip;
        prop_assert_eq!(
            verify("whsec_test", Some(&header), &changed, now),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn any_changed_header_character_fails(
        body in proptest::collection::vec(any::<u8>(), 0..256),
        (t, now) in fresh_time(),
        at in any::<prop::sample::Index>(),
        new in any::<char>(),
    ) {
        let header = format!("t={t},v1={}", sign("whsec_test", t, &body));
        let i = at.index(header.len());
        let old = header.as_bytes()[i];
        let replacement = other_char(old, new);
        prop_assume!(replacement != old as char);
        let changed = format!("{}{replacement}{}", &header[..i], &header[i + 1..]);
        prop_assert!(verify("whsec_test", Some(&changed), &body, now).is_err(), "{changed}");
    }

    #[test]
    fn stale_timestamps_fail(
        body in proptest::collection::vec(any::<u8>(), 0..256),
        t in -4_000_000_000i64..4_000_000_000,
        away in (TOLERANCE_SECONDS + 1)..1_000_000_000,
        later in any::<bool>(),
    ) {
        let header = format!("t={t},v1={}", sign("whsec_test", t, &body));
        let now = if later { t + away } else { t - away };
        prop_assert_eq!(
            verify("whsec_test", Some(&header), &body, now),
            Err(SignatureError::Stale)
        );
    }
}
