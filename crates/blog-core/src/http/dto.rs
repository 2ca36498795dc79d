//! Request and response bodies (separate from the service's types and the database rows).

use chrono::{DateTime, NaiveDateTime, SubsecRound, Utc};
use kernel::{FieldError, Timestamp};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::domain::post::{PostStatus, SCHEDULE_MAX_DAYS};
use crate::domain::view::shown_excerpt;
use crate::error::BlogError;
use crate::service::{NewPost, NewTag, Post, PostPatch, Tag, TagPatch};

/// A tag.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = blog::BlogTagResponse)]
pub struct BlogTagResponse {
    pub id: i64,
    pub name: String,
    pub slug: String,
    pub created_at: Timestamp,
}

impl From<Tag> for BlogTagResponse {
    fn from(t: Tag) -> Self {
        BlogTagResponse {
            id: t.id,
            name: t.name,
            slug: t.slug,
            created_at: t.created_at.into(),
        }
    }
}

/// A post.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = blog::BlogPostResponse)]
pub struct BlogPostResponse {
    pub id: i64,
    pub title: String,
    pub slug: String,
    /// The post's excerpt; when it has none, plain text from the start of the content (up to
    /// 200 characters); null only when neither has any text.
    pub excerpt: Option<String>,
    /// Markdown.
    pub content: String,
    /// The content rendered to HTML when the post was written (GitHub-flavoured Markdown; raw
    /// HTML in the Markdown is escaped, shown as text).
    pub content_html: String,
    pub status: PostStatus,
    pub author_id: Option<i64>,
    pub author_name: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub published_at: Option<Timestamp>,
    pub seo_title: Option<String>,
    pub seo_description: Option<String>,
    pub hero_image_url: Option<String>,
    /// When a draft is to be published by itself (`POST /posts/{id}/publish` with a future
    /// `at`); null when it is not scheduled (always for published and archived posts).
    pub scheduled_at: Option<Timestamp>,
    /// Ordered by name.
    pub tags: Vec<BlogTagResponse>,
}

impl From<Post> for BlogPostResponse {
    fn from(p: Post) -> Self {
        BlogPostResponse {
            id: p.id,
            title: p.title,
            slug: p.slug,
            excerpt: shown_excerpt(p.excerpt.as_deref(), &p.derived_excerpt).map(str::to_owned),
            content: p.content,
            content_html: p.content_html,
            status: p.status,
            author_id: p.author_id,
            author_name: p.author_name,
            created_at: p.created_at.into(),
            updated_at: p.updated_at.into(),
            published_at: p.published_at.map(Timestamp),
            seo_title: p.seo_title,
            seo_description: p.seo_description,
            hero_image_url: p.hero_image_url,
            scheduled_at: p.scheduled_at.map(Timestamp),
            tags: p.tags.into_iter().map(BlogTagResponse::from).collect(),
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = blog::BlogPostListResponse)]
pub struct BlogPostListResponse {
    pub posts: Vec<BlogPostResponse>,
    /// Every post that matches, on all pages.
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = blog::BlogTagListResponse)]
pub struct BlogTagListResponse {
    pub tags: Vec<BlogTagResponse>,
    pub total: i64,
}

/// A new post; it starts as a draft.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = blog::BlogPostCreate)]
pub struct BlogPostCreate {
    #[schema(required = true, min_length = 1, max_length = 200)]
    pub title: Option<String>,
    /// Derived from the title when omitted; normalized like a derived slug.
    #[schema(max_length = 220)]
    pub slug: Option<String>,
    /// Markdown (default empty).
    pub content: Option<String>,
    #[schema(max_length = 500)]
    pub excerpt: Option<String>,
    /// Slugs of existing tags.
    pub tag_slugs: Option<Vec<String>>,
    #[schema(max_length = 200)]
    pub seo_title: Option<String>,
    #[schema(max_length = 320)]
    pub seo_description: Option<String>,
    #[schema(max_length = 1024)]
    pub hero_image_url: Option<String>,
}

impl From<BlogPostCreate> for NewPost {
    fn from(b: BlogPostCreate) -> Self {
        NewPost {
            title: b.title,
            slug: b.slug,
            content: b.content,
            excerpt: b.excerpt,
            tag_slugs: b.tag_slugs,
            seo_title: b.seo_title,
            seo_description: b.seo_description,
            hero_image_url: b.hero_image_url,
        }
    }
}

/// `Some(value)` for a field that is present (even as null), `None` when absent.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A change to a post: only the fields present change. `null` clears excerpt, seo_title,
/// seo_description and hero_image_url; `null` for title, slug and content is ignored;
/// `tag_slugs` as a list replaces the tags (`[]` removes them), omitted or null keeps them;
/// `scheduled_at: null` cancels a scheduled publication (a time is set through
/// `POST /posts/{id}/publish` with `at`).
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = blog::BlogPostUpdate)]
pub struct BlogPostUpdate {
    #[schema(max_length = 200)]
    pub title: Option<String>,
    #[schema(max_length = 220)]
    pub slug: Option<String>,
    pub content: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 500)]
    pub excerpt: Option<Option<String>>,
    pub tag_slugs: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 200)]
    pub seo_title: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 320)]
    pub seo_description: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 1024)]
    pub hero_image_url: Option<Option<String>>,
    /// Only `null`: cancels the post's scheduled publication (any other value is a 422; a
    /// time is set with `POST /posts/{id}/publish` and `at`).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub scheduled_at: Option<Option<serde_json::Value>>,
}

impl BlogPostUpdate {
    /// The change: 422 naming `scheduled_at` when it holds anything but `null`.
    pub fn into_patch(self) -> Result<PostPatch, BlogError> {
        let unschedule = match self.scheduled_at {
            None => false,
            Some(None) => true,
            Some(Some(_)) => {
                return Err(BlogError::Invalid(vec![FieldError::new(
                    "scheduled_at",
                    "scheduled_at can only be null here (it cancels a scheduled publication); \
                     schedule one with POST /posts/{id}/publish and {\"at\": ...}",
                )]));
            }
        };
        Ok(PostPatch {
            title: self.title,
            slug: self.slug,
            content: self.content,
            excerpt: self.excerpt,
            seo_title: self.seo_title,
            seo_description: self.seo_description,
            hero_image_url: self.hero_image_url,
            tag_slugs: self.tag_slugs,
            unschedule,
        })
    }
}

/// The optional body of `POST /posts/{id}/publish`.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = blog::BlogPublishRequest)]
pub struct BlogPublishRequest {
    /// When to publish: an RFC 3339 date-time (any offset; kept in UTC to the microsecond).
    /// In the future (at most 5 years ahead): the draft is scheduled. Now, in the past, or
    /// null: published now, as without a body.
    #[schema(format = DateTime, nullable = true)]
    pub at: Option<String>,
}

impl BlogPublishRequest {
    /// `at` in UTC, truncated to microseconds; 422 naming `at` unless it is RFC 3339 and within
    /// [`SCHEDULE_MAX_DAYS`] from now.
    pub fn at(&self) -> Result<Option<NaiveDateTime>, BlogError> {
        let Some(raw) = self.at.as_deref() else {
            return Ok(None);
        };
        let invalid = |message: String| BlogError::Invalid(vec![FieldError::new("at", message)]);
        let at = DateTime::parse_from_rfc3339(raw.trim())
            .map_err(|_| {
                invalid(
                    "at must be an RFC 3339 date-time with an offset, e.g. 2026-12-01T09:00:00Z"
                        .to_owned(),
                )
            })?
            .with_timezone(&Utc)
            .naive_utc()
            .trunc_subsecs(6);
        if at > kernel::time::now() + chrono::Duration::days(SCHEDULE_MAX_DAYS) {
            return Err(invalid(format!(
                "at must be at most {SCHEDULE_MAX_DAYS} days ahead"
            )));
        }
        Ok(Some(at))
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = blog::BlogTagCreate)]
pub struct BlogTagCreate {
    #[schema(required = true, min_length = 1, max_length = 80)]
    pub name: Option<String>,
    /// Derived from the name when omitted.
    #[schema(max_length = 100)]
    pub slug: Option<String>,
}

impl From<BlogTagCreate> for NewTag {
    fn from(b: BlogTagCreate) -> Self {
        NewTag {
            name: b.name,
            slug: b.slug,
        }
    }
}

/// A change to a tag; null or omitted fields are kept.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = blog::BlogTagUpdate)]
pub struct BlogTagUpdate {
    #[schema(max_length = 80)]
    pub name: Option<String>,
    #[schema(max_length = 100)]
    pub slug: Option<String>,
}

impl From<BlogTagUpdate> for TagPatch {
    fn from(b: BlogTagUpdate) -> Self {
        TagPatch {
            name: b.name,
            slug: b.slug,
        }
    }
}

/// The public list's query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PostListQuery {
    /// 1-based page number (default 1).
    #[param(minimum = 1)]
    pub page: Option<i64>,
    /// Posts per page (default 20, at most 100).
    #[param(minimum = 1, maximum = 100)]
    pub page_size: Option<i64>,
    /// Only posts with this tag (a tag slug).
    pub tag: Option<String>,
}

/// The editor list's query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AdminPostListQuery {
    /// 1-based page number (default 1).
    #[param(minimum = 1)]
    pub page: Option<i64>,
    /// Posts per page (default 20, at most 100).
    #[param(minimum = 1, maximum = 100)]
    pub page_size: Option<i64>,
    /// `draft`, `published` or `archived`.
    pub status: Option<String>,
    /// Only posts with this tag (a tag slug).
    pub tag: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// `markdown` (default: a zip of `<slug>.md` files) or `json`.
    pub format: Option<String>,
    /// Only posts of this status: `draft`, `published` or `archived`.
    pub status_filter: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ImportQuery {
    /// What to do with a post whose slug exists: `skip` (default), `overwrite` or `fail`.
    pub on_conflict: Option<String>,
}

/// The import upload: one file, `.md`/`.markdown`, `.zip` or `.json`.
#[derive(Debug, ToSchema)]
#[schema(as = blog::ImportUpload)]
pub struct ImportUpload {
    // Only documents the multipart body; the handler reads the parts as they stream in.
    #[allow(dead_code)]
    #[schema(value_type = String, format = Binary)]
    pub file: Vec<u8>,
}
