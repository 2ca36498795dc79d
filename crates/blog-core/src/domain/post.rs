//! Posts and tags without I/O: statuses, the lifecycle, field limits and their validation.

use chrono::NaiveDateTime;
use kernel::FieldError;
use serde::{Deserialize, Serialize};

use super::slug::{POST_SLUG_MAX, TAG_SLUG_MAX, slugify};

pub const TITLE_MAX: usize = 200;
pub const EXCERPT_MAX: usize = 500;
pub const SEO_TITLE_MAX: usize = 200;
pub const SEO_DESCRIPTION_MAX: usize = 320;
pub const HERO_IMAGE_URL_MAX: usize = 1024;
/// Content is Markdown of at most a million characters (the spec names no limit; a JSON body is
/// limited to 1 MiB anyway, and imports obey the same rule).
pub const CONTENT_MAX: usize = 1_000_000;
pub const TAG_NAME_MAX: usize = 80;
/// How far ahead a publication may be scheduled: about five years.
pub const SCHEDULE_MAX_DAYS: i64 = 5 * 366;

/// A post's place in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = blog::PostStatus)]
#[serde(rename_all = "lowercase")]
pub enum PostStatus {
    Draft,
    Published,
    Archived,
}

impl PostStatus {
    pub const ALL: [PostStatus; 3] = [
        PostStatus::Draft,
        PostStatus::Published,
        PostStatus::Archived,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PostStatus::Draft => "draft",
            PostStatus::Published => "published",
            PostStatus::Archived => "archived",
        }
    }

    /// Exactly `draft`, `published` or `archived`.
    pub fn parse(raw: &str) -> Option<PostStatus> {
        PostStatus::ALL.into_iter().find(|s| s.as_str() == raw)
    }
}

impl std::fmt::Display for PostStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Publishing: from any state to `published`; `published_at` is set the first time only (a
/// re-publish, or a publish after an archive, keeps the original date).
pub fn publish(
    published_at: Option<NaiveDateTime>,
    now: NaiveDateTime,
) -> (PostStatus, Option<NaiveDateTime>) {
    (PostStatus::Published, Some(published_at.unwrap_or(now)))
}

/// Archiving: from any state to `archived`; `published_at` is left alone, so that a later publish
/// keeps the original date.
pub fn archive(published_at: Option<NaiveDateTime>) -> (PostStatus, Option<NaiveDateTime>) {
    (PostStatus::Archived, published_at)
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Collects the failing fields of a request or an imported post.
#[derive(Debug, Default)]
pub struct Checker {
    pub errors: Vec<FieldError>,
}

impl Checker {
    pub fn fail(&mut self, field: &str, message: impl Into<String>) {
        self.errors.push(FieldError::new(field, message));
    }

    /// A NUL character in text: PostgreSQL cannot store one, so neither backend accepts it.
    pub fn no_nul(&mut self, field: &str, value: &str) -> bool {
        let clean = !value.contains('\0');
        if !clean {
            self.fail(field, format!("{field} must not contain NUL characters"));
        }
        clean
    }

    /// A post title: 1 to 200 characters, not blank. Returns it trimmed.
    pub fn title(&mut self, raw: &str) -> String {
        let title = raw.trim();
        if !self.no_nul("title", title) {
            return title.to_owned();
        }
        if title.is_empty() || chars(title) > TITLE_MAX {
            self.fail(
                "title",
                format!("title must be 1 to {TITLE_MAX} characters"),
            );
        }
        title.to_owned()
    }

    /// A field of at most `max` characters.
    pub fn max_len(&mut self, field: &str, value: &str, max: usize) {
        if self.no_nul(field, value) && chars(value) > max {
            self.fail(field, format!("{field} must be at most {max} characters"));
        }
    }

    /// The optional text fields every post has.
    pub fn post_extras(
        &mut self,
        excerpt: Option<&str>,
        seo_title: Option<&str>,
        seo_description: Option<&str>,
        hero: Option<&str>,
    ) {
        if let Some(v) = excerpt {
            self.max_len("excerpt", v, EXCERPT_MAX);
        }
        if let Some(v) = seo_title {
            self.max_len("seo_title", v, SEO_TITLE_MAX);
        }
        if let Some(v) = seo_description {
            self.max_len("seo_description", v, SEO_DESCRIPTION_MAX);
        }
        if let Some(v) = hero {
            self.max_len("hero_image_url", v, HERO_IMAGE_URL_MAX);
        }
    }

    pub fn content(&mut self, content: &str) {
        self.max_len("content", content, CONTENT_MAX);
    }

    /// A slug given by the client: over the limit it is refused (never cut); within it, it is
    /// normalized like a derived slug.
    pub fn given_slug(&mut self, field: &str, raw: &str, max: usize) -> String {
        if chars(raw) > max {
            self.fail(field, format!("{field} must be at most {max} characters"));
        }
        slugify(raw, max)
    }

    pub fn post_slug(&mut self, raw: &str) -> String {
        self.given_slug("slug", raw, POST_SLUG_MAX)
    }

    /// A tag name: 1 to 80 characters, not blank. Returns it trimmed.
    pub fn tag_name(&mut self, field: &str, raw: &str) -> String {
        let name = raw.trim();
        if !self.no_nul(field, name) {
            return name.to_owned();
        }
        if name.is_empty() || chars(name) > TAG_NAME_MAX {
            self.fail(
                field,
                format!("{field} must be 1 to {TAG_NAME_MAX} characters"),
            );
        }
        name.to_owned()
    }

    pub fn tag_slug(&mut self, field: &str, raw: &str) -> String {
        self.given_slug(field, raw, TAG_SLUG_MAX)
    }

    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// The messages joined into one line.
    pub fn summary(&self) -> String {
        summary(&self.errors)
    }
}

/// The messages of `errors` joined into one line, e.g. `title must be 1 to 200 characters`.
pub fn summary(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|e| e.message.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The case-insensitive key of a tag name (names collide case-insensitively).
pub fn tag_name_key(name: &str) -> String {
    name.trim().to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> NaiveDateTime {
        chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| t.naive_utc())
            .unwrap_or_default()
    }

    #[test]
    fn the_lifecycle_keeps_the_first_publication_date() {
        let first = at("2026-01-01T00:00:00Z");
        let later = at("2026-02-01T00:00:00Z");
        assert_eq!(publish(None, first), (PostStatus::Published, Some(first)));
        assert_eq!(
            publish(Some(first), later),
            (PostStatus::Published, Some(first))
        );
        assert_eq!(archive(Some(first)), (PostStatus::Archived, Some(first)));
        assert_eq!(archive(None), (PostStatus::Archived, None));
    }

    #[test]
    fn limits_name_their_field() {
        let mut check = Checker::default();
        check.title(&"x".repeat(201));
        check.post_extras(Some(&"é".repeat(501)), None, Some(&"d".repeat(320)), None);
        let fields: Vec<&str> = check.errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["title", "excerpt"]);
        assert_eq!(
            check.summary(),
            "title must be 1 to 200 characters; excerpt must be at most 500 characters"
        );
    }

    #[test]
    fn statuses_parse_exactly() {
        assert_eq!(PostStatus::parse("published"), Some(PostStatus::Published));
        assert_eq!(PostStatus::parse("Published"), None);
    }
}
