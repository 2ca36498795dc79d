//! HTTP caching of the public reads (RFC 9110 and RFC 9111): every answer carries a strong
//! `ETag` (a 128-bit hash of its body, computed once when the body is made and kept with it in the
//! read cache) and `Cache-Control` (`BLOG_CACHE_CONTROL`); a post carries `Last-Modified` too. A
//! request whose `If-None-Match` matches gets `304 Not Modified` without a body, from the same
//! cache entry as the `200`.

use actix_web::http::header::{self, HeaderValue};
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse};
use chrono::NaiveDateTime;

/// An answer of a public read as the cache keeps it: the body, and its headers made once.
#[derive(Debug, Clone)]
pub struct CachedBody {
    pub body: Bytes,
    /// The strong entity tag, quoted: `"<32 hex digits>"`.
    pub etag: HeaderValue,
    /// `Last-Modified` (an HTTP date), for the answers that have one.
    pub last_modified: Option<HeaderValue>,
    pub content_type: &'static str,
}

/// JSON, as the post and tag reads answer.
pub const JSON: &str = "application/json";
pub const ATOM: &str = "application/atom+xml; charset=utf-8";
pub const RSS: &str = "application/rss+xml; charset=utf-8";
pub const XML: &str = "application/xml; charset=utf-8";

impl CachedBody {
    /// `body` with its entity tag: its XXH3-128, so that equal bodies have equal tags on every
    /// instance and across restarts, and bodies that differ differ in their tags. A tag names
    /// bytes, it does not vouch for them, so it needs no cryptographic hash: SHA-256 in software
    /// cost about a tenth of a post's uncached read, XXH3 a hundredth of that.
    pub fn new(body: Bytes, content_type: &'static str, modified: Option<NaiveDateTime>) -> Self {
        let etag = format!("\"{:032x}\"", xxhash_rust::xxh3::xxh3_128(&body));
        CachedBody {
            body,
            // Hex digits and quotes: always a valid header value.
            etag: HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("\"\"")),
            last_modified: modified.and_then(|t| {
                let date = t.and_utc().format("%a, %d %b %Y %H:%M:%S GMT").to_string();
                HeaderValue::from_str(&date).ok()
            }),
            content_type,
        }
    }

    /// The answer to `req`: `304` without a body when its `If-None-Match` matches, else `200`
    /// with the body; both with the validators and `cache_control`.
    pub fn respond(&self, req: &HttpRequest, cache_control: &HeaderValue) -> HttpResponse {
        let not_modified = none_match(req, &self.etag);
        let mut response = if not_modified {
            HttpResponse::NotModified()
        } else {
            HttpResponse::Ok()
        };
        response
            .insert_header((header::ETAG, self.etag.clone()))
            .insert_header((header::CACHE_CONTROL, cache_control.clone()));
        if let Some(modified) = &self.last_modified {
            response.insert_header((header::LAST_MODIFIED, modified.clone()));
        }
        if not_modified {
            return response.finish();
        }
        response
            .insert_header((
                header::CONTENT_TYPE,
                HeaderValue::from_static(self.content_type),
            ))
            .body(self.body.clone())
    }
}

/// Whether `If-None-Match` (every field line of it) names `etag` or is `*`. The comparison is
/// weak (RFC 9110, 13.1.2): `W/"x"` matches `"x"`. A field that cannot be read matches nothing,
/// so the full answer is sent.
fn none_match(req: &HttpRequest, etag: &HeaderValue) -> bool {
    let ours = opaque(etag.as_bytes());
    req.headers()
        .get_all(header::IF_NONE_MATCH)
        .any(|value| list_matches(value.as_bytes(), ours))
}

/// The opaque part of a tag: without `W/` and the quotes.
fn opaque(tag: &[u8]) -> &[u8] {
    let tag = tag.strip_prefix(b"W/").unwrap_or(tag);
    tag.strip_prefix(b"\"")
        .and_then(|t| t.strip_suffix(b"\""))
        .unwrap_or(tag)
}

/// Whether the field value `list` (`*`, or entity tags separated by commas) matches `ours`.
fn list_matches(list: &[u8], ours: &[u8]) -> bool {
    let trimmed = list.trim_ascii();
    if trimmed == b"*" {
        return true;
    }
    let mut rest = trimmed;
    loop {
        // Skip separators: commas and white space (empty list elements are allowed).
        while let [b',' | b' ' | b'\t', tail @ ..] = rest {
            rest = tail;
        }
        if rest.is_empty() {
            return false;
        }
        let tail = rest.strip_prefix(b"W/").unwrap_or(rest);
        let Some(tail) = tail.strip_prefix(b"\"") else {
            return false; // not an entity tag: the field is invalid
        };
        let Some(end) = tail.iter().position(|&b| b == b'"') else {
            return false;
        };
        if &tail[..end] == ours {
            return true;
        }
        rest = &tail[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_lists_weak_tags_and_star() {
        let ours = b"abc";
        for yes in [
            &b"\"abc\""[..],
            b"W/\"abc\"",
            b"*",
            b" * ",
            b"\"x\", \"abc\"",
            b"\"x\",W/\"abc\"",
            b", ,\"abc\"",
            b"\"a,b\", \"abc\"",
        ] {
            assert!(list_matches(yes, ours), "{}", String::from_utf8_lossy(yes));
        }
        for no in [
            &b""[..],
            b"\"ab\"",
            b"abc",
            b"\"abc",
            b"W/abc",
            b"\"x\" junk \"abc\"",
            b"**",
            b"\"ABC\"",
        ] {
            assert!(!list_matches(no, ours), "{}", String::from_utf8_lossy(no));
        }
    }

    #[test]
    fn tags_are_strong_hashes_of_the_body() {
        let a = CachedBody::new(Bytes::from_static(b"{}"), JSON, None);
        let b = CachedBody::new(Bytes::from_static(b"{}"), JSON, None);
        let c = CachedBody::new(Bytes::from_static(b"[]"), JSON, None);
        assert_eq!(a.etag, b.etag);
        assert_ne!(a.etag, c.etag);
        let text = a.etag.to_str().unwrap_or_default();
        assert!(
            text.starts_with('"') && text.ends_with('"') && text.len() == 34,
            "{text}"
        );
        assert_eq!(opaque(a.etag.as_bytes()).len(), 32);
    }
}
