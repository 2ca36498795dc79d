//! The blog for feed readers and crawlers: the Atom and RSS feeds of the latest published posts
//! and the sitemap of every published post, cached and validated like the other public reads.

use actix_web::{HttpRequest, HttpResponse, get, web};
use kernel::ApiError;
use kernel::pagination::Page;
use serde::Deserialize;
use utoipa::IntoParams;

use super::caching::{ATOM, CachedBody, RSS, XML};
use super::{BlogState, cached};
use crate::domain::feed::{self, FeedPost, SITEMAP_MAX_URLS};
use crate::domain::slug::{TAG_SLUG_MAX, slugify};
use crate::domain::view::shown_excerpt;
use crate::service::Post;

/// A feed's query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FeedQuery {
    /// Only posts with this tag (a tag slug); an unknown tag gives an empty feed.
    pub tag: Option<String>,
}

#[derive(Clone, Copy)]
enum Format {
    Atom,
    Rss,
}

fn feed_posts(posts: &[Post]) -> Vec<FeedPost<'_>> {
    posts
        .iter()
        .map(|p| FeedPost {
            id: p.id,
            title: &p.title,
            slug: &p.slug,
            summary: shown_excerpt(p.excerpt.as_deref(), &p.derived_excerpt),
            content_html: &p.content_html,
            author_name: p.author_name.as_deref(),
            created_at: p.created_at,
            updated_at: p.updated_at,
            published_at: p.published_at,
            tags: p
                .tags
                .iter()
                .map(|t| (t.slug.as_str(), t.name.as_str()))
                .collect(),
        })
        .collect()
}

async fn feed(
    req: &HttpRequest,
    state: &BlogState,
    query: FeedQuery,
    format: Format,
) -> Result<HttpResponse, ApiError> {
    let tag = query
        .tag
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| slugify(t, TAG_SLUG_MAX));
    let name = match format {
        Format::Atom => "atom",
        Format::Rss => "rss",
    };
    let key = format!("{name}:{}", tag.as_deref().unwrap_or(""));
    let service = state.service.clone();
    let site = state.site.clone();
    let page = Page {
        page: 1,
        page_size: state.feed_entries,
    };
    cached(state, req, key, async move {
        let posts = match tag.as_deref() {
            // A tag whose slug is empty (only punctuation) matches no post.
            Some("") => Vec::new(),
            tag => service.list_published(page, tag).await?.posts,
        };
        let entries = feed_posts(&posts);
        let tag = tag.as_deref();
        let (text, content_type) = match format {
            Format::Atom => (feed::atom(&site, tag, &entries), ATOM),
            Format::Rss => (feed::rss(&site, tag, &entries), RSS),
        };
        Ok(CachedBody::new(text.into(), content_type, None))
    })
    .await
}

#[utoipa::path(
    tag = "blog",
    params(
        FeedQuery,
        ("If-None-Match" = Option<String>, Header, description = "Entity tags of cached copies (or *): 304 when one matches"),
    ),
    responses(
        (status = 200, description = "Atom 1.0 feed of the latest published posts (BLOG_FEED_ENTRIES), newest first, with absolute links (PUBLIC_BASE_URL, BLOG_POST_URL_TEMPLATE)",
            content_type = "application/atom+xml", body = String,
            headers(
                ("ETag" = String, description = "Strong entity tag of the body"),
                ("Cache-Control" = String, description = "BLOG_CACHE_CONTROL"),
            )),
        (status = 304, description = "Not modified: If-None-Match matches the current ETag (no body)"),
    )
)]
#[get("/feed.atom")]
pub async fn atom_feed(
    req: HttpRequest,
    state: web::Data<BlogState>,
    query: web::Query<FeedQuery>,
) -> Result<HttpResponse, ApiError> {
    feed(&req, &state, query.into_inner(), Format::Atom).await
}

#[utoipa::path(
    tag = "blog",
    params(
        FeedQuery,
        ("If-None-Match" = Option<String>, Header, description = "Entity tags of cached copies (or *): 304 when one matches"),
    ),
    responses(
        (status = 200, description = "RSS 2.0 feed of the latest published posts (BLOG_FEED_ENTRIES), newest first, with absolute links (PUBLIC_BASE_URL, BLOG_POST_URL_TEMPLATE)",
            content_type = "application/rss+xml", body = String,
            headers(
                ("ETag" = String, description = "Strong entity tag of the body"),
                ("Cache-Control" = String, description = "BLOG_CACHE_CONTROL"),
            )),
        (status = 304, description = "Not modified: If-None-Match matches the current ETag (no body)"),
    )
)]
#[get("/feed.rss")]
pub async fn rss_feed(
    req: HttpRequest,
    state: web::Data<BlogState>,
    query: web::Query<FeedQuery>,
) -> Result<HttpResponse, ApiError> {
    feed(&req, &state, query.into_inner(), Format::Rss).await
}

#[utoipa::path(
    tag = "blog",
    params(("If-None-Match" = Option<String>, Header, description = "Entity tags of cached copies (or *): 304 when one matches")),
    responses(
        (status = 200, description = "Sitemap (sitemaps.org protocol 0.9) of the published posts, newest publication first (at most 50,000), each with its lastmod (updated_at)",
            content_type = "application/xml", body = String,
            headers(
                ("ETag" = String, description = "Strong entity tag of the body"),
                ("Cache-Control" = String, description = "BLOG_CACHE_CONTROL"),
            )),
        (status = 304, description = "Not modified: If-None-Match matches the current ETag (no body)"),
    )
)]
#[get("/sitemap.xml")]
pub async fn sitemap(
    req: HttpRequest,
    state: web::Data<BlogState>,
) -> Result<HttpResponse, ApiError> {
    let service = state.service.clone();
    let site = state.site.clone();
    cached(&state, &req, "sitemap".to_owned(), async move {
        let entries = service.sitemap_entries(SITEMAP_MAX_URLS).await?;
        Ok(CachedBody::new(
            feed::sitemap(&site, &entries).into(),
            XML,
            None,
        ))
    })
    .await
}
