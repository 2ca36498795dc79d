//! JWT bearer tokens: HS256, claims `sub` (the user id as a string), `iat`, `exp`, `jti`, and
//! `sv`, the user's session version when the token was issued. And the opaque tokens of refresh
//! and mail links: 32 random bytes, hex, stored only as their SHA-256.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub iat: i64,
    pub exp: i64,
    pub jti: String,
    /// The user's session version at issue; a token without it (issued before sessions had
    /// versions) reads as version 0.
    #[serde(default)]
    pub sv: i64,
}

/// What a valid access token says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub user_id: i64,
    pub session_version: i64,
}

/// Seconds a token is still taken after its `exp`, for clocks a little apart.
const LEEWAY_SECONDS: i64 = 5;

/// Signs and checks tokens with one secret.
#[derive(Clone)]
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    lifetime_seconds: i64,
    /// Shared by the clones: they hold the same secret.
    verified: Arc<VerifiedTokens>,
}

impl TokenKeys {
    pub fn new(secret: &[u8], lifetime_minutes: i64) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = LEEWAY_SECONDS.unsigned_abs();
        validation.set_required_spec_claims(&["exp", "sub", "iat"]);
        Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
            lifetime_seconds: lifetime_minutes.saturating_mul(60),
            verified: Arc::default(),
        }
    }

    /// A new token for `user_id` at `session_version`, valid for the configured lifetime from now.
    pub fn issue(
        &self,
        user_id: i64,
        session_version: i32,
    ) -> Result<String, jsonwebtoken::errors::Error> {
        let now = chrono::Utc::now().timestamp();
        let claims = Claims {
            sub: user_id.to_string(),
            iat: now,
            exp: now.saturating_add(self.lifetime_seconds),
            jti: uuid::Uuid::new_v4().to_string(),
            sv: i64::from(session_version),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
    }

    /// How long a token lives, in seconds.
    pub fn lifetime_seconds(&self) -> i64 {
        self.lifetime_seconds
    }

    /// The user id and session version of a valid, unexpired token signed with our key; `None`
    /// otherwise.
    pub fn verify(&self, token: &str) -> Option<Verified> {
        self.verify_at(token, chrono::Utc::now().timestamp())
    }

    /// [`Self::verify`] at the time `now` (Unix seconds) for a token verified before; the
    /// signature and claims of a new one are checked against the clock.
    fn verify_at(&self, token: &str, now: i64) -> Option<Verified> {
        if let Some((verified, exp)) = self.verified.get(token) {
            return (exp.saturating_add(LEEWAY_SECONDS) >= now).then_some(verified);
        }
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation).ok()?;
        let verified = Verified {
            user_id: data.claims.sub.parse().ok()?,
            session_version: data.claims.sv,
        };
        self.verified.insert(token, verified, data.claims.exp);
        Some(verified)
    }
}

/// Tokens that verified, with what they said and their `exp`: a client sends its token with
/// every request, and looking it up costs far less than its signature (HMAC-SHA256) and its two
/// base64 JSON documents. Only tokens that passed every check enter, by their whole text, and
/// each is checked for expiry again on every use (by [`TokenKeys::verify_at`]). The user's state
/// (active, session version) is not kept here: the caller reads it each time. Bounded: emptied
/// when full.
#[derive(Default)]
struct VerifiedTokens {
    tokens: Mutex<HashMap<Box<str>, (Verified, i64)>>,
}

impl VerifiedTokens {
    /// Tokens kept at most (about 300 bytes each).
    const CAPACITY: usize = 4096;

    /// What `token` said, and its `exp`, when it verified before.
    fn get(&self, token: &str) -> Option<(Verified, i64)> {
        let tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        tokens.get(token).copied()
    }

    fn insert(&self, token: &str, verified: Verified, exp: i64) {
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        if tokens.len() >= Self::CAPACITY {
            tokens.clear();
        }
        tokens.insert(token.into(), (verified, exp));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// The length of an opaque token: 32 random bytes in hex.
pub const OPAQUE_LEN: usize = 64;

/// A new opaque token (refresh token, mail link token) and the hash to store for it.
pub fn new_opaque() -> Result<(String, String), getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    let token = hex::encode(bytes);
    let hash = hash_opaque(&token);
    Ok((token, hash))
}

/// The stored form of an opaque token: its SHA-256, hex.
pub fn hash_opaque(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Whether `token` has the shape of an opaque token (64 lower-case hex digits): anything else
/// is refused before a look-up.
pub fn looks_opaque(token: &str) -> bool {
    token.len() == OPAQUE_LEN
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_tokens_verify_and_tampered_ones_do_not() {
        let keys = TokenKeys::new(b"0123456789abcdef0123456789abcdef", 30);
        let token = keys.issue(42, 3).unwrap_or_default();
        assert_eq!(
            keys.verify(&token),
            Some(Verified {
                user_id: 42,
                session_version: 3
            })
        );
        let other = TokenKeys::new(b"another-secret-another-secret-xx", 30);
        assert_eq!(other.verify(&token), None);
        let mut tampered = token.clone();
        tampered.pop();
        tampered.push(if token.ends_with('A') { 'B' } else { 'A' });
        assert_eq!(keys.verify(&tampered), None);
        assert_eq!(keys.verify("not-a-token"), None);
    }

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn sign(algorithm: Algorithm, claims: &serde_json::Value) -> String {
        jsonwebtoken::encode(
            &Header::new(algorithm),
            claims,
            &EncodingKey::from_secret(SECRET),
        )
        .unwrap_or_default()
    }

    fn fresh_claims() -> serde_json::Value {
        let now = chrono::Utc::now().timestamp();
        serde_json::json!({"sub": "1", "iat": now, "exp": now + 600, "jti": "j"})
    }

    #[test]
    fn only_hs256_is_accepted() {
        let keys = TokenKeys::new(SECRET, 30);
        let claims = fresh_claims();
        assert_eq!(
            keys.verify(&sign(Algorithm::HS256, &claims))
                .map(|v| v.user_id),
            Some(1)
        );
        // The same claims and the same secret under another HMAC algorithm.
        for other in [Algorithm::HS384, Algorithm::HS512] {
            let token = sign(other, &claims);
            assert!(!token.is_empty());
            assert_eq!(keys.verify(&token), None, "{other:?}");
        }
        // `alg: none`, with no signature and with a valid token's signature.
        let valid = sign(Algorithm::HS256, &claims);
        let mut parts = valid.split('.');
        let (_, payload, signature) = (parts.next(), parts.next(), parts.next());
        let (payload, signature) = (payload.unwrap_or(""), signature.unwrap_or(""));
        // {"alg":"none","typ":"JWT"} and {"alg":"None"}, base64url.
        for header in ["eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0", "eyJhbGciOiJOb25lIn0"] {
            assert_eq!(keys.verify(&format!("{header}.{payload}.")), None);
            assert_eq!(
                keys.verify(&format!("{header}.{payload}.{signature}")),
                None
            );
        }
    }

    #[test]
    fn exp_sub_and_iat_are_required() {
        let keys = TokenKeys::new(SECRET, 30);
        let complete = fresh_claims();
        assert_eq!(
            keys.verify(&sign(Algorithm::HS256, &complete)),
            Some(Verified {
                user_id: 1,
                session_version: 0
            }),
            "a token without sv reads as version 0"
        );
        for claim in ["exp", "sub", "iat"] {
            let mut claims = complete.clone();
            if let Some(map) = claims.as_object_mut() {
                map.remove(claim);
            }
            assert_eq!(
                keys.verify(&sign(Algorithm::HS256, &claims)),
                None,
                "without {claim}"
            );
        }
        // An exp that is not a number is no exp.
        let mut claims = complete.clone();
        claims["exp"] = serde_json::json!("never");
        assert_eq!(keys.verify(&sign(Algorithm::HS256, &claims)), None);
    }

    #[test]
    fn expired_tokens_are_refused() {
        let secret = b"0123456789abcdef0123456789abcdef";
        let keys = TokenKeys::new(secret, 30);
        let now = chrono::Utc::now().timestamp();
        let claims = Claims {
            sub: "1".into(),
            iat: now - 3600,
            exp: now - 60,
            jti: "x".into(),
            sv: 0,
        };
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(secret),
        )
        .unwrap_or_default();
        assert_eq!(keys.verify(&token), None);
    }

    #[test]
    fn a_verified_token_is_looked_up_again_until_it_expires() {
        let keys = TokenKeys::new(SECRET, 30);
        let now = chrono::Utc::now().timestamp();
        let exp = now + 600;
        let claims = serde_json::json!({"sub": "7", "iat": now, "exp": exp, "jti": "j", "sv": 2});
        let token = sign(Algorithm::HS256, &claims);
        let expected = Some(Verified {
            user_id: 7,
            session_version: 2,
        });
        assert_eq!(keys.verify_at(&token, now), expected);
        assert_eq!(keys.verified.len(), 1);
        // Served from the map (a clone shares it), up to exp and its leeway, and not after.
        let clone = keys.clone();
        assert_eq!(clone.verify_at(&token, exp + LEEWAY_SECONDS), expected);
        assert_eq!(clone.verify_at(&token, exp + LEEWAY_SECONDS + 1), None);
        // Tokens that fail never enter, and the map stays bounded.
        let mut tampered = token.clone();
        tampered.push('x');
        assert_eq!(keys.verify_at(&tampered, now), None);
        assert_eq!(keys.verified.len(), 1);
        for user in 0..VerifiedTokens::CAPACITY + 10 {
            let token = keys.issue(user as i64, 0).unwrap_or_default();
            assert!(keys.verify(&token).is_some());
        }
        assert!(keys.verified.len() <= VerifiedTokens::CAPACITY);
        // Another secret's keys do not know this one's tokens.
        let other = TokenKeys::new(b"another-secret-another-secret-xx", 30);
        assert_eq!(other.verify(&token), None);
    }

    #[test]
    fn opaque_tokens_are_random_hex_stored_as_their_sha256() {
        let (token, hash) = new_opaque().unwrap_or_default();
        let (other, _) = new_opaque().unwrap_or_default();
        assert!(looks_opaque(&token) && looks_opaque(&other), "{token}");
        assert_ne!(token, other);
        assert_eq!(hash, hash_opaque(&token));
        assert_ne!(hash, token);
        assert_eq!(
            hash_opaque("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        for bad in [
            "",
            "abc",
            &token.to_uppercase(),
            &format!("{token}0"),
            &"g".repeat(64),
        ] {
            assert!(!looks_opaque(bad), "{bad}");
        }
        assert!(!looks_opaque(&format!("{}\0", &token[..63])));
    }
}
