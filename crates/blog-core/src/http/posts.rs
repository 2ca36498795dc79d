//! Posts: the public list and page, the editor list, create, update, publish, archive, delete.

use actix_web::{HttpRequest, HttpResponse, delete, get, post, put, web};
use kernel::pagination::PageParams;
use kernel::{ApiError, FieldError};

use super::caching::{CachedBody, JSON};
use super::dto::{
    AdminPostListQuery, BlogPostCreate, BlogPostListResponse, BlogPostResponse, BlogPostUpdate,
    BlogPublishRequest, PostListQuery,
};
use super::{BlogState, Editor, cached, cached_body};
use crate::domain::post::PostStatus;
use crate::error::BlogError;
use crate::service::PostPage;

fn list_response(page: PostPage, number: i64, size: i64) -> BlogPostListResponse {
    BlogPostListResponse {
        posts: page.posts.into_iter().map(BlogPostResponse::from).collect(),
        total: page.total,
        page: number,
        page_size: size,
    }
}

/// A `status` query value: 422 naming `field` unless it is a status.
pub(crate) fn parse_status(
    field: &str,
    raw: Option<&str>,
) -> Result<Option<PostStatus>, BlogError> {
    match raw.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(raw) => PostStatus::parse(raw).map(Some).ok_or_else(|| {
            BlogError::Invalid(vec![FieldError::new(
                field,
                format!("{field} must be draft, published or archived"),
            )])
        }),
    }
}

fn tag_filter(tag: &Option<String>) -> Option<&str> {
    tag.as_deref().map(str::trim).filter(|t| !t.is_empty())
}

#[utoipa::path(
    tag = "blog",
    params(
        PostListQuery,
        ("If-None-Match" = Option<String>, Header, description = "Entity tags of cached copies (or *): 304 when one matches"),
    ),
    responses(
        (status = 200, description = "Published posts, newest publication first", body = BlogPostListResponse,
            headers(
                ("ETag" = String, description = "Strong entity tag of the body"),
                ("Cache-Control" = String, description = "BLOG_CACHE_CONTROL"),
            )),
        (status = 304, description = "Not modified: If-None-Match matches the current ETag (no body)"),
        (status = 422, description = "page < 1 or page_size outside 1..100"),
    )
)]
#[get("/posts")]
pub async fn list_posts(
    req: HttpRequest,
    state: web::Data<BlogState>,
    query: web::Query<PostListQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let page = PageParams {
        page: query.page,
        page_size: query.page_size,
    }
    .resolve()?;
    let tag = tag_filter(&query.tag).map(str::to_owned);
    let key = format!(
        "list:{}:{}:{}",
        page.page,
        page.page_size,
        tag.as_deref().unwrap_or("")
    );
    let service = state.service.clone();
    cached_body(&state, &req, key, async move {
        Ok(service.list_published_json(page, tag.as_deref()).await?)
    })
    .await
}

#[utoipa::path(
    tag = "blog",
    params(
        ("post" = String, Path, description = "The post's slug (`/posts/{post}` takes a slug with GET, an id with PUT and DELETE)"),
        ("If-None-Match" = Option<String>, Header, description = "Entity tags of cached copies (or *): 304 when one matches"),
    ),
    responses(
        (status = 200, body = BlogPostResponse,
            headers(
                ("ETag" = String, description = "Strong entity tag of the body"),
                ("Last-Modified" = String, description = "The post's updated_at, as an HTTP date"),
                ("Cache-Control" = String, description = "BLOG_CACHE_CONTROL"),
            )),
        (status = 304, description = "Not modified: If-None-Match matches the current ETag (no body)"),
        (status = 404, description = "Post not found (also when it is not published)"),
    )
)]
#[get("/posts/{post}")]
pub async fn get_post(
    req: HttpRequest,
    state: web::Data<BlogState>,
    slug: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let slug = slug.into_inner();
    let key = format!("post:{slug}");
    let service = state.service.clone();
    cached(&state, &req, key, async move {
        let (body, updated_at) = service.get_published_json(&slug).await?;
        Ok(CachedBody::new(body, JSON, Some(updated_at)))
    })
    .await
}

#[utoipa::path(
    tag = "blog",
    security(("bearer" = [])),
    params(AdminPostListQuery),
    responses(
        (status = 200, description = "Posts of every status, newest first", body = BlogPostListResponse),
        (status = 401, description = "Not authenticated"),
        (status = 403, description = "Insufficient permissions"),
        (status = 422, description = "Bad page, page_size or status"),
    )
)]
#[get("/admin/posts")]
pub async fn admin_list_posts(
    _editor: Editor,
    state: web::Data<BlogState>,
    query: web::Query<AdminPostListQuery>,
) -> Result<web::Json<BlogPostListResponse>, ApiError> {
    let query = query.into_inner();
    let page = PageParams {
        page: query.page,
        page_size: query.page_size,
    }
    .resolve()?;
    let status = parse_status("status", query.status.as_deref())?;
    let tag = tag_filter(&query.tag);
    let posts = state.service.list_all(page, status, tag).await?;
    Ok(web::Json(list_response(posts, page.page, page.page_size)))
}

#[utoipa::path(
    tag = "blog",
    security(("bearer" = [])),
    request_body = BlogPostCreate,
    responses(
        (status = 201, description = "Created as a draft", body = BlogPostResponse),
        (status = 401, description = "Not authenticated"),
        (status = 403, description = "Insufficient permissions"),
        (status = 409, description = "Post slug already exists: <slug>"),
        (status = 422, description = "A field breaks its limit, or Unknown tag: <slug>"),
    )
)]
#[post("/posts")]
pub async fn create_post(
    editor: Editor,
    state: web::Data<BlogState>,
    body: kernel::http::Json<BlogPostCreate>,
) -> Result<HttpResponse, ApiError> {
    let post = state
        .service
        .create_post(&editor.0, body.into_inner().into())
        .await?;
    Ok(HttpResponse::Created().json(BlogPostResponse::from(post)))
}

#[utoipa::path(
    tag = "blog",
    security(("bearer" = [])),
    params(("post" = i64, Path, description = "The post's id (`/posts/{post}` takes a slug with GET, an id with PUT and DELETE)")),
    request_body = BlogPostUpdate,
    responses(
        (status = 200, body = BlogPostResponse),
        (status = 401, description = "Not authenticated"),
        (status = 403, description = "Insufficient permissions"),
        (status = 404, description = "Post not found"),
        (status = 409, description = "Post slug already exists: <slug>"),
        (status = 422, description = "A field breaks its limit, Unknown tag: <slug>, or scheduled_at is not null"),
    )
)]
#[put("/posts/{post}")]
pub async fn update_post(
    _editor: Editor,
    state: web::Data<BlogState>,
    path: web::Path<i64>,
    body: kernel::http::Json<BlogPostUpdate>,
) -> Result<web::Json<BlogPostResponse>, ApiError> {
    let (id, patch) = (path.into_inner(), body.into_inner().into_patch()?);
    let post = state.service.update_post(id, patch).await?;
    Ok(web::Json(post.into()))
}

#[utoipa::path(
    tag = "blog",
    security(("bearer" = [])),
    params(("post_id" = i64, Path, description = "The post's id")),
    request_body(content = Option<BlogPublishRequest>, description = "Optional. Without a body (or without `at`), or with an `at` that has come, the post is published now. With an `at` in the future, a draft stays a draft with `scheduled_at` set and is published then by a background task (the tasks module must be mounted)."),
    responses(
        (status = 200, description = "Published (published_at is set the first time only), or scheduled: still a draft, with scheduled_at", body = BlogPostResponse),
        (status = 401, description = "Not authenticated"),
        (status = 403, description = "Insufficient permissions"),
        (status = 404, description = "Post not found"),
        (status = 409, description = "A future `at` without the tasks module mounted, or for a post that is not a draft"),
        (status = 413, description = "The body is over the limit"),
        (status = 422, description = "`at` is not an RFC 3339 date-time, or is too far ahead"),
        (status = 503, description = "The task queue cannot take the publication now (nothing changed): retry"),
    )
)]
#[post("/posts/{post_id}/publish")]
pub async fn publish_post(
    _editor: Editor,
    state: web::Data<BlogState>,
    path: web::Path<i64>,
    body: kernel::http::OptionalJson<BlogPublishRequest>,
) -> Result<web::Json<BlogPostResponse>, ApiError> {
    let id = path.into_inner();
    let at = match body.0 {
        Some(body) => body.at()?,
        None => None,
    };
    let post = match at {
        Some(at) if at > kernel::time::now() => {
            if !state.can_schedule {
                return Err(BlogError::SchedulingUnavailable.into());
            }
            state.service.schedule_post(id, at).await?
        }
        // Now or in the past: published now, as without a body.
        _ => state.service.publish_post(id).await?,
    };
    Ok(web::Json(post.into()))
}

#[utoipa::path(
    tag = "blog",
    security(("bearer" = [])),
    params(("post_id" = i64, Path, description = "The post's id")),
    responses(
        (status = 200, description = "Archived (from any state)", body = BlogPostResponse),
        (status = 401, description = "Not authenticated"),
        (status = 403, description = "Insufficient permissions"),
        (status = 404, description = "Post not found"),
    )
)]
#[post("/posts/{post_id}/archive")]
pub async fn archive_post(
    _editor: Editor,
    state: web::Data<BlogState>,
    path: web::Path<i64>,
) -> Result<web::Json<BlogPostResponse>, ApiError> {
    let post = state.service.archive_post(path.into_inner()).await?;
    Ok(web::Json(post.into()))
}

#[utoipa::path(
    tag = "blog",
    security(("bearer" = [])),
    params(("post" = i64, Path, description = "The post's id (`/posts/{post}` takes a slug with GET, an id with PUT and DELETE)")),
    responses(
        (status = 204, description = "Deleted with its tag links"),
        (status = 401, description = "Not authenticated"),
        (status = 403, description = "Insufficient permissions"),
        (status = 404, description = "Post not found"),
    )
)]
#[delete("/posts/{post}")]
pub async fn delete_post(
    _editor: Editor,
    state: web::Data<BlogState>,
    path: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    state.service.delete_post(path.into_inner()).await?;
    Ok(HttpResponse::NoContent().finish())
}
