//! Requests refused before the application runs, answered with the `{"detail": ...}` envelope.
//!
//! actix-http parses each request head itself. When it cannot, it writes a fixed response with an
//! empty body and closes the connection, without calling the application and without a hook:
//!
//! - `431 Request Header Fields Too Large` when the head is still incomplete after
//!   [`MAX_HEAD_BYTES`] or has more than [`MAX_HEADERS`] headers;
//! - `400 Bad Request` for anything else it cannot parse: a malformed request line or header, an
//!   unknown method token, a URL that `http::Uri` refuses (longer than 65,534 bytes), an HTTP/1.1
//!   request without `Host`, conflicting `Content-Length` and `Transfer-Encoding`, a broken chunked
//!   body;
//! - `408 Request Timeout` when the head has not all arrived within [`REQUEST_HEAD_TIMEOUT`].
//!
//! [`ParseErrorBodies`] wraps every accepted connection and replaces exactly those responses,
//! on their way out, by the same status with a JSON body that says what to fix.
//!
//! The [`limit_head`] middleware refuses what actix-http lets through: a head larger than
//! [`MAX_HEAD_BYTES`] that reached it whole (431, as actix-http answers a head still incomplete at
//! that size), and a URL longer than [`MAX_URL_BYTES`] (and short enough for actix to parse) with
//! `414 URI Too Long`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{Error, ResponseError};
use kernel::ApiError;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest URL (path and query, as received) the service accepts; longer ones get
/// `414 URI Too Long`. Browsers, proxies and CDNs commonly stop at about 8 KiB, so a longer URL is
/// a client bug, and a request with one is refused before routing.
pub const MAX_URL_BYTES: usize = 8192;

/// The most bytes actix-http buffers for an incomplete request head (request line and headers)
/// before answering 431 (`MAX_BUFFER_SIZE` in actix-http's `h1/decoder.rs`).
pub const MAX_HEAD_BYTES: usize = 131_072;

/// The most headers actix-http accepts in a request head before answering 431 (`MAX_HEADERS` in
/// actix-http's `h1/decoder.rs`).
pub const MAX_HEADERS: usize = 96;

/// How long a request's head may take to arrive before actix-http answers 408 (its client
/// request timeout, set by the server).
pub const REQUEST_HEAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How many connections may wait to be accepted. `std::net::TcpListener::bind` asks for 128:
/// a burst of more connections at once (clients reconnecting after a restart, thousands of
/// streams opened together) overflowed it, and each dropped handshake was retried by its client
/// seconds later, often past [`REQUEST_HEAD_TIMEOUT`]. The kernel caps it at `net.core.somaxconn`
/// (4096 by default).
pub const LISTEN_BACKLOG: i32 = 4096;

/// Binds `addr` with a backlog of [`LISTEN_BACKLOG`].
pub fn bind(addr: &str) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    // Listening again on a listening socket only changes its backlog.
    socket2::SockRef::from(&listener).listen(LISTEN_BACKLOG)?;
    Ok(listener)
}

/// The size of a request's head as it was sent: the request line, each header as
/// `Name: value\r\n`, and the blank line that ends the head. (A client that pads values with
/// extra spaces sent a few bytes more; nothing else differs.)
pub fn head_bytes(req: &actix_web::dev::RequestHead) -> usize {
    let target = req.uri.path_and_query().map_or(1, |pq| pq.as_str().len());
    let request_line = req.method.as_str().len() + 1 + target + 1 + "HTTP/1.1\r\n".len();
    let headers: usize = req
        .headers
        .iter()
        .map(|(name, value)| name.as_str().len() + 2 + value.len() + 2)
        .sum();
    request_line + headers + 2
}

/// Middleware: the limits of a request head that actix-http does not enforce on every request.
///
/// - A head larger than [`MAX_HEAD_BYTES`] is answered `431` with the same detail (and
///   `connection: close`) as actix-http's own refusal. actix-http refuses a head only while it is
///   still incomplete after [`MAX_HEAD_BYTES`]: a larger head that reaches its buffer whole, in
///   one read, is parsed and passed on. This makes the limit hold however the head arrives.
/// - A URL (path and query) longer than [`MAX_URL_BYTES`] is answered `414 URI Too Long`.
///
/// Costs a length read per header, and no allocation, on every request.
pub async fn limit_head(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    if head_bytes(req.head()) > MAX_HEAD_BYTES {
        let mut response = ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Kind::TooLarge.detail(),
        )
        .error_response();
        response
            .head_mut()
            .set_connection_type(actix_web::http::ConnectionType::Close);
        return Ok(req.into_response(response).map_into_right_body());
    }
    let len = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if len > MAX_URL_BYTES {
        let error = ApiError::new(
            StatusCode::URI_TOO_LONG,
            format!(
                "URL too long: {len} bytes (at most {MAX_URL_BYTES}); shorten the path and query string"
            ),
        );
        return Ok(req
            .into_response(error.error_response())
            .map_into_right_body());
    }
    Ok(next.call(req).await?.map_into_left_body())
}

/// An accepted connection whose outgoing bytes are watched for actix-http's own parse-error
/// responses, which are replaced by the same status with a `{"detail": ...}` JSON body. Reads pass
/// through untouched.
///
/// # What is matched, and why it cannot hit a response of the application
///
/// actix-http encodes its parse-error response as the last bytes of its write buffer (it closes
/// the connection right after) and hands the whole unwritten rest of that buffer to
/// [`AsyncWrite::poll_write`]. Its head is, byte for byte, with lower-case header names:
///
/// ```text
/// HTTP/1.1 431 Request Header Fields Too Large\r\n     or 400 Bad Request, or 408 Request Timeout
/// content-length: 0\r\n
/// connection: close\r\n
/// date: Mon, 23 Nov 2026 15:14:34 GMT\r\n
/// \r\n
/// ```
///
/// The `connection` line is left out when the refused request follows a keep-alive HTTP/1.1
/// request on the same connection; after a keep-alive HTTP/1.0 request the version is `HTTP/1.0`
/// and the line is `connection: keep-alive`. Those forms are matched too.
///
/// A write is rewritten only when it *ends* with exactly that head. The application never sends
/// such a head: every 400, 408 and 431 it answers carries a JSON body (so a `content-type` header, an
/// `x-request-id` header and a non-zero length). No body it sends ends with that text either:
/// JSON has no raw CR or LF, a chunked body ends with `0\r\n\r\n`, and the rest (Swagger UI's
/// files, zip and gzip data) would have to end with these exact 120-odd bytes, a current date
/// included. Text that merely contains the status line elsewhere in a write is left alone.
///
/// # Cost
///
/// A normal write costs a check of its last four bytes (does it end with a blank line), and, for
/// writes that end a response head, a few comparisons against its last 150 bytes: no allocation,
/// no copy. The replacement is built only when a refusal is found.
///
/// # Partial writes
///
/// When the refusal follows earlier (pipelined) responses in the same write, only the bytes before
/// it are written, so the next write begins exactly at it and it is never split. That write is
/// then accepted whole, and the replacement is kept and written by the next `poll_write`,
/// `poll_flush` or `poll_shutdown`, which finish writing it before doing anything else.
pub struct ParseErrorBodies<IO> {
    inner: IO,
    /// The replacement response not yet written, and how much of it is written.
    pending: Option<(Vec<u8>, usize)>,
}

impl<IO> ParseErrorBodies<IO> {
    /// The connection this wraps.
    pub fn get_ref(&self) -> &IO {
        &self.inner
    }

    pub fn new(inner: IO) -> Self {
        ParseErrorBodies {
            inner,
            pending: None,
        }
    }
}

impl<IO: AsyncWrite + Unpin> ParseErrorBodies<IO> {
    /// Writes what is left of the replacement response, if any.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, written)) = &mut self.pending {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
            if *written == bytes.len() {
                self.pending = None;
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for ParseErrorBodies<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

/// Vectored writes are left to the default (one `poll_write` per buffer), so every byte goes
/// through the check.
impl<IO: AsyncWrite + Unpin> AsyncWrite for ParseErrorBodies<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        match Refusal::at_end_of(buf) {
            None => Pin::new(&mut this.inner).poll_write(cx, buf),
            Some(refusal) if refusal.start > 0 => {
                Pin::new(&mut this.inner).poll_write(cx, &buf[..refusal.start])
            }
            Some(refusal) => {
                tracing::debug!(
                    status = refusal.kind.status(),
                    "request refused by the HTTP parser; answering with a JSON body"
                );
                this.pending = Some((refusal.replacement(), 0));
                Poll::Ready(Ok(buf.len()))
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// 431: the head is too large or has too many headers.
    TooLarge,
    /// 400: the head (or the body's framing) is not valid HTTP/1.1.
    Malformed,
    /// 408: the head did not arrive within [`REQUEST_HEAD_TIMEOUT`].
    TimedOut,
}

impl Kind {
    fn status(self) -> u16 {
        match self {
            Kind::TooLarge => 431,
            Kind::Malformed => 400,
            Kind::TimedOut => 408,
        }
    }

    /// The status line after the version, as actix-http writes it.
    fn status_line(self) -> &'static [u8] {
        match self {
            Kind::TooLarge => b"431 Request Header Fields Too Large\r\n",
            Kind::Malformed => b"400 Bad Request\r\n",
            Kind::TimedOut => b"408 Request Timeout\r\n",
        }
    }

    fn detail(self) -> String {
        match self {
            Kind::TooLarge => format!(
                "Request headers too large: the request line and headers must fit in 128 KiB \
                 ({MAX_HEAD_BYTES} bytes), with at most {MAX_HEADERS} headers"
            ),
            Kind::Malformed => format!(
                "Malformed request: not valid HTTP/1.1. Check the request line (method, a URL of \
                 at most {MAX_URL_BYTES} bytes, version), the headers (each \"Name: value\", with \
                 a Host header) and the body framing (Content-Length or chunked \
                 Transfer-Encoding, not both)"
            ),
            Kind::TimedOut => format!(
                "Request timed out: the request line and headers must arrive within {} seconds \
                 of the connection (or of the previous response)",
                REQUEST_HEAD_TIMEOUT.as_secs()
            ),
        }
    }
}

/// The length of actix-http's date line: `date: ` + an IMF-fixdate (29 bytes) + CRLF.
const DATE_LINE_LEN: usize = 6 + 29 + 2;

/// The length of the longest head [`Refusal::at_end_of`] matches.
const LONGEST_HEAD: usize = 9 // "HTTP/1.1 "
    + 37 // "431 Request Header Fields Too Large\r\n"
    + 19 // "content-length: 0\r\n"
    + 24 // "connection: keep-alive\r\n"
    + DATE_LINE_LEN
    + 2; // blank line

/// actix-http's parse-error head, found at the end of a write.
#[derive(Debug, PartialEq, Eq)]
struct Refusal<'a> {
    /// Where the head begins in the write.
    start: usize,
    kind: Kind,
    /// `HTTP/1.1 ` or `HTTP/1.0 `.
    version: &'a [u8],
    /// The `date` header's value.
    date: &'a [u8],
}

impl<'a> Refusal<'a> {
    /// The parse-error head that `buf` ends with, if it ends with one.
    fn at_end_of(buf: &'a [u8]) -> Option<Refusal<'a>> {
        // Every step keeps `rest` a prefix of `buf`: what precedes the part matched so far.
        let rest = buf.strip_suffix(b"\r\n\r\n")?;
        let date_at = rest.len().checked_sub(DATE_LINE_LEN - 2)?;
        let (rest, date_line) = rest.split_at(date_at);
        let date = date_line.strip_prefix(b"date: ")?;
        if !(date.ends_with(b" GMT") && date.iter().all(|b| (b' '..=b'~').contains(b))) {
            return None;
        }
        let rest = rest.strip_suffix(b"\r\n")?;
        let rest = rest
            .strip_suffix(b"\r\nconnection: close")
            .or_else(|| rest.strip_suffix(b"\r\nconnection: keep-alive"))
            .unwrap_or(rest);
        let rest = rest.strip_suffix(b"\r\ncontent-length: 0")?;
        let (rest, kind) = [Kind::TooLarge, Kind::Malformed, Kind::TimedOut]
            .into_iter()
            .find_map(|kind| {
                // The status line without its CRLF, which was matched with the next line.
                let line = kind.status_line();
                let line = &line[..line.len() - 2];
                rest.strip_suffix(line).map(|rest| (rest, kind))
            })?;
        let version: &[u8] = [b"HTTP/1.1 ", b"HTTP/1.0 "]
            .into_iter()
            .find(|version| rest.ends_with(*version))?;
        Some(Refusal {
            start: rest.len() - version.len(),
            kind,
            version,
            date,
        })
    }

    /// The response that replaces the refusal: the same status, a JSON `detail` and
    /// `connection: close` (actix-http closes the connection after it).
    fn replacement(&self) -> Vec<u8> {
        let body = serde_json::json!({ "detail": self.kind.detail() }).to_string();
        let mut out = Vec::with_capacity(LONGEST_HEAD + 64 + body.len());
        out.extend_from_slice(self.version);
        out.extend_from_slice(self.kind.status_line());
        out.extend_from_slice(b"content-type: application/json\r\n");
        out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
        out.extend_from_slice(b"connection: close\r\ndate: ");
        out.extend_from_slice(self.date);
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(body.as_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const DATE: &str = "Mon, 23 Nov 2026 15:14:34 GMT";

    /// std's backlog of 128 would leave the later handshakes of this burst unanswered (dropped,
    /// retried by the client) for as long as nobody accepts.
    #[tokio::test]
    async fn a_burst_of_connections_waits_in_the_backlog() {
        let listener = bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connects = (0..600).map(|_| tokio::net::TcpStream::connect(addr));
        let connected = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            futures_util::future::try_join_all(connects),
        )
        .await
        .expect("handshakes left unanswered: the backlog is too small")
        .unwrap();
        assert_eq!(connected.len(), 600);
        drop(listener);
    }

    /// actix-http's 431 on a fresh connection, as it writes it.
    fn head_431() -> Vec<u8> {
        format!(
            "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\
             connection: close\r\ndate: {DATE}\r\n\r\n"
        )
        .into_bytes()
    }

    /// actix-http's 400 after a keep-alive HTTP/1.1 request (no `connection` header).
    fn head_400_keep_alive() -> Vec<u8> {
        format!("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: {DATE}\r\n\r\n")
            .into_bytes()
    }

    fn ok_response() -> Vec<u8> {
        let body = r#"{"status":"alive"}"#;
        format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncontent-type: application/json\r\n\
             x-request-id: 1\r\ndate: {DATE}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    /// An inner stream that takes at most `per_write` bytes a call and, when `stall` is set,
    /// answers `Pending` to every other call; it records what it receives.
    #[derive(Default)]
    struct Recorder {
        out: Vec<u8>,
        per_write: usize,
        stall: bool,
        calls: usize,
        flushed: bool,
        shut_down: bool,
    }

    impl Recorder {
        fn new(per_write: usize, stall: bool) -> Self {
            Recorder {
                per_write,
                stall,
                ..Recorder::default()
            }
        }

        fn stalls(&mut self, cx: &mut Context<'_>) -> bool {
            self.calls += 1;
            if self.stall && self.calls % 2 == 1 {
                cx.waker().wake_by_ref();
                return true;
            }
            false
        }
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            assert!(!this.shut_down, "write after shutdown");
            if this.stalls(cx) {
                return Poll::Pending;
            }
            let n = buf.len().min(this.per_write);
            this.out.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            if this.stalls(cx) {
                return Poll::Pending;
            }
            this.flushed = true;
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            if this.stalls(cx) {
                return Poll::Pending;
            }
            this.shut_down = true;
            Poll::Ready(Ok(()))
        }
    }

    /// Writes `bytes` the way actix-http's dispatcher does (the unwritten rest of its buffer on
    /// each call), then flushes and shuts down; returns what reached the inner stream.
    async fn through(inner: Recorder, bytes: &[u8]) -> Recorder {
        let mut io = ParseErrorBodies::new(inner);
        io.write_all(bytes).await.unwrap();
        io.flush().await.unwrap();
        io.shutdown().await.unwrap();
        assert!(io.pending.is_none());
        io.inner
    }

    /// Splits a response into its status line, its headers (lower-cased names) and its body,
    /// checking that `content-length` is the body's length.
    fn parse(response: &[u8]) -> (String, Vec<(String, String)>, serde_json::Value) {
        let text = std::str::from_utf8(response).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().to_owned();
        let headers: Vec<(String, String)> = lines
            .map(|line| {
                let (name, value) = line.split_once(": ").unwrap();
                (name.to_owned(), value.to_owned())
            })
            .collect();
        let length = headers
            .iter()
            .find(|(name, _)| name == "content-length")
            .map(|(_, value)| value.parse::<usize>().unwrap());
        assert_eq!(length, Some(body.len()), "content-length of {text:?}");
        (status, headers, serde_json::from_str(body).unwrap())
    }

    fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    #[tokio::test]
    async fn the_431_head_is_answered_with_json() {
        let inner = through(Recorder::new(usize::MAX, false), &head_431()).await;
        let (status, headers, body) = parse(&inner.out);
        assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");
        assert_eq!(header(&headers, "content-type"), Some("application/json"));
        assert_eq!(header(&headers, "connection"), Some("close"));
        assert_eq!(header(&headers, "date"), Some(DATE));
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.starts_with("Request headers too large"), "{detail}");
        assert!(
            detail.contains("128 KiB") && detail.contains("96 headers"),
            "{detail}"
        );
        assert!(inner.flushed && inner.shut_down);
    }

    #[tokio::test]
    async fn the_400_head_is_answered_with_json_in_each_form_actix_writes() {
        let http10 = format!(
            "HTTP/1.0 400 Bad Request\r\ncontent-length: 0\r\nconnection: keep-alive\r\n\
             date: {DATE}\r\n\r\n"
        );
        let fresh = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\
             date: {DATE}\r\n\r\n"
        );
        for (head, version) in [
            (head_400_keep_alive(), "HTTP/1.1"),
            (http10.into_bytes(), "HTTP/1.0"),
            (fresh.into_bytes(), "HTTP/1.1"),
        ] {
            let inner = through(Recorder::new(usize::MAX, false), &head).await;
            let (status, headers, body) = parse(&inner.out);
            assert_eq!(status, format!("{version} 400 Bad Request"));
            assert_eq!(header(&headers, "content-type"), Some("application/json"));
            assert_eq!(header(&headers, "connection"), Some("close"));
            let detail = body["detail"].as_str().unwrap();
            assert!(detail.starts_with("Malformed request"), "{detail}");
            assert!(detail.contains("8192 bytes"), "{detail}");
        }
    }

    #[tokio::test]
    async fn a_slow_inner_stream_still_gets_the_whole_replacement() {
        for stall in [false, true] {
            let inner = through(Recorder::new(3, stall), &head_431()).await;
            let (status, _, body) = parse(&inner.out);
            assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");
            assert!(body["detail"].is_string());
        }
    }

    #[tokio::test]
    async fn pipelined_responses_before_the_refusal_pass_unchanged() {
        let mut bytes = ok_response();
        bytes.extend_from_slice(&ok_response());
        let before = bytes.len();
        bytes.extend_from_slice(&head_400_keep_alive());
        for (per_write, stall) in [(usize::MAX, false), (7, false), (5, true), (1, true)] {
            let inner = through(Recorder::new(per_write, stall), &bytes).await;
            assert_eq!(inner.out[..before], bytes[..before], "{per_write} {stall}");
            let (status, headers, body) = parse(&inner.out[before..]);
            assert_eq!(status, "HTTP/1.1 400 Bad Request");
            assert_eq!(header(&headers, "content-type"), Some("application/json"));
            assert!(body["detail"].is_string());
        }
    }

    #[tokio::test]
    async fn the_refusal_is_never_written_in_part() {
        let mut bytes = ok_response();
        let before = bytes.len();
        bytes.extend_from_slice(&head_431());
        let mut io = ParseErrorBodies::new(Recorder::new(usize::MAX, false));
        // One call with everything: only the bytes before the refusal are taken.
        assert_eq!(io.write(&bytes).await.unwrap(), before);
        assert_eq!(io.inner.out, bytes[..before]);
        // The next call begins at the refusal and takes it whole.
        assert_eq!(
            io.write(&bytes[before..]).await.unwrap(),
            bytes.len() - before
        );
        assert_eq!(
            io.inner.out.len(),
            before,
            "the replacement waits for a flush"
        );
        io.flush().await.unwrap();
        assert!(parse(&io.inner.out[before..]).2["detail"].is_string());
    }

    #[tokio::test]
    async fn other_responses_are_left_untouched() {
        // An error of the application: JSON, so never `content-length: 0`.
        let app_400 = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 15\r\ncontent-type: application/json\r\n\
             date: {DATE}\r\n\r\n{{\"detail\":\"x\"}}"
        );
        // A head that ends a write but has a header actix's refusal does not.
        let extra_header = format!(
            "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\
             x-request-id: 1\r\ndate: {DATE}\r\n\r\n"
        );
        // A 200 head written alone (its body follows in another write).
        let ok_head = format!("HTTP/1.1 200 OK\r\ncontent-length: 0\r\ndate: {DATE}\r\n\r\n");
        // The refusal's text inside a body, not at the end of the write.
        let mut inside = ok_response();
        inside.extend_from_slice(&head_431());
        inside.extend_from_slice(b"more body");
        // A write that ends with the refusal's lines but not its status line.
        let tail_only = head_431()[4..].to_vec();
        for bytes in [
            ok_response(),
            app_400.into_bytes(),
            extra_header.into_bytes(),
            ok_head.into_bytes(),
            inside,
            tail_only,
        ] {
            for (per_write, stall) in [(usize::MAX, false), (4, true)] {
                let inner = through(Recorder::new(per_write, stall), &bytes).await;
                assert_eq!(inner.out, bytes, "{}", String::from_utf8_lossy(&bytes));
            }
        }
    }

    #[tokio::test]
    async fn shutdown_alone_writes_the_pending_replacement_first() {
        for stall in [false, true] {
            let mut io = ParseErrorBodies::new(Recorder::new(2, stall));
            io.write_all(&head_431()).await.unwrap();
            assert!(io.inner.out.is_empty());
            io.shutdown().await.unwrap();
            assert!(io.inner.shut_down);
            let (status, _, _) = parse(&io.inner.out);
            assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");
        }
    }

    #[tokio::test]
    async fn a_later_write_comes_after_the_pending_replacement() {
        let mut io = ParseErrorBodies::new(Recorder::new(usize::MAX, true));
        io.write_all(&head_431()).await.unwrap();
        io.write_all(b"after").await.unwrap();
        io.flush().await.unwrap();
        assert!(io.inner.out.ends_with(b"after"));
        let replacement = &io.inner.out[..io.inner.out.len() - 5];
        assert!(parse(replacement).2["detail"].is_string());
    }

    #[tokio::test]
    async fn reads_and_normal_writes_pass_through() {
        let (client, server) = tokio::io::duplex(64);
        let mut io = ParseErrorBodies::new(server);
        let mut client = client;
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let mut buf = [0u8; 18];
        io.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"GET / HTTP/1.1\r\n\r\n");
        io.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello");
    }

    #[test]
    fn a_head_counts_its_request_line_headers_and_blank_line() {
        let req = actix_web::test::TestRequest::get()
            .uri("/health/live?x=1")
            .insert_header(("host", "localhost"))
            .insert_header(("x-big", "abc"))
            .to_srv_request();
        let sent = "GET /health/live?x=1 HTTP/1.1\r\nhost: localhost\r\nx-big: abc\r\n\r\n";
        assert_eq!(head_bytes(req.head()), sent.len());
    }

    #[actix_web::test]
    async fn heads_over_the_limit_are_refused_with_431() {
        use actix_web::{App, HttpResponse, middleware::from_fn, test, web};
        let app = test::init_service(
            App::new()
                .wrap(from_fn(limit_head))
                .default_service(web::to(HttpResponse::Ok)),
        )
        .await;
        // `GET / HTTP/1.1\r\n` + `x-big: <value>\r\n` + `\r\n`.
        let at_limit = MAX_HEAD_BYTES - "GET / HTTP/1.1\r\n".len() - "x-big: \r\n".len() - 2;
        let req = test::TestRequest::get()
            .uri("/")
            .insert_header(("x-big", "a".repeat(at_limit)))
            .to_request();
        assert_eq!(test::call_service(&app, req).await.status(), StatusCode::OK);
        let req = test::TestRequest::get()
            .uri("/")
            .insert_header(("x-big", "a".repeat(at_limit + 1)))
            .to_request();
        let res = test::call_service(&app, req).await;
        assert_eq!(res.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        assert_eq!(
            res.response().head().connection_type(),
            actix_web::http::ConnectionType::Close
        );
        let body: serde_json::Value = test::read_body_json(res).await;
        assert_eq!(body["detail"], Kind::TooLarge.detail());
    }

    #[actix_web::test]
    async fn urls_longer_than_the_limit_are_refused_with_414() {
        use actix_web::{App, HttpResponse, middleware::from_fn, test, web};
        let app = test::init_service(
            App::new()
                .wrap(from_fn(limit_head))
                .default_service(web::to(HttpResponse::Ok)),
        )
        .await;
        // `/` plus the query: exactly the limit passes, one byte more does not.
        let at_limit = format!("/?q={}", "a".repeat(MAX_URL_BYTES - 4));
        let req = test::TestRequest::get().uri(&at_limit).to_request();
        assert_eq!(test::call_service(&app, req).await.status(), StatusCode::OK);
        let over = format!("{at_limit}b");
        let req = test::TestRequest::get().uri(&over).to_request();
        let res = test::call_service(&app, req).await;
        assert_eq!(res.status(), StatusCode::URI_TOO_LONG);
        let body: serde_json::Value = test::read_body_json(res).await;
        assert_eq!(
            body["detail"],
            "URL too long: 8193 bytes (at most 8192); shorten the path and query string"
        );
    }
}
