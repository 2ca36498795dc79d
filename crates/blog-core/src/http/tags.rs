//! Tags: list, create, update, delete.

use actix_web::{HttpRequest, HttpResponse, delete, get, post, put, web};
use kernel::ApiError;

use super::dto::{BlogTagCreate, BlogTagListResponse, BlogTagResponse, BlogTagUpdate};
use super::{BlogState, Editor, cached_json};

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
    cached_json(&state, &req, "tags".to_owned(), async move {
        let tags: Vec<BlogTagResponse> = service
            .list_tags()
            .await?
            .into_iter()
            .map(Into::into)
            .collect();
        let total = tags.len() as i64;
        Ok(BlogTagListResponse { tags, total })
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
