//! Identifiers in each provider's format.

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn random_bytes() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes
}

/// A Stripe-style id: `prefix` then 24 base62 characters, e.g. `cus_` + `Nf3k...`.
pub fn stripe(prefix: &str) -> String {
    let tail: String = random_bytes()
        .iter()
        .take(24)
        .map(|b| BASE62[usize::from(*b) % BASE62.len()] as char)
        .collect();
    format!("{prefix}{tail}")
}

/// A Twilio sid: two letters then 32 lower-case hex digits, e.g. `SM` + `0f3a...`.
pub fn twilio(prefix: &str) -> String {
    format!("{prefix}{}", hex::encode(&random_bytes()[..16]))
}

/// A UUID v4 string (Resend email ids, Cohere ids).
pub fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats() {
        let id = super::stripe("cs_test_");
        assert_eq!(id.len(), 8 + 24);
        assert!(id.starts_with("cs_test_"));
        let sid = super::twilio("SM");
        assert_eq!(sid.len(), 34);
        assert!(
            sid[2..]
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }
}
