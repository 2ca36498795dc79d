//! The OpenAPI document's shared parts: the one error-body schema every error answer references,
//! and the bearer security scheme.

use serde::Serialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Content, OpenApi, RefOr, Response};
use utoipa::{PartialSchema, ToSchema};

use crate::FieldError;

/// Every error answer of the service: `{"detail": ...}`, where `detail` is a message, or (the
/// auth module's 422) the list of failing fields. Some 422s list the failing fields under
/// `errors` beside a message; a few answers add a field of their own, named in the route's
/// description (e.g. `available_tasks` beside `Unknown task`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ErrorBody)]
pub struct ErrorBody {
    pub detail: ErrorDetail,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<FieldError>>,
}

/// What went wrong: a message saying what to fix, or a list of failing fields.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ErrorDetail {
    Message(String),
    Fields(Vec<FieldError>),
}

/// The name of the bearer security scheme routes refer to: `security(("bearer" = []))`.
pub const BEARER: &str = "bearer";

/// The one route that touches no backing service (the liveness probe): every other operation
/// may answer 503 when the database or Redis does not.
const LIVENESS_PATH: &str = "/health/live";

/// Adds the shared parts to a document: the error-body schema (and a JSON body referencing it
/// on every 4xx and 5xx answer that declares none), the answers every route shares (422 for
/// input that cannot be read, 413 for a body over its limit, 414 for a URL over the server's
/// limit, 431 for a request head over its limit, 503 when a backing service is down) and the bearer security scheme. Without an identity provider (`identity` false) every
/// route is open, so the routes' security requirements and their 401 and 403 answers are
/// removed.
pub fn finish(doc: &mut OpenApi, identity: bool) {
    let components = doc.components.get_or_insert_with(Default::default);
    let mut schemas = vec![(ErrorBody::name().into_owned(), ErrorBody::schema())];
    ErrorBody::schemas(&mut schemas);
    components.schemas.extend(schemas);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("JWT")
                .build(),
        ),
    );
    let error_body = RefOr::Ref(utoipa::openapi::Ref::from_schema_name(ErrorBody::name()));
    for (path, item) in doc.paths.paths.iter_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
            &mut item.head,
            &mut item.options,
        ];
        for operation in operations.into_iter().flatten() {
            if let Some(RefOr::T(body)) = operation.request_body.as_mut() {
                optional_body_without_null(body);
            }
            // Every operation that reads a path, query or body can refuse what it is sent.
            let takes_input = operation.request_body.is_some()
                || operation.parameters.as_ref().is_some_and(|p| !p.is_empty());
            if takes_input && !operation.responses.responses.contains_key("422") {
                operation.responses.responses.insert(
                    "422".to_owned(),
                    RefOr::T(Response::new(
                        "A path, query or body value that cannot be read or breaks its rule",
                    )),
                );
            }
            let shared = [
                (
                    operation.request_body.is_some(),
                    "413",
                    "The body is over its size limit (the detail names the limit)",
                ),
                (
                    true,
                    "414",
                    "The URL (path and query) is longer than the server accepts (the detail names \
                     the limit)",
                ),
                (
                    true,
                    "431",
                    "The request line and headers are larger than the server accepts, or there \
                     are too many headers (the detail names both limits)",
                ),
                (
                    path != LIVENESS_PATH,
                    "503",
                    "A backing service (the database, Redis) is unavailable: retry after the \
                     `Retry-After` seconds",
                ),
            ];
            for (applies, status, description) in shared {
                if applies && !operation.responses.responses.contains_key(status) {
                    operation
                        .responses
                        .responses
                        .insert(status.to_owned(), RefOr::T(Response::new(description)));
                }
            }
            if !identity && operation.security.take().is_some() {
                operation.responses.responses.remove("401");
                operation.responses.responses.remove("403");
            }
            for (status, response) in operation.responses.responses.iter_mut() {
                let RefOr::T(response) = response else {
                    continue;
                };
                if response.description.is_empty() {
                    response.description = reason(status);
                }
                if status.starts_with('4') || status.starts_with('5') {
                    reference_error_body(response, &error_body);
                }
            }
        }
    }
}

/// An optional body (`request_body(content = Option<T>)`) is documented by utoipa as `T` or
/// JSON `null`; the routes take `T` or no body at all (`kernel::http::OptionalJson`), and a
/// `null` body is refused like any other non-object. The body's schema becomes `T` alone (it
/// stays not required), which generated clients also read as "may be left out".
fn optional_body_without_null(body: &mut utoipa::openapi::request_body::RequestBody) {
    use utoipa::openapi::schema::{Schema, SchemaType, Type};
    if matches!(body.required, Some(utoipa::openapi::Required::True)) {
        return;
    }
    let is_null = |schema: &RefOr<Schema>| matches!(schema, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null));
    for content in body.content.values_mut() {
        let RefOr::T(content) = content else {
            continue;
        };
        let Some(RefOr::T(Schema::OneOf(one_of))) = &content.schema else {
            continue;
        };
        if let [a, b] = one_of.items.as_slice() {
            let kept = match (is_null(a), is_null(b)) {
                (false, true) => a.clone(),
                (true, false) => b.clone(),
                _ => continue,
            };
            content.schema = Some(kept);
        }
    }
}

/// What makes a document invalid that each route alone cannot see, as readable lines (none for
/// a valid document): an `operationId` used twice (a generated client needs one name per
/// operation), and two path templates that differ only in a parameter's name (one path to
/// OpenAPI 3.1: `/posts/{slug}` and `/posts/{id}`).
pub fn conflicts(doc: &OpenApi) -> Vec<String> {
    let mut problems = Vec::new();
    let mut operation_ids: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    let mut shapes: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for (path, item) in &doc.paths.paths {
        let operations = [
            &item.get,
            &item.put,
            &item.post,
            &item.delete,
            &item.patch,
            &item.head,
            &item.options,
        ];
        for operation in operations.into_iter().flatten() {
            if let Some(id) = &operation.operation_id {
                operation_ids.entry(id).or_default().push(path);
            }
        }
        let shape = path
            .split('/')
            .map(|segment| {
                if segment.starts_with('{') && segment.ends_with('}') {
                    "{}"
                } else {
                    segment
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        shapes.entry(shape).or_default().push(path);
    }
    for (id, paths) in operation_ids {
        if paths.len() > 1 {
            problems.push(format!("operationId {id} is used by {}", paths.join(", ")));
        }
    }
    for paths in shapes.into_values() {
        if paths.len() > 1 {
            problems.push(format!(
                "{} differ only in parameter names",
                paths.join(" and ")
            ));
        }
    }
    problems
}

/// A response's required description, when the route gave none: the status's reason phrase.
fn reason(status: &str) -> String {
    status
        .parse::<u16>()
        .ok()
        .and_then(|code| actix_web::http::StatusCode::from_u16(code).ok())
        .and_then(|code| code.canonical_reason())
        .unwrap_or("Response")
        .to_owned()
}

fn reference_error_body(response: &mut Response, error_body: &RefOr<utoipa::openapi::Schema>) {
    if response.content.is_empty() {
        response.content.insert(
            "application/json".to_owned(),
            RefOr::T(Content::new(Some(error_body.clone()))),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::openapi::path::{HttpMethod, OperationBuilder, PathItem};
    use utoipa::openapi::{PathsBuilder, ResponseBuilder, ResponsesBuilder};

    #[test]
    fn error_answers_reference_the_error_body() {
        let operation = OperationBuilder::new()
            .responses(
                ResponsesBuilder::new()
                    .response("200", ResponseBuilder::new().description("ok"))
                    .response("404", ResponseBuilder::new().description("missing"))
                    .response("401", ResponseBuilder::new()),
            )
            .build();
        let mut doc = OpenApi::new(
            utoipa::openapi::Info::new("t", "1"),
            PathsBuilder::new().path("/x", PathItem::new(HttpMethod::Get, operation)),
        );
        finish(&mut doc, true);
        let json = serde_json::to_value(&doc).unwrap_or_default();
        let responses = &json["paths"]["/x"]["get"]["responses"];
        assert_eq!(
            responses["404"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorBody"
        );
        assert!(responses["200"].get("content").is_none());
        assert_eq!(responses["401"]["description"], "Unauthorized");
        assert!(json["components"]["schemas"]["ErrorDetail"].is_object());
        assert!(json["components"]["securitySchemes"]["bearer"].is_object());
    }

    #[test]
    fn an_optional_body_is_its_schema_without_null() {
        #[derive(serde::Deserialize, ToSchema)]
        #[allow(dead_code)]
        struct Body {
            at: Option<String>,
        }
        #[utoipa::path(post, path = "/x", request_body(content = Option<Body>), responses((status = 200)))]
        #[allow(dead_code)]
        fn optional() {}
        #[utoipa::path(post, path = "/y", request_body = Body, responses((status = 200)))]
        #[allow(dead_code)]
        fn required() {}
        #[derive(utoipa::OpenApi)]
        #[openapi(paths(optional, required))]
        struct Doc;
        let mut doc = <Doc as utoipa::OpenApi>::openapi();
        let before = serde_json::to_value(&doc).unwrap_or_default();
        let one_of = &before["paths"]["/x"]["post"]["requestBody"]["content"]["application/json"]["schema"]
            ["oneOf"];
        assert_eq!(one_of[1]["type"], "null", "{before}");
        finish(&mut doc, true);
        let json = serde_json::to_value(&doc).unwrap_or_default();
        for path in ["/x", "/y"] {
            let body = &json["paths"][path]["post"]["requestBody"];
            assert_eq!(
                body["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/Body",
                "{body}"
            );
            assert_eq!(body["required"].as_bool(), (path == "/y").then_some(true));
        }
    }

    #[test]
    fn conflicts_name_repeated_operation_ids_and_equivalent_templates() {
        let named = |id: &str| {
            OperationBuilder::new()
                .operation_id(Some(id.to_owned()))
                .build()
        };
        let doc = |paths: &[(&str, &str)]| {
            let mut builder = PathsBuilder::new();
            for (path, id) in paths {
                builder = builder.path(*path, PathItem::new(HttpMethod::Get, named(id)));
            }
            OpenApi::new(utoipa::openapi::Info::new("t", "1"), builder)
        };
        assert!(conflicts(&doc(&[("/a/{x}", "a"), ("/a/{x}/b", "b"), ("/a", "c")])).is_empty());
        assert_eq!(
            conflicts(&doc(&[("/a/health", "health"), ("/b/health", "health")])),
            ["operationId health is used by /a/health, /b/health"]
        );
        assert_eq!(
            conflicts(&doc(&[
                ("/posts/{slug}", "get"),
                ("/posts/{post_id}", "put")
            ])),
            ["/posts/{post_id} and /posts/{slug} differ only in parameter names"]
        );
    }
}
