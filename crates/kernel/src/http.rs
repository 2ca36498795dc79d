//! HTTP plumbing shared by every module: extractor configurations whose errors use the `detail`
//! envelope, request ids, a panic guard, a JSON fallback for error answers that have no JSON body,
//! and the 404/405 default service.

use std::panic::AssertUnwindSafe;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::error::{JsonPayloadError, PathError, QueryPayloadError, UrlencodedError};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, HttpRequest, HttpResponse, ResponseError, web};
use futures_util::FutureExt;

use crate::{ApiError, FieldError};

/// Default limit of JSON bodies (`MAX_JSON_BYTES`): 1 MiB.
pub const DEFAULT_MAX_JSON_BYTES: usize = 1024 * 1024;

pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// What was wrong with a request's body, query or path, before any handler ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputProblem {
    pub status: StatusCode,
    pub message: String,
    /// The field the problem is about, when the parser says (e.g. a missing field).
    pub field: Option<String>,
}

impl InputProblem {
    fn new(status: StatusCode, message: impl Into<String>, field: Option<String>) -> Self {
        Self {
            status,
            message: message.into(),
            field,
        }
    }

    /// As a string-detail error (every module but auth).
    pub fn into_api_error(self) -> ApiError {
        ApiError::new(self.status, self.message)
    }

    /// As auth's list-form error: 422s become `[{field, message}]`; other statuses stay strings.
    pub fn into_field_list_error(self) -> ApiError {
        if self.status == StatusCode::UNPROCESSABLE_ENTITY {
            let field = self.field.unwrap_or_else(|| "body".to_owned());
            ApiError::field_list(vec![FieldError::new(field, self.message)])
        } else {
            self.into_api_error()
        }
    }
}

/// The field named by a serde message such as "missing field `password`".
fn field_of(message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("missing field `")
        .or_else(|| message.strip_prefix("unknown field `"))
        .or_else(|| message.strip_prefix("duplicate field `"))?;
    rest.split_once('`').map(|(field, _)| field.to_owned())
}

fn too_large(limit: usize) -> InputProblem {
    InputProblem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("Request body too large: the limit is {limit} bytes"),
        None,
    )
}

pub fn describe_json_error(err: &JsonPayloadError) -> InputProblem {
    match err {
        JsonPayloadError::OverflowKnownLength { limit, .. }
        | JsonPayloadError::Overflow { limit } => too_large(*limit),
        JsonPayloadError::ContentType => InputProblem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Content-Type must be application/json",
            None,
        ),
        JsonPayloadError::Deserialize(e) if e.is_data() => {
            let message = e.to_string();
            let field = field_of(&message);
            InputProblem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("Invalid request body: {message}"),
                field,
            )
        }
        JsonPayloadError::Deserialize(e) => InputProblem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("Malformed JSON: {e}"),
            None,
        ),
        other => InputProblem::new(
            StatusCode::BAD_REQUEST,
            format!("Unreadable request body: {other}"),
            None,
        ),
    }
}

pub fn describe_form_error(err: &UrlencodedError) -> InputProblem {
    match err {
        UrlencodedError::Overflow { limit, .. } => too_large(*limit),
        UrlencodedError::ContentType => InputProblem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Content-Type must be application/x-www-form-urlencoded",
            None,
        ),
        UrlencodedError::Parse(e) => {
            let message = e.to_string();
            let field = field_of(&message);
            InputProblem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("Invalid form body: {message}"),
                field,
            )
        }
        other => InputProblem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("Invalid form body: {other}"),
            None,
        ),
    }
}

pub fn describe_query_error(err: &QueryPayloadError) -> InputProblem {
    let message = match err {
        QueryPayloadError::Deserialize(e) => e.to_string(),
        other => other.to_string(),
    };
    let field = field_of(&message);
    InputProblem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        format!("Invalid query parameters: {message}"),
        field,
    )
}

pub fn describe_path_error(err: &PathError) -> InputProblem {
    let message = match err {
        PathError::Deserialize(e) => e.to_string(),
        other => other.to_string(),
    };
    InputProblem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        format!("Invalid path parameter: {message}"),
        None,
    )
}

/// A JSON request body that must be an object: what every route's body is. serde would also
/// read a struct from an array of its fields in order (`[null, null]`), which no route's
/// document allows; this extractor refuses that with 422, like any other type mismatch. It reads
/// with the app's `JsonConfig` (limit and errors), in one pass.
#[derive(Debug)]
pub struct Json<T>(pub T);

impl<T> Json<T> {
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for Json<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

type ObjectFut<T> = <web::Json<Object<T>> as actix_web::FromRequest>::Future;

impl<T: serde::de::DeserializeOwned + 'static> actix_web::FromRequest for Json<T> {
    type Error = Error;
    type Future = futures_util::future::MapOk<ObjectFut<T>, fn(web::Json<Object<T>>) -> Json<T>>;

    fn from_request(req: &HttpRequest, payload: &mut actix_web::dev::Payload) -> Self::Future {
        use futures_util::TryFutureExt;
        let unwrap: fn(web::Json<Object<T>>) -> Json<T> = |body| Json(body.into_inner().0);
        web::Json::<Object<T>>::from_request(req, payload).map_ok(unwrap)
    }
}

/// An optional JSON body: `None` only when the request carries no body at all (no
/// `Content-Length`, or 0, and no `Transfer-Encoding`); a body that is sent must read as `T`, or
/// it is refused like [`Json`]'s. (actix's `Option<Json<T>>` would take an unreadable body for
/// no body.)
#[derive(Debug)]
pub struct OptionalJson<T>(pub Option<T>);

impl<T: serde::de::DeserializeOwned + 'static> actix_web::FromRequest for OptionalJson<T> {
    type Error = Error;
    type Future = futures_util::future::Either<
        futures_util::future::Ready<Result<Self, Error>>,
        futures_util::future::MapOk<ObjectFut<T>, fn(web::Json<Object<T>>) -> OptionalJson<T>>,
    >;

    fn from_request(req: &HttpRequest, payload: &mut actix_web::dev::Payload) -> Self::Future {
        use futures_util::TryFutureExt;
        use futures_util::future::{Either, ready};
        if has_no_body(req) {
            return Either::Left(ready(Ok(OptionalJson(None))));
        }
        let some: fn(web::Json<Object<T>>) -> OptionalJson<T> =
            |body| OptionalJson(Some(body.into_inner().0));
        Either::Right(web::Json::<Object<T>>::from_request(req, payload).map_ok(some))
    }
}

/// A request that carries no body: no `Content-Length` (or 0) and no `Transfer-Encoding`.
fn has_no_body(req: &HttpRequest) -> bool {
    let headers = req.headers();
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok());
    matches!(length, None | Some("0")) && !headers.contains_key(header::TRANSFER_ENCODING)
}

/// `T`, read only from a JSON object.
#[derive(Debug)]
pub struct Object<T>(pub T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for ObjectVisitor<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        deserializer
            .deserialize_map(ObjectVisitor(std::marker::PhantomData))
            .map(Object)
    }
}

/// `value` as a JSON body, for the hot read paths: sonic-rs escapes strings with SIMD, several
/// times faster than serde_json on text-heavy bodies (a page of posts), and writes the same bytes.
///
/// The buffer starts at a size learned from the thread's last body. Starting small, it would grow
/// a dozen times for a 70 KB page (sonic-rs reserves six times a string's length before writing
/// it), and every growth copies what is written so far.
pub fn to_json_bytes<T: serde::Serialize + ?Sized>(value: &T) -> Result<web::Bytes, ApiError> {
    /// Never start above this, whatever the last body was.
    const START_AT_MOST: usize = 1 << 20;
    thread_local! {
        static LAST_LEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    let last = LAST_LEN.get();
    // Room for the last body's size and a quarter more (for a page, enough for the six-fold
    // reservation of its longest string); a small body that grows once costs little.
    let start = (last + last / 4 + 1024).min(START_AT_MOST);
    let mut buffer = Vec::with_capacity(start);
    sonic_rs::to_writer(&mut buffer, value).map_err(ApiError::internal)?;
    LAST_LEN.set(buffer.len());
    Ok(web::Bytes::from(buffer))
}

/// JSON extractor settings: the body limit and `detail`-envelope errors.
pub fn json_config(limit: usize) -> web::JsonConfig {
    web::JsonConfig::default()
        .limit(limit)
        .error_handler(|err, _| describe_json_error(&err).into_api_error().into())
}

/// Form extractor settings: the body limit and `detail`-envelope errors.
pub fn form_config(limit: usize) -> web::FormConfig {
    web::FormConfig::default()
        .limit(limit)
        .error_handler(|err, _| describe_form_error(&err).into_api_error().into())
}

pub fn query_config() -> web::QueryConfig {
    web::QueryConfig::default()
        .error_handler(|err, _| describe_query_error(&err).into_api_error().into())
}

pub fn path_config() -> web::PathConfig {
    web::PathConfig::default()
        .error_handler(|err, _| describe_path_error(&err).into_api_error().into())
}

/// Registers the extractor configurations above (JSON and form bodies limited to `json_limit`).
pub fn configure_extractors(cfg: &mut web::ServiceConfig, json_limit: usize) {
    cfg.app_data(json_config(json_limit))
        .app_data(form_config(json_limit))
        .app_data(query_config())
        .app_data(path_config());
}

/// An actix-web `App` with Keel's error handling installed: request ids, the `detail` envelope
/// for every error (extractor errors, panics, 404 and 405), and the body limits. Mount modules
/// on it (see [`crate::module::mount`]) or add routes as usual.
pub fn app(
    limits: crate::module::BodyLimits,
) -> actix_web::App<
    impl actix_web::dev::ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = Error,
        InitError = (),
    >,
> {
    actix_web::App::new()
        .configure(|c| configure_extractors(c, limits.json))
        .default_service(web::to(not_found))
        .wrap(actix_web::middleware::from_fn(json_errors))
        .wrap(actix_web::middleware::from_fn(request_id))
}

/// The id of the current request, in the request's extensions.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// Middleware: takes the client's `X-Request-Id` (when it is a sane token) or makes a UUID, stores
/// it in the request's extensions for the log, and sets it on the response.
pub async fn request_id(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let id = req
        .headers()
        .get(&REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 200 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    req.extensions_mut().insert(RequestId(id.clone()));
    let mut response = next.call(req).await?;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    Ok(response)
}

/// Middleware: a handler that panics answers 500 `{"detail":"Internal server error"}` (the panic
/// goes to the log), and every error answer without a JSON body gets the `detail` envelope with
/// the status's reason (`Not Found`, `Method Not Allowed`, `Payload Too Large`, ...).
pub async fn json_errors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    // The request must not be cloned before routing (actix needs it uniquely owned), so errors
    // and panics are answered as `Err` values that actix renders.
    let response = match AssertUnwindSafe(next.call(req)).catch_unwind().await {
        Ok(Ok(response)) => response.map_into_boxed_body(),
        Ok(Err(error)) => {
            let rendered = error.error_response();
            return Err(if is_json(rendered.headers()) {
                error
            } else {
                envelope(rendered.status()).into()
            });
        }
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_owned());
            return Err(ApiError::internal(format!("handler panicked: {message}")).into());
        }
    };
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(response.headers()) {
        return Ok(response);
    }
    let (req, old) = response.into_parts();
    let mut fresh = envelope(status).error_response();
    for (name, value) in old.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            fresh.headers_mut().insert(name.clone(), value.clone());
        }
    }
    Ok(ServiceResponse::new(req, fresh))
}

fn is_json(headers: &header::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// The `detail` envelope for a bare status: its reason phrase (500s say `Internal server error`).
fn envelope(status: StatusCode) -> ApiError {
    if status == StatusCode::INTERNAL_SERVER_ERROR {
        ApiError::new(status, "Internal server error")
    } else {
        ApiError::new(status, status.canonical_reason().unwrap_or("Error"))
    }
}

/// The methods each route pattern answers (`/api/v1/blog/posts/{post}` → `GET, PUT, DELETE`), as app
/// data: the default service names them in the `Allow` header of a 405.
#[derive(Debug, Clone, Default)]
pub struct AllowedMethods(pub std::collections::HashMap<String, Vec<Method>>);

impl AllowedMethods {
    /// The methods of every operation of an OpenAPI document, by path; `aliases` lists
    /// `(documented prefix, alias prefix)` pairs whose routes answer the same.
    pub fn from_openapi(doc: &utoipa::openapi::OpenApi, aliases: &[(&str, &str)]) -> Self {
        let mut map = std::collections::HashMap::new();
        for (path, item) in &doc.paths.paths {
            let methods: Vec<Method> = [
                (Method::GET, item.get.is_some()),
                (Method::HEAD, item.get.is_some() || item.head.is_some()),
                (Method::POST, item.post.is_some()),
                (Method::PUT, item.put.is_some()),
                (Method::PATCH, item.patch.is_some()),
                (Method::DELETE, item.delete.is_some()),
            ]
            .into_iter()
            .filter_map(|(method, present)| present.then_some(method))
            .collect();
            for (documented, alias) in aliases {
                if let Some(rest) = path.strip_prefix(documented) {
                    map.insert(format!("{alias}{rest}"), methods.clone());
                }
            }
            map.insert(path.clone(), methods);
        }
        AllowedMethods(map)
    }

    /// The methods of every pattern `path` matches (a module may answer one path under two
    /// patterns, as long as their templates differ by more than a parameter's name), in a fixed
    /// order.
    pub fn for_path(&self, path: &str) -> Vec<Method> {
        let matching: Vec<&Vec<Method>> = self
            .0
            .iter()
            .filter(|(pattern, _)| pattern_matches(pattern, path))
            .map(|(_, methods)| methods)
            .collect();
        [
            Method::GET,
            Method::HEAD,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ]
        .into_iter()
        .filter(|m| matching.iter().any(|methods| methods.contains(m)))
        .collect()
    }
}

/// `/a/{x}/b` matches `/a/1/b`: segment by segment, a `{...}` segment matches any non-empty one.
fn pattern_matches(pattern: &str, path: &str) -> bool {
    let mut pattern = pattern.split('/');
    let mut path = path.split('/');
    loop {
        match (pattern.next(), path.next()) {
            (None, None) => return true,
            (Some(p), Some(s)) if p.starts_with('{') && p.ends_with('}') && !s.is_empty() => {}
            (Some(p), Some(s)) if p == s => {}
            _ => return false,
        }
    }
}

/// The default service: 405 `Method Not Allowed` (with `Allow` when [`AllowedMethods`] knows the
/// route) when the path names a route that exists for other methods, else 404 `Not Found`.
pub async fn not_found(req: HttpRequest) -> HttpResponse {
    let known = req.resource_map().has_resource(req.path());
    if !known || req.method() == Method::OPTIONS {
        return ApiError::not_found("Not Found").error_response();
    }
    let mut error = ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    let allowed = req
        .app_data::<web::Data<AllowedMethods>>()
        .map(|map| map.for_path(req.path()))
        .filter(|methods| !methods.is_empty());
    if let Some(methods) = allowed {
        let list = methods
            .iter()
            .map(Method::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        if let Ok(value) = HeaderValue::from_str(&list) {
            error = error.header(header::ALLOW, value);
        }
    }
    error.error_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::middleware::from_fn;
    use actix_web::{App, test as atest};

    #[derive(Debug, serde::Deserialize)]
    struct Pair {
        name: Option<String>,
        #[allow(dead_code)]
        slug: Option<String>,
    }

    async fn echo_pair(body: Json<Pair>) -> HttpResponse {
        HttpResponse::Ok().body(body.name.clone().unwrap_or_default())
    }

    /// The fast writer must write what serde_json writes: every escape, every control character,
    /// text outside ASCII, integers at their limits, nulls, nesting.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn json_bytes_are_serde_json_bytes() {
        let every_char: String = (0u32..0x300).filter_map(char::from_u32).collect();
        let value = serde_json::json!({
            "escapes": "quote \" backslash \\ slash / tab \t cr \r lf \n bell \u{7} del \u{7f}",
            "controls": (0u8..0x20).map(char::from).collect::<String>(),
            "every": every_char,
            "wide": "ünïcødé – 漢字 – 🦀 – \u{2028}\u{2029}",
            "html": "<p>a &amp; b</p>\n<script>x</script>",
            "numbers": [0, -1, i64::MIN, i64::MAX, u64::MAX],
            "nothing": null,
            "nested": {"list": [true, false, {"empty": {}}, []]},
        });
        let fast = to_json_bytes(&value).unwrap();
        let reference = serde_json::to_vec(&value).unwrap();
        assert_eq!(
            std::str::from_utf8(&fast).unwrap(),
            std::str::from_utf8(&reference).unwrap()
        );
        let long = "Some **markdown** <b>body</b> \"text\"\n".repeat(2_000);
        assert_eq!(
            &to_json_bytes(&long).unwrap()[..],
            &serde_json::to_vec(&long).unwrap()[..]
        );
    }

    #[actix_web::test]
    async fn a_json_body_must_be_an_object() {
        let app = atest::init_service(
            App::new()
                .app_data(json_config(1024))
                .route("/", web::post().to(echo_pair)),
        )
        .await;
        let send = |body: serde_json::Value| {
            atest::TestRequest::post()
                .uri("/")
                .set_json(body)
                .to_request()
        };
        let ok = atest::call_service(&app, send(serde_json::json!({"name": "a"}))).await;
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(atest::read_body(ok).await, "a");
        // serde alone would read `["a", null]` as the fields in order.
        for refused in [serde_json::json!(["a", null]), serde_json::json!("a")] {
            let answer = atest::call_service(&app, send(refused)).await;
            assert_eq!(answer.status(), StatusCode::UNPROCESSABLE_ENTITY);
            let body: serde_json::Value = atest::read_body_json(answer).await;
            assert!(
                body["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("expected a JSON object")),
                "{body}"
            );
        }
    }

    async fn optional_pair(body: OptionalJson<Pair>) -> HttpResponse {
        match body.0 {
            Some(pair) => HttpResponse::Ok().body(pair.name.unwrap_or_default()),
            None => HttpResponse::Ok().body("none"),
        }
    }

    #[actix_web::test]
    async fn an_optional_body_is_none_only_when_absent() {
        let app = atest::init_service(
            App::new()
                .app_data(json_config(1024))
                .route("/", web::post().to(optional_pair)),
        )
        .await;
        let absent = atest::call_service(&app, atest::TestRequest::post().uri("/").to_request());
        assert_eq!(atest::read_body(absent.await).await, "none");
        let sent = atest::TestRequest::post()
            .uri("/")
            .set_json(serde_json::json!({"name": "a"}))
            .to_request();
        assert_eq!(
            atest::read_body(atest::call_service(&app, sent).await).await,
            "a"
        );
        // A body that is sent but cannot be read is refused, never taken for "no body".
        for unreadable in [serde_json::json!({"name": 5}), serde_json::json!(["a"])] {
            let request = atest::TestRequest::post()
                .uri("/")
                .set_json(unreadable)
                .to_request();
            let answer = atest::call_service(&app, request).await;
            assert_eq!(answer.status(), StatusCode::UNPROCESSABLE_ENTITY);
        }
    }

    #[allow(clippy::panic)]
    async fn boom() -> HttpResponse {
        panic!("boom")
    }

    async fn plain_error() -> HttpResponse {
        HttpResponse::BadGateway().body("upstream said no")
    }

    #[actix_web::test]
    async fn panics_and_plain_errors_get_the_json_envelope() {
        let app = atest::init_service(
            App::new()
                .wrap(from_fn(json_errors))
                .route("/boom", web::get().to(boom))
                .route("/plain", web::get().to(plain_error))
                .default_service(web::to(not_found)),
        )
        .await;
        // An `Err` is what actix turns into the response with the error's own renderer.
        async fn answer(res: Result<ServiceResponse, Error>) -> (StatusCode, serde_json::Value) {
            let res = match res {
                Ok(res) => res.into_parts().1,
                Err(e) => e.error_response(),
            };
            let status = res.status();
            let body = actix_web::body::to_bytes(res.into_body())
                .await
                .unwrap_or_default();
            (status, serde_json::from_slice(&body).unwrap_or_default())
        }
        let get = |uri: &str| atest::TestRequest::get().uri(uri).to_request();
        let (status, body) = answer(atest::try_call_service(&app, get("/boom")).await).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body, serde_json::json!({"detail": "Internal server error"}));
        let (status, body) = answer(atest::try_call_service(&app, get("/plain")).await).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY);
        assert_eq!(body, serde_json::json!({"detail": "Bad Gateway"}));
        let post = atest::TestRequest::post().uri("/boom").to_request();
        let (status, body) = answer(atest::try_call_service(&app, post).await).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(body, serde_json::json!({"detail": "Method Not Allowed"}));
    }

    #[test]
    fn patterns_match_by_segment() {
        assert!(pattern_matches("/posts/{id}", "/posts/7"));
        assert!(pattern_matches("/posts/{id}/publish", "/posts/7/publish"));
        assert!(!pattern_matches("/posts/{id}", "/posts/7/publish"));
        assert!(!pattern_matches("/posts/{id}", "/posts/"));
        assert!(!pattern_matches("/tags", "/posts"));
    }

    #[test]
    fn serde_messages_name_their_field() {
        assert_eq!(
            field_of("missing field `password` at line 1"),
            Some("password".to_owned())
        );
        assert_eq!(field_of("invalid type: integer"), None);
    }
}
