//! Tags: list, create, update, delete.

use actix_web::{HttpRequest, HttpResponse, delete, get, post, put, web};
use kernel::ApiError;

use super::dto::{BlogTagCreate, BlogTagListResponse, BlogTagResponse, BlogTagUpdate};
use super::{BlogState, Editor, cached_body};
use crate::domain::view;
use crate::service::Tag;

/// The list as [`BlogTagListResponse`] serializes, written by hand (see `kernel::json`).
fn tag_list_json(tags: &[Tag]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + tags.len() * 100);
    out.extend_from_slice(b"{\"tags\":[");
    for (i, t) in tags.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        view::push_tag(&mut out, t.id, &t.name, &t.slug, &t.created_at);
    }
    out.extend_from_slice(b"],\"total\":");
    kernel::json::push_int(&mut out, tags.len() as i64);
    out.push(b'}');
    out
}

#[utoipa::path(
    tag = "blog",
    params(("If-None-Match" = Option<String>, Header, description = "Entity tags of cached copies (or *): 304 when one matches")),
    responses(
        (status = 200, description = "Every tag, ordered by name", body = BlogTagListResponse,
            headers(
                ("ETag" = String, description = "Strong entity tag of the body"),
                ("Cache-Control" = String, description = "BLOG_CACHE_CONTROL"),
            )),
        (status = 304, description = "Not modified: If-None-Match matches the current ETag (no body)"),
    )
)]
#[get("/tags")]
pub async fn list_tags(
    req: HttpRequest,
    state: web::Data<BlogState>,
) -> Result<HttpResponse, ApiError> {
    let service = state.service.clone();
    cached_body(&state, &req, "tags".to_owned(), async move {
        let tags = service.list_tags().await?;
        Ok(tag_list_json(&tags).into())
    })
    .await
}

#[utoipa::path(
    tag = "blog",
    security(("bearer" = [])),
    request_body = BlogTagCreate,
    responses(
        (status = 201, body = BlogTagResponse),
        (status = 401, description = "Not authenticated"),
        (status = 403, description = "Insufficient permissions"),
        (status = 409, description = "Tag already exists: <slug> (names collide case-insensitively)"),
        (status = 422, description = "name or slug breaks its limit"),
    )
)]
#[post("/tags")]
pub async fn create_tag(
    _editor: Editor,
    state: web::Data<BlogState>,
    body: kernel::http::Json<BlogTagCreate>,
) -> Result<HttpResponse, ApiError> {
    let tag = state.service.create_tag(body.into_inner().into()).await?;
    Ok(HttpResponse::Created().json(BlogTagResponse::from(tag)))
}

#[utoipa::path(
    tag = "blog",
    security(("bearer" = [])),
    params(("tag_id" = i64, Path, description = "The tag's id")),
    request_body = BlogTagUpdate,
    responses(
        (status = 200, body = BlogTagResponse),
        (status = 401, description = "Not authenticated"),
        (status = 403, description = "Insufficient permissions"),
        (status = 404, description = "Tag not found"),
        (status = 409, description = "Tag already exists: <slug>"),
        (status = 422, description = "name or slug breaks its limit"),
    )
)]
#[put("/tags/{tag_id}")]
pub async fn update_tag(
    _editor: Editor,
    state: web::Data<BlogState>,
    path: web::Path<i64>,
    body: kernel::http::Json<BlogTagUpdate>,
) -> Result<web::Json<BlogTagResponse>, ApiError> {
    let (id, patch) = (path.into_inner(), body.into_inner().into());
    let tag = state.service.update_tag(id, patch).await?;
    Ok(web::Json(tag.into()))
}

#[utoipa::path(
    tag = "blog",
    security(("bearer" = [])),
    params(("tag_id" = i64, Path, description = "The tag's id")),
    responses(
        (status = 204, description = "Deleted and removed from every post"),
        (status = 401, description = "Not authenticated"),
        (status = 403, description = "Insufficient permissions"),
        (status = 404, description = "Tag not found"),
    )
)]
#[delete("/tags/{tag_id}")]
pub async fn delete_tag(
    _editor: Editor,
    state: web::Data<BlogState>,
    path: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    state.service.delete_tag(path.into_inner()).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use chrono::DateTime;
    use proptest::prelude::*;

    use super::*;

    proptest! {
        // Nothing is written into the source tree (a failure prints its input).
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn the_tag_list_is_written_as_serde_writes_its_response(
            tags in proptest::collection::vec(
                (any::<i64>(), any::<String>(), any::<String>(), -62_135_596_800_000_000i64..300_000_000_000_000_000),
                0..4,
            ),
        ) {
            let tags: Vec<Tag> = tags
                .into_iter()
                .map(|(id, name, slug, micros)| Tag {
                    id,
                    name,
                    slug,
                    created_at: DateTime::from_timestamp_micros(micros).unwrap().naive_utc(),
                })
                .collect();
            let by_hand = tag_list_json(&tags);
            let total = tags.len() as i64;
            let by_serde = serde_json::to_vec(&BlogTagListResponse {
                tags: tags.into_iter().map(BlogTagResponse::from).collect(),
                total,
            })
            .unwrap();
            prop_assert_eq!(by_hand, by_serde);
        }
    }
}
