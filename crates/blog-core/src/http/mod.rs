//! HTTP handlers of the blog module (mounted at `/api/v1/blog` by the server), its request and
//! response types, and the write-level guard.

pub mod caching;
pub mod dto;
pub mod feeds;
pub mod posts;
pub mod tags;
pub mod transfer;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use actix_web::dev::Payload;
use actix_web::http::header::HeaderValue;
use actix_web::{FromRequest, HttpRequest, web};
use kernel::identity::{Access, Need};
use kernel::{ApiError, Role};

use crate::config::Protection;
use crate::service::{Author, BlogService};

/// What the handlers share.
pub struct BlogState {
    pub service: Arc<dyn BlogService>,
    pub protection: Protection,
    /// The largest import upload, in bytes.
    pub import_max_bytes: usize,
    /// Imports handled at once (`BLOG_IMPORT_CONCURRENCY`).
    pub imports: Arc<tokio::sync::Semaphore>,
    /// The public answers, cached (`READ_CACHE`); the service clears it after every write.
    pub public: Arc<crate::service::PublicCache>,
    /// `BLOG_CACHE_CONTROL`, as the public reads send it.
    pub cache_control: HeaderValue,
    /// What the feeds and the sitemap say about the blog, and where its posts live.
    pub site: Arc<crate::domain::feed::FeedSite>,
    /// `BLOG_FEED_ENTRIES`.
    pub feed_entries: i64,
    /// Whether a task queue is mounted: without one, a publication in the future is refused.
    pub can_schedule: bool,
}

/// The public answer for `key`: from the cache when fresh, else `produce`d (by one request when
/// several miss at once) and kept with its entity tag. `produce` runs as one unit of work
/// (`ReadCache::get_or_load_unit`), the service calls in it inline. A `304` for a matching
/// `If-None-Match` comes from the same entry ([`caching::CachedBody::respond`]).
pub(crate) async fn cached<F>(
    state: &BlogState,
    req: &HttpRequest,
    key: String,
    produce: F,
) -> Result<actix_web::HttpResponse, ApiError>
where
    F: Future<Output = Result<caching::CachedBody, ApiError>> + Send + 'static,
{
    let body = state.public.get_or_load_unit(key, produce).await?;
    Ok(body.respond(req, &state.cache_control))
}

/// [`cached`] for a JSON body.
pub(crate) async fn cached_body<F>(
    state: &BlogState,
    req: &HttpRequest,
    key: String,
    produce: F,
) -> Result<actix_web::HttpResponse, ApiError>
where
    F: Future<Output = Result<web::Bytes, ApiError>> + Send + 'static,
{
    cached(state, req, key, async move {
        Ok(caching::CachedBody::new(
            produce.await?,
            caching::JSON,
            None,
        ))
    })
    .await
}

/// Extractor for the write and editor endpoints: checks the caller against the protection level
/// and yields the author of new posts.
///
/// - `role`: an active administrator or moderator (401 without a valid token, 403
///   `Insufficient permissions` for other roles);
/// - `basic`: any active user (401 without a valid token);
/// - `none`: anyone; a valid token still names the author, an invalid one is ignored.
pub struct Editor(pub Author);

impl Editor {
    async fn resolve(req: &HttpRequest) -> Result<Editor, ApiError> {
        let state = req
            .app_data::<web::Data<BlogState>>()
            .ok_or_else(|| ApiError::internal("the blog module's state is not registered"))?;
        let need = match state.protection {
            Protection::Role => Need::Role(Role::Moderator),
            Protection::Basic => Need::User,
            Protection::None => {
                // Open writes: a token only names the author, and one that fails is ignored.
                let access = Access::of(req).await.unwrap_or(Access::Anonymous);
                return Ok(Editor(access.user().map(Author::from).unwrap_or_default()));
            }
        };
        let access = Access::of(req).await?;
        access.check(need)?;
        Ok(Editor(access.user().map(Author::from).unwrap_or_default()))
    }
}

impl FromRequest for Editor {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { Editor::resolve(&req).await })
    }
}
