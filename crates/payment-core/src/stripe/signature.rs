//! Stripe's webhook signatures: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, the
//! lower-case hex HMAC-SHA256 of `"<t>.<raw body>"` keyed by the whole webhook secret
//! (`whsec_` included, as UTF-8, not decoded).

use hmac::{Hmac, KeyInit, Mac};

type HmacSha256 = Hmac<sha2::Sha256>;

/// Stripe's tolerance for a signed event's timestamp.
pub const TOLERANCE_SECONDS: i64 = 300;

/// Why a signature was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureError {
    /// No `Stripe-Signature` header (or an empty one).
    Missing,
    /// The header has no integer `t`, or no `v1` signature.
    Malformed,
    /// The timestamp is more than [`TOLERANCE_SECONDS`] away from now.
    Stale,
    /// No `v1` signature matches the body.
    Mismatch,
}

/// Verifies `Stripe-Signature` (`t=<unix>,v1=<hex>[,v1=<hex>...][,v0=...]`) over the raw body:
/// HMAC-SHA256 keyed by the whole webhook secret (the `whsec_...` string as bytes) over
/// `"<t>.<raw body>"`, hex; any `v1` may match (several during a secret rotation; `v0` and other
/// schemes are ignored), compared in constant time; `|now - t| <= 300`.
pub fn verify(
    secret: &str,
    header: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), SignatureError> {
    let header = header
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .ok_or(SignatureError::Missing)?;
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for item in header.split(',') {
        let Some((key, value)) = item.split_once('=') else {
            continue;
        };
        match key.trim() {
            "t" if timestamp.is_none() => timestamp = Some(value.trim()),
            "v1" => signatures.push(value.trim()),
            _ => {}
        }
    }
    let timestamp = timestamp
        .and_then(|t| t.parse::<i64>().ok())
        .ok_or(SignatureError::Malformed)?;
    if signatures.is_empty() {
        return Err(SignatureError::Malformed);
    }
    let mut mac =
        HmacSha256::new_from_slice(secret.as_bytes()).map_err(|_| SignatureError::Mismatch)?;
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let matched = signatures.iter().any(|signature| {
        hex::decode(signature).is_ok_and(|tag| mac.clone().verify_slice(&tag).is_ok())
    });
    if !matched {
        return Err(SignatureError::Mismatch);
    }
    if now.abs_diff(timestamp) > TOLERANCE_SECONDS.unsigned_abs() {
        return Err(SignatureError::Stale);
    }
    Ok(())
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector `provider_sim::signing` is checked against (computed with stripe-python).
    const BODY: &[u8] = br#"{"id":"evt_1","object":"event","type":"checkout.session.completed"}"#;
    const SECRET: &str = "whsec_test123";
    const T: i64 = 1_700_000_000;
    const V1: &str = "da18c53571f980bec817a29170d51086c8feeb6daaea5ec460593480521e0751";

    fn sign(secret: &str, t: i64, body: &[u8]) -> String {
        let mut mac =
            HmacSha256::new_from_slice(secret.as_bytes()).unwrap_or_else(|_| unreachable!());
        mac.update(format!("{t}.").as_bytes());
        mac.update(body);
        hex::encode(mac.finalize().into_bytes())
    }

    #[test]
    fn stripe_known_answer_vector() {
        assert_eq!(sign(SECRET, T, BODY), V1);
        let header = format!("t={T},v1={V1}");
        assert_eq!(verify(SECRET, Some(&header), BODY, T), Ok(()));
        assert_eq!(verify(SECRET, Some(&header), BODY, T + 300), Ok(()));
        assert_eq!(verify(SECRET, Some(&header), BODY, T - 300), Ok(()));
    }

    #[test]
    fn any_v1_may_match_and_other_schemes_are_ignored() {
        let other = sign("whsec_old", T, BODY);
        for header in [
            format!("t={T},v1={other},v1={V1}"),
            format!("t={T},v1={V1},v1={other}"),
            format!("t={T},v0=deadbeef,v1={V1}"),
            format!("v1={V1},t={T}"),
            format!("t={T}, v1=nothex, v1={}", V1.to_uppercase()),
        ] {
            assert_eq!(verify(SECRET, Some(&header), BODY, T), Ok(()), "{header}");
        }
        let header = format!("t={T},v1={other},v0={V1}");
        assert_eq!(
            verify(SECRET, Some(&header), BODY, T),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn stale_or_future_timestamps_are_refused() {
        let header = format!("t={T},v1={V1}");
        assert_eq!(
            verify(SECRET, Some(&header), BODY, T + 301),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(SECRET, Some(&header), BODY, T - 301),
            Err(SignatureError::Stale)
        );
        // The vector itself is long past.
        let now = chrono::Utc::now().timestamp();
        assert_eq!(
            verify(SECRET, Some(&header), BODY, now),
            Err(SignatureError::Stale)
        );
    }

    #[test]
    fn a_missing_header_is_missing() {
        assert_eq!(verify(SECRET, None, BODY, T), Err(SignatureError::Missing));
        assert_eq!(
            verify(SECRET, Some(""), BODY, T),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(SECRET, Some("  "), BODY, T),
            Err(SignatureError::Missing)
        );
    }

    #[test]
    fn malformed_headers_are_malformed() {
        for header in [
            format!("v1={V1}"),
            format!("t=soon,v1={V1}"),
            format!("t={T}"),
            format!("t={T},v0={V1}"),
            "garbage".to_owned(),
            format!("{T},{V1}"),
        ] {
            assert_eq!(
                verify(SECRET, Some(&header), BODY, T),
                Err(SignatureError::Malformed),
                "{header}"
            );
        }
    }

    #[test]
    fn tampering_is_a_mismatch() {
        let header = format!("t={T},v1={V1}");
        let tampered = br#"{"id":"evt_1","object":"event","type":"checkout.session.expired"}"#;
        assert_eq!(
            verify(SECRET, Some(&header), tampered, T),
            Err(SignatureError::Mismatch)
        );
        // Re-serialised JSON (a space added) is not the raw body.
        let spaced = br#"{"id": "evt_1","object":"event","type":"checkout.session.completed"}"#;
        assert_eq!(
            verify(SECRET, Some(&header), spaced, T),
            Err(SignatureError::Mismatch)
        );
        // Another timestamp, the same signature.
        let moved = format!("t={},v1={V1}", T + 1);
        assert_eq!(
            verify(SECRET, Some(&moved), BODY, T),
            Err(SignatureError::Mismatch)
        );
        // The wrong secret, and the secret without its prefix.
        assert_eq!(
            verify("whsec_other", Some(&header), BODY, T),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify("test123", Some(&header), BODY, T),
            Err(SignatureError::Mismatch)
        );
        // A truncated signature.
        let short = format!("t={T},v1={}", &V1[..32]);
        assert_eq!(
            verify(SECRET, Some(&short), BODY, T),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn a_fresh_signature_verifies_now() {
        let now = chrono::Utc::now().timestamp();
        let body = br#"{"id":"evt_2","object":"event"}"#;
        let header = format!("t={now},v1={}", sign("whsec_provider_sim", now, body));
        assert_eq!(
            verify("whsec_provider_sim", Some(&header), body, now),
            Ok(())
        );
    }
}
