//! Twilio's `X-Twilio-Signature`, accepted as Twilio's own validator accepts it (twilio-python
//! 9.13.0, `twilio/request_validator.py`, `RequestValidator.validate`):
//!
//! - the signed string is the URL Twilio called, then every distinct form field as name and value,
//!   sorted by name then value (a JSON body signs the URL alone, and the SHA-256 of the body must be
//!   the URL's `bodySHA256` query value);
//! - the URL with and without the scheme's default port (`:443`, `:80`): Twilio signs either;
//! - keyed by the auth token with HMAC-SHA1, or, when the request carries
//!   `X-Twilio-Webhooks-Signature-Settings: key=<SharedKey id>,algorithm=<algorithm>`, by that
//!   SharedKey's secret with the algorithm named (`HMAC_SHA1` or `HMAC_SHA256`).
//!
//! One difference: the SDK also drops a port that is not the default one; here an explicit
//! non-default port of `PUBLIC_BASE_URL` stays, since Twilio calls the URL it was given.

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use sha2::Digest as _;

use super::{BASE64, HmacSha1, HmacSha256};

/// The header naming the key and algorithm of a signature made with a SharedKey.
pub const SIGNATURE_SETTINGS_HEADER: &str = "x-twilio-webhooks-signature-settings";

/// The hash of a Twilio signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TwilioAlgorithm {
    HmacSha1,
    HmacSha256,
}

impl TwilioAlgorithm {
    /// `HMAC_SHA1` or `HMAC_SHA256`, in any case (as the SDK reads it); `None` for another.
    pub fn parse(name: &str) -> Option<Self> {
        if name.eq_ignore_ascii_case("HMAC_SHA1") {
            Some(TwilioAlgorithm::HmacSha1)
        } else if name.eq_ignore_ascii_case("HMAC_SHA256") {
            Some(TwilioAlgorithm::HmacSha256)
        } else {
            None
        }
    }
}

/// What `X-Twilio-Webhooks-Signature-Settings` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignatureSettings<'a> {
    /// The SharedKey's id (`key=`).
    pub key: Option<&'a str>,
    /// The algorithm (`algorithm=`; `HMAC_SHA1` when the header names none); `None` for one this
    /// validator does not know, which fails validation as in the SDK.
    pub algorithm: Option<TwilioAlgorithm>,
}

/// Reads `key=<id>,algorithm=<algorithm>`: comma-separated `name=value` parts, the first
/// non-empty value of each name, spaces around names and values ignored.
pub fn signature_settings(header: &str) -> SignatureSettings<'_> {
    let value = |wanted: &str| {
        header.split(',').find_map(|part| {
            let (name, value) = part.split_once('=')?;
            let value = value.trim();
            (name.trim() == wanted && !value.is_empty()).then_some(value)
        })
    };
    SignatureSettings {
        key: value("key"),
        algorithm: value("algorithm")
            .map_or(Some(TwilioAlgorithm::HmacSha1), TwilioAlgorithm::parse),
    }
}

/// The body of a callback.
#[derive(Debug, Clone, Copy)]
pub enum TwilioBody<'a> {
    /// Form fields, in the order received (repeated names included).
    Form(&'a [(String, String)]),
    /// A JSON body, as received.
    Json(&'a [u8]),
}

/// A Twilio status callback as received.
#[derive(Debug, Clone)]
pub struct TwilioCallback {
    /// The path and query Twilio called.
    pub path_and_query: String,
    pub body: TwilioPayload,
    /// `X-Twilio-Signature`.
    pub signature: Option<String>,
    /// `X-Twilio-Webhooks-Signature-Settings`.
    pub signature_settings: Option<String>,
}

/// The body of a Twilio callback: form fields in order, or a JSON body as received.
#[derive(Debug, Clone)]
pub enum TwilioPayload {
    Form(Vec<(String, String)>),
    Json(Vec<u8>),
}

/// A callback as received, with the address the service is reached at.
#[derive(Debug, Clone, Copy)]
pub struct TwilioRequest<'a> {
    /// `PUBLIC_BASE_URL`, without a trailing `/`.
    pub base: Option<&'a str>,
    /// The path and query as called.
    pub path_and_query: &'a str,
    pub body: TwilioBody<'a>,
    /// `X-Twilio-Signature`.
    pub signature: Option<&'a str>,
    /// `X-Twilio-Webhooks-Signature-Settings`.
    pub signature_settings: Option<&'a str>,
}

/// The secrets a callback may be signed with (no `Debug`: they would show).
#[derive(Clone, Copy)]
pub struct TwilioKeys<'a> {
    /// `TWILIO_AUTH_TOKEN`.
    pub auth_token: Option<&'a str>,
    /// `TWILIO_WEBHOOK_SHARED_KEYS`: SharedKey ids and their secrets.
    pub shared_keys: &'a [(String, String)],
}

/// Why a callback was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TwilioRefusal {
    /// The setting that would verify it is not set.
    NotConfigured(&'static str),
    /// No signature, another key or algorithm, or a signature that does not match.
    BadSignature,
}

/// Checks a callback: the key its headers call for (the auth token, or the SharedKey named by
/// `X-Twilio-Webhooks-Signature-Settings`), then the signature over one of the URL's forms and the
/// body. A missing setting is named before the signature is looked at.
pub fn twilio_verify(
    keys: TwilioKeys<'_>,
    request: &TwilioRequest<'_>,
) -> Result<(), TwilioRefusal> {
    let settings = request
        .signature_settings
        .map(str::trim)
        .filter(|header| !header.is_empty())
        .map(signature_settings);
    let (secret, algorithm) = match settings {
        None => (
            keys.auth_token
                .ok_or(TwilioRefusal::NotConfigured("TWILIO_AUTH_TOKEN"))?,
            Some(TwilioAlgorithm::HmacSha1),
        ),
        Some(settings) => {
            if keys.shared_keys.is_empty() {
                return Err(TwilioRefusal::NotConfigured("TWILIO_WEBHOOK_SHARED_KEYS"));
            }
            let secret = keys
                .shared_keys
                .iter()
                .find(|(id, _)| Some(id.as_str()) == settings.key)
                .map(|(_, secret)| secret.as_str())
                .ok_or(TwilioRefusal::BadSignature)?;
            (secret, settings.algorithm)
        }
    };
    let base = request
        .base
        .ok_or(TwilioRefusal::NotConfigured("PUBLIC_BASE_URL"))?;
    let (Some(algorithm), Some(signature)) = (algorithm, request.signature) else {
        return Err(TwilioRefusal::BadSignature);
    };
    let urls = twilio_urls(base, request.path_and_query);
    if twilio_valid(secret.as_bytes(), algorithm, &urls, request.body, signature) {
        Ok(())
    } else {
        Err(TwilioRefusal::BadSignature)
    }
}

/// The URLs a signature may cover for a request to `path_and_query`: `base` as configured, and
/// with the scheme's default port added (when it has no port) or removed (when it names that
/// port). A base with another port has one form.
pub fn twilio_urls(base: &str, path_and_query: &str) -> Vec<String> {
    let mut forms = vec![base.to_owned()];
    if let Some(other) = other_port_form(base) {
        forms.push(other);
    }
    forms
        .into_iter()
        .map(|form| format!("{form}{path_and_query}"))
        .collect()
}

/// The fields of a verified JSON body: its top-level strings, numbers and booleans, as text.
pub fn json_fields(raw: &[u8]) -> Result<Vec<(String, String)>, serde_json::Error> {
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(raw)?;
    Ok(object
        .into_iter()
        .filter_map(|(name, value)| match value {
            serde_json::Value::String(text) => Some((name, text)),
            serde_json::Value::Number(_) | serde_json::Value::Bool(_) => {
                Some((name, value.to_string()))
            }
            _ => None,
        })
        .collect())
}

/// `base` with its default port added or removed, or `None` when that does not apply.
fn other_port_form(base: &str) -> Option<String> {
    let (scheme, rest) = base.split_once("://")?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "https" => "443",
        "http" => "80",
        _ => return None,
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    // A port follows the last `:` after any user info and after an IPv6 literal's `]`.
    let host_start = authority.rfind('@').map_or(0, |at| at + 1);
    let after_literal = authority[host_start..]
        .rfind(']')
        .map_or(host_start, |bracket| host_start + bracket + 1);
    let prefix = &base[..scheme.len() + 3];
    match authority[after_literal..].find(':') {
        None => Some(format!("{prefix}{authority}:{default}{tail}")),
        Some(colon) => {
            let colon = after_literal + colon;
            (&authority[colon + 1..] == default)
                .then(|| format!("{prefix}{}{tail}", &authority[..colon]))
        }
    }
}

/// Whether `signature` (base64) is the HMAC, keyed by `key` with `algorithm`, over one of `urls`
/// followed by the body's fields: each distinct name and value pair, sorted, as name then value. A
/// JSON body has no fields; its SHA-256 (lower-case hex) must equal the query's `bodySHA256`.
/// Compared in constant time.
pub fn twilio_valid(
    key: &[u8],
    algorithm: TwilioAlgorithm,
    urls: &[String],
    body: TwilioBody<'_>,
    signature: &str,
) -> bool {
    let Ok(expected) = BASE64.decode(signature.trim()) else {
        return false;
    };
    let mut fields: Vec<(&str, &str)> = match body {
        TwilioBody::Form(params) => params
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect(),
        TwilioBody::Json(raw) => {
            let body_hash = urls.first().and_then(|url| query_value(url, "bodySHA256"));
            if !body_hash
                .is_some_and(|hash| same_bytes(hash.as_bytes(), sha256_hex(raw).as_bytes()))
            {
                return false;
            }
            Vec::new()
        }
    };
    fields.sort_unstable();
    fields.dedup();
    urls.iter().any(|url| match algorithm {
        TwilioAlgorithm::HmacSha1 => mac_matches::<HmacSha1>(key, url, &fields, &expected),
        TwilioAlgorithm::HmacSha256 => mac_matches::<HmacSha256>(key, url, &fields, &expected),
    })
}

fn mac_matches<M: Mac + KeyInit>(
    key: &[u8],
    url: &str,
    fields: &[(&str, &str)],
    expected: &[u8],
) -> bool {
    let Ok(mut mac) = <M as KeyInit>::new_from_slice(key) else {
        return false;
    };
    mac.update(url.as_bytes());
    for (name, value) in fields {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
    mac.verify_slice(expected).is_ok()
}

/// The first non-empty value of `name` in the URL's query, decoded.
fn query_value(url: &str, name: &str) -> Option<String> {
    let (_, query) = url.split_once('?')?;
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).ok()?;
    pairs
        .into_iter()
        .find(|(key, value)| key == name && !value.is_empty())
        .map(|(_, value)| value)
}

fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Equality that does not stop at the first difference.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests;
