//! Prometheus metrics (`METRICS_ENABLED`): the process's recorder, the request middleware and
//! `GET /metrics`, on the main port or on its own small server (`METRICS_ADDR`). The metrics
//! themselves are named in `kernel::metrics`.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use actix_web::body::MessageBody;
use actix_web::dev::{Server, ServerHandle, ServiceRequest, ServiceResponse};
use actix_web::http::{Method, header};
use actix_web::middleware::{Next, from_fn};
use actix_web::{App, Error, HttpResponse, HttpServer, web};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::app::{Composed, StartError};

/// Buckets of the request latency histogram, in seconds.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// How often histogram samples are folded into their buckets between scrapes (so that memory
/// stays bounded when nobody scrapes).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The installed recorder's handle: renders what has been recorded.
#[derive(Clone)]
pub struct Exporter(PrometheusHandle);

static INSTALLED: Mutex<Option<PrometheusHandle>> = Mutex::new(None);

/// Installs the process's Prometheus recorder on first use; later calls share it (the recorder
/// is global to the process, so every server built in it reports into the same one).
pub fn install() -> Result<Exporter, StartError> {
    let mut installed = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(handle) = installed.as_ref() {
        return Ok(Exporter(handle.clone()));
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(kernel::metrics::HTTP_REQUEST_DURATION.to_owned()),
            LATENCY_BUCKETS,
        )
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|e| StartError::Metrics(e.to_string()))?;
    kernel::metrics::describe();
    let upkeep = handle.clone();
    std::thread::Builder::new()
        .name("metrics-upkeep".to_owned())
        .spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_EVERY);
                upkeep.run_upkeep();
            }
        })
        .map_err(|e| StartError::Metrics(format!("cannot start the upkeep thread: {e}")))?;
    *installed = Some(handle.clone());
    Ok(Exporter(handle))
}

/// `GET /metrics`: samples the gauges that are read at scrape time (the database pool, each
/// module's), then renders every metric in the Prometheus text format.
pub async fn scrape(composed: web::Data<Composed>, exporter: web::Data<Exporter>) -> HttpResponse {
    kernel::metrics::sample_db_pool(&composed.pool);
    for module in &composed.modules {
        module.sample_metrics().await;
    }
    HttpResponse::Ok()
        .insert_header((
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        ))
        .body(exporter.0.render())
}

/// Middleware: counts each request and its latency by route template, method and status.
pub async fn record(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = Instant::now();
    let method = method_label(req.method());
    let result = next.call(req).await;
    // A failure answered as an error value (a panic, a refused CORS request) has no request left
    // to read the route from.
    let (route, status) = match &result {
        Ok(response) => (response.request().match_pattern(), response.status()),
        Err(error) => (None, error.as_response_error().status_code()),
    };
    let route = route.map_or(kernel::metrics::UNMATCHED_ROUTE, |r| intern(&r));
    kernel::metrics::http_request(route, method, intern(status.as_str()), started.elapsed());
    result
}

/// The `method` label: the standard methods by name, anything else as `other` (a client cannot
/// add series by inventing methods).
fn method_label(method: &Method) -> &'static str {
    const KNOWN: [(Method, &str); 9] = [
        (Method::GET, "GET"),
        (Method::POST, "POST"),
        (Method::PUT, "PUT"),
        (Method::PATCH, "PATCH"),
        (Method::DELETE, "DELETE"),
        (Method::HEAD, "HEAD"),
        (Method::OPTIONS, "OPTIONS"),
        (Method::CONNECT, "CONNECT"),
        (Method::TRACE, "TRACE"),
    ];
    KNOWN
        .iter()
        .find(|(known, _)| known == method)
        .map_or("other", |(_, label)| label)
}

/// A `'static` copy of a label value, made once per distinct value: route templates and status
/// codes are few and fixed by the route table, and the labels then cost no allocation per request.
fn intern(value: &str) -> &'static str {
    static VALUES: LazyLock<RwLock<HashSet<&'static str>>> = LazyLock::new(RwLock::default);
    if let Some(found) = VALUES
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(value)
    {
        return found;
    }
    let mut values = VALUES.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(found) = values.get(value) {
        return found;
    }
    let leaked: &'static str = Box::leak(value.to_owned().into_boxed_str());
    values.insert(leaked);
    leaked
}

/// The server of `METRICS_ADDR`: `GET /metrics` and nothing else, on one worker. It runs in the
/// background from [`MetricsServer::start`] and stops when the guard is dropped.
pub struct MetricsServer {
    handle: ServerHandle,
    port: u16,
}

impl MetricsServer {
    /// Binds `addr` and starts serving (inside a Tokio runtime).
    pub fn start(
        addr: &str,
        composed: web::Data<Composed>,
        exporter: Exporter,
    ) -> Result<MetricsServer, StartError> {
        let bind_error = |source| StartError::Bind {
            addr: addr.to_owned(),
            source,
        };
        let listener = crate::listener::bind(addr).map_err(bind_error)?;
        let port = listener.local_addr().map_err(bind_error)?.port();
        let exporter = web::Data::new(exporter);
        let server: Server = HttpServer::new(move || {
            App::new()
                .app_data(composed.clone())
                .app_data(exporter.clone())
                .route("/metrics", web::get().to(scrape))
                .default_service(web::to(kernel::http::not_found))
                .wrap(from_fn(kernel::http::json_errors))
        })
        .workers(1)
        .disable_signals()
        .shutdown_timeout(5)
        .listen(listener)
        .map_err(bind_error)?
        .run();
        let handle = server.handle();
        tokio::spawn(server);
        Ok(MetricsServer { handle, port })
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        // The stop command is sent at once; nothing needs to wait for it to complete.
        std::mem::drop(self.handle.stop(true));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_outside_the_standard_ones_share_a_label() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::DELETE), "DELETE");
        let invented = Method::from_bytes(b"BREW").unwrap_or(Method::GET);
        assert_eq!(method_label(&invented), "other");
    }

    #[test]
    fn interned_values_are_made_once() {
        let first = intern("/api/v1/blog/posts/{post}");
        let again = intern(&String::from("/api/v1/blog/posts/{post}"));
        assert!(std::ptr::eq(first, again));
        assert_eq!(intern("404"), "404");
    }
}
