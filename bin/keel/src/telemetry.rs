//! Logging: `LOG_FORMAT=pretty|json`, filtered by `RUST_LOG` (default `info`). Every line of a
//! request carries its request id.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::{Error, HttpMessage};
use kernel::client_addr::ClientAddr;
use kernel::http::RequestId;
use tracing::Span;
use tracing_actix_web::RootSpanBuilder;
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber (once; later calls are ignored), and routes panics through it
/// so that with `LOG_FORMAT=json` a panic is a JSON line like every other.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Json => builder.json().with_current_span(true).try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
    if installed.is_ok() {
        std::panic::set_hook(Box::new(log_panic));
    }
}

/// A panic as one error event: its message and where it happened (inside the request's span when
/// a handler panicked, so the line carries the request id).
fn log_panic(info: &std::panic::PanicHookInfo<'_>) {
    let message = info
        .payload()
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned());
    let location = info
        .location()
        .map(|l| format!("{}:{}", l.file(), l.line()))
        .unwrap_or_default();
    tracing::error!(panic = %message, location = %location, "panicked");
}

/// The span of one request: its id (taken from `X-Request-Id` or generated), the client's address,
/// method, route and final status, with one `request finished` line per request.
pub struct RequestSpan;

impl RootSpanBuilder for RequestSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        let span = tracing::info_span!(
            "request",
            request_id = tracing::field::Empty,
            client = tracing::field::Empty,
            method = %request.method(),
            path = %request.path(),
            status = tracing::field::Empty,
        );
        // Filled only for a span that is logged: below `info` nothing is formatted.
        if !span.is_disabled() {
            let extensions = request.extensions();
            let id = extensions.get::<RequestId>().map_or("", |r| r.0.as_str());
            span.record("request_id", id);
            // The client as `kernel::client_addr` works it out (behind a trusted proxy, the
            // address the proxy reports), set by the middleware outside this one.
            if let Some(client) = extensions.get::<ClientAddr>() {
                span.record("client", tracing::field::display(client.0));
            }
        }
        span
    }

    fn on_request_end<B: MessageBody>(span: Span, outcome: &Result<ServiceResponse<B>, Error>) {
        let status = match outcome {
            Ok(response) => response.status().as_u16(),
            Err(error) => error.as_response_error().status_code().as_u16(),
        };
        span.record("status", status);
        span.in_scope(|| tracing::info!(status, "request finished"));
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut b) = self.0.lock() {
                b.extend_from_slice(bytes);
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn panics_are_json_lines() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .finish();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(super::log_panic));
        tracing::subscriber::with_default(subscriber, || {
            let _ = std::panic::catch_unwind(|| std::panic::panic_any("boom".to_owned()));
        });
        std::panic::set_hook(previous);
        let text = String::from_utf8(buffer.0.lock().map(|b| b.clone()).unwrap_or_default())
            .unwrap_or_default();
        let line: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_default();
        assert_eq!(line["fields"]["panic"], "boom", "{text}");
        assert_eq!(line["level"], "ERROR", "{text}");
    }

    #[test]
    fn a_request_line_carries_its_id_client_method_and_path() {
        use actix_web::HttpMessage;
        use tracing_actix_web::RootSpanBuilder;
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_current_span(true)
            .with_writer(move || writer.clone())
            .finish();
        let request = actix_web::test::TestRequest::get()
            .uri("/auth/me?x=1")
            .to_srv_request();
        request
            .extensions_mut()
            .insert(kernel::http::RequestId("req-1".into()));
        request
            .extensions_mut()
            .insert(kernel::client_addr::ClientAddr([203, 0, 113, 9].into()));
        tracing::subscriber::with_default(subscriber, || {
            let span = super::RequestSpan::on_request_start(&request);
            span.in_scope(|| tracing::info!("inside"));
        });
        let text = String::from_utf8(buffer.0.lock().map(|b| b.clone()).unwrap_or_default())
            .unwrap_or_default();
        let line: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_default();
        let span = &line["span"];
        assert_eq!(span["request_id"], "req-1", "{text}");
        assert_eq!(span["client"], "203.0.113.9", "{text}");
        assert_eq!(span["method"], "GET", "{text}");
        assert_eq!(span["path"], "/auth/me", "{text}");
    }
}
