//! Signatures of the providers' delivery webhooks, checked before anything is read from them.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, KeyInit, Mac};

type HmacSha1 = Hmac<sha1::Sha1>;
type HmacSha256 = Hmac<sha2::Sha256>;

mod twilio;

pub use twilio::{
    SIGNATURE_SETTINGS_HEADER, SignatureSettings, TwilioAlgorithm, TwilioBody, TwilioCallback,
    TwilioKeys, TwilioPayload, TwilioRefusal, TwilioRequest, json_fields, signature_settings,
    twilio_urls, twilio_valid, twilio_verify,
};

/// How far a Svix timestamp may be from now (5 minutes, Svix's own tolerance).
pub const SVIX_TOLERANCE_SECONDS: i64 = 300;

/// The key of a `whsec_<base64>` secret.
pub fn svix_key(secret: &str) -> Option<Vec<u8>> {
    let encoded = secret.strip_prefix("whsec_")?;
    BASE64.decode(encoded).ok().filter(|key| !key.is_empty())
}

/// Why a Svix-signed delivery was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SvixRefusal {
    MissingHeaders,
    Stale,
    BadSignature,
}

/// Checks Svix's headers: `svix-timestamp` within the tolerance of `now`, and one of the
/// space-separated `v1,<base64>` values of `svix-signature` equal (in constant time) to HMAC-SHA256
/// keyed by the secret's key over `"{svix-id}.{svix-timestamp}.{body}"`.
pub fn svix_verify(
    key: &[u8],
    id: Option<&str>,
    timestamp: Option<&str>,
    signatures: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), SvixRefusal> {
    let (Some(id), Some(timestamp), Some(signatures)) = (id, timestamp, signatures) else {
        return Err(SvixRefusal::MissingHeaders);
    };
    let sent_at: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| SvixRefusal::BadSignature)?;
    if now.abs_diff(sent_at) > SVIX_TOLERANCE_SECONDS.unsigned_abs() {
        return Err(SvixRefusal::Stale);
    }
    let Ok(mut mac) = HmacSha256::new_from_slice(key) else {
        return Err(SvixRefusal::BadSignature);
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.trim().as_bytes());
    mac.update(b".");
    mac.update(body);
    let valid = signatures
        .split_whitespace()
        .filter_map(|s| s.strip_prefix("v1,"))
        .filter_map(|s| BASE64.decode(s).ok())
        .any(|candidate| mac.clone().verify_slice(&candidate).is_ok());
    if valid {
        Ok(())
    } else {
        Err(SvixRefusal::BadSignature)
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svix_checks_time_and_any_v1_value() {
        let key = b"0123456789abcdef".to_vec();
        let secret = format!("whsec_{}", BASE64.encode(&key));
        assert_eq!(svix_key(&secret), Some(key.clone()));
        assert_eq!(svix_key("sk_nope"), None);
        let body = br#"{"type":"email.delivered"}"#;
        let mut mac = HmacSha256::new_from_slice(&key).unwrap_or_else(|_| unreachable!());
        mac.update(b"msg_1.1700000000.");
        mac.update(body);
        let good = format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()));
        let both = format!("v1,AAAA {good}");
        let check = |sig: &str, now: i64| {
            svix_verify(
                &key,
                Some("msg_1"),
                Some("1700000000"),
                Some(sig),
                body,
                now,
            )
        };
        assert_eq!(check(&good, 1_700_000_100), Ok(()));
        assert_eq!(check(&both, 1_700_000_100), Ok(()));
        assert_eq!(check(&good, 1_700_000_301), Err(SvixRefusal::Stale));
        assert_eq!(
            check("v1,AAAA", 1_700_000_000),
            Err(SvixRefusal::BadSignature)
        );
        assert_eq!(
            svix_verify(&key, None, Some("1"), Some(&good), body, 1),
            Err(SvixRefusal::MissingHeaders)
        );
    }

    #[test]
    fn svix_timestamps_at_the_ends_of_the_range_are_stale() {
        // `now - sent_at` overflowed (a panic in debug builds) for these.
        for sent_at in ["-9223372036854775808", "9223372036854775807"] {
            assert_eq!(
                svix_verify(
                    b"k",
                    Some("m"),
                    Some(sent_at),
                    Some("v1,AAAA"),
                    b"",
                    1_700_000_000
                ),
                Err(SvixRefusal::Stale)
            );
        }
    }
}
