//! The export formats: a JSON array of [`ExportedPost`], or a zip of `<slug>.md` files with YAML
//! front matter. Writers take batches of posts so that a large blog is never held in memory.

use std::io::{Seek, Write};

use chrono::NaiveDateTime;
use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};

use super::post::PostStatus;

pub const JSON_FILE_NAME: &str = "blog-export.json";
pub const ZIP_FILE_NAME: &str = "blog-export.zip";

/// What an export holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[schema(as = blog::ExportFormat)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    /// A zip of Markdown files with YAML front matter.
    Markdown,
    /// One JSON array.
    Json,
}

impl ExportFormat {
    pub fn parse(raw: &str) -> Option<ExportFormat> {
        match raw {
            "markdown" => Some(ExportFormat::Markdown),
            "json" => Some(ExportFormat::Json),
            _ => None,
        }
    }

    pub fn file_name(self) -> &'static str {
        match self {
            ExportFormat::Markdown => ZIP_FILE_NAME,
            ExportFormat::Json => JSON_FILE_NAME,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            ExportFormat::Markdown => "application/zip",
            ExportFormat::Json => "application/json",
        }
    }
}

/// A tag of an exported post.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = blog::ExportedTag)]
pub struct ExportedTag {
    pub name: String,
    pub slug: String,
}

/// One post of a JSON export, keys in this order. No ids: the slug is the natural key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = blog::ExportedPost)]
pub struct ExportedPost {
    pub title: String,
    pub slug: String,
    pub excerpt: Option<String>,
    pub content: String,
    pub status: PostStatus,
    pub author_name: Option<String>,
    #[serde(with = "kernel::time::rfc3339")]
    #[schema(value_type = kernel::Timestamp)]
    pub created_at: NaiveDateTime,
    #[serde(with = "kernel::time::rfc3339")]
    #[schema(value_type = kernel::Timestamp)]
    pub updated_at: NaiveDateTime,
    #[serde(with = "kernel::time::rfc3339_opt")]
    #[schema(value_type = Option<kernel::Timestamp>)]
    pub published_at: Option<NaiveDateTime>,
    pub seo_title: Option<String>,
    pub seo_description: Option<String>,
    pub hero_image_url: Option<String>,
    pub tags: Vec<ExportedTag>,
}

/// The YAML front matter of a Markdown export, keys in the contract's order, absent values left
/// out.
#[derive(Serialize)]
struct FrontMatter<'a> {
    title: &'a str,
    slug: &'a str,
    status: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    excerpt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    author: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    date: Option<String>,
    created_at: String,
    updated_at: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tags: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seo_title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seo_description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hero_image_url: Option<&'a str>,
}

/// YAML's line breaks besides `\n` and `\r`: the YAML writer leaves them raw inside a block
/// scalar, and its reader takes them for line breaks there, so a field holding one would not
/// read back the same.
const YAML_ONLY_LINE_BREAKS: [char; 3] = ['\u{85}', '\u{2028}', '\u{2029}'];

/// A post as a Markdown file: `---`, the YAML front matter, `---`, a blank line, the content
/// unchanged. A post whose fields hold a line break only YAML has (U+0085, U+2028, U+2029) gets
/// JSON front matter instead (`{...}`, as Hugo writes it), which reads back exactly.
pub fn render_markdown(post: &ExportedPost) -> Result<String, ExportWriteError> {
    let front = FrontMatter {
        title: &post.title,
        slug: &post.slug,
        status: post.status.as_str(),
        excerpt: post.excerpt.as_deref(),
        author: post.author_name.as_deref(),
        date: post.published_at.as_ref().map(kernel::time::format),
        created_at: kernel::time::format(&post.created_at),
        updated_at: kernel::time::format(&post.updated_at),
        tags: post.tags.iter().map(|t| t.name.as_str()).collect(),
        seo_title: post.seo_title.as_deref(),
        seo_description: post.seo_description.as_deref(),
        hero_image_url: post.hero_image_url.as_deref(),
    };
    let yaml = serde_yaml_ng::to_string(&front)?;
    if yaml.contains(YAML_ONLY_LINE_BREAKS) {
        let mut out = serde_json::to_string_pretty(&front)?;
        out.push_str("\n\n");
        out.push_str(&post.content);
        return Ok(out);
    }
    let yaml = yaml.strip_prefix("---\n").unwrap_or(&yaml);
    let mut out = String::with_capacity(yaml.len() + post.content.len() + 16);
    out.push_str("---\n");
    out.push_str(yaml);
    if !yaml.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("---\n\n");
    out.push_str(&post.content);
    Ok(out)
}

#[derive(Debug, thiserror::Error)]
pub enum ExportWriteError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Yaml(#[from] serde_yaml_ng::Error),
    #[error(transparent)]
    Zip(#[from] zip::result::ZipError),
}

/// Writes a pretty-printed JSON array of the posts (as `serde_json::to_writer_pretty` would) from
/// batches. Returns the writer and the number of posts.
pub fn write_json<W: Write>(
    writer: W,
    batches: impl Iterator<Item = Vec<ExportedPost>>,
) -> Result<(W, usize), ExportWriteError> {
    let mut serializer = serde_json::Serializer::pretty(writer);
    let mut seq = serializer.serialize_seq(None)?;
    let mut count = 0;
    for batch in batches {
        for post in &batch {
            seq.serialize_element(post)?;
            count += 1;
        }
    }
    seq.end()?;
    Ok((serializer.into_inner(), count))
}

/// Writes a zip with one `<slug>.md` per post from batches. Returns the writer and the number of
/// posts.
pub fn write_zip<W: Write + Seek>(
    writer: W,
    batches: impl Iterator<Item = Vec<ExportedPost>>,
) -> Result<(W, usize), ExportWriteError> {
    let mut zip = zip::ZipWriter::new(writer);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o644);
    let mut count = 0;
    for batch in batches {
        for post in &batch {
            zip.start_file(format!("{}.md", post.slug), options)?;
            zip.write_all(render_markdown(post)?.as_bytes())?;
            count += 1;
        }
    }
    Ok((zip.finish()?, count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::frontmatter::{IncomingPost, parse_markdown};

    fn at(s: &str) -> NaiveDateTime {
        chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| t.naive_utc())
            .unwrap_or_default()
    }

    fn sample() -> ExportedPost {
        ExportedPost {
            title: "Hello: a \"quoted\" title".to_owned(),
            slug: "hello".to_owned(),
            excerpt: Some("Short.\nTwo lines".to_owned()),
            content: "# Not the title\n\nBody with --- inside\n---\nand a rule.\n".to_owned(),
            status: PostStatus::Published,
            author_name: Some("Ada".to_owned()),
            created_at: at("2026-01-01T10:00:00.123456Z"),
            updated_at: at("2026-01-02T10:00:00Z"),
            published_at: Some(at("2026-01-01T12:00:00Z")),
            seo_title: None,
            seo_description: Some("SEO".to_owned()),
            hero_image_url: None,
            tags: vec![ExportedTag {
                name: "Rust".to_owned(),
                slug: "rust".to_owned(),
            }],
        }
    }

    #[test]
    fn markdown_keys_come_in_the_contract_order() {
        let md = render_markdown(&sample()).unwrap_or_default();
        let keys: Vec<&str> = md
            .lines()
            .skip(1)
            .take_while(|l| *l != "---")
            .filter(|l| !l.starts_with(' ') && !l.starts_with('-'))
            .filter_map(|l| l.split_once(':').map(|(k, _)| k))
            .collect();
        assert_eq!(
            keys,
            [
                "title",
                "slug",
                "status",
                "excerpt",
                "author",
                "date",
                "created_at",
                "updated_at",
                "tags",
                "seo_description"
            ]
        );
        assert!(
            md.ends_with("---\n\n# Not the title\n\nBody with --- inside\n---\nand a rule.\n"),
            "{md}"
        );
    }

    /// A post's Markdown, and what an import reads back from it.
    fn read_back(post: &ExportedPost) -> (String, IncomingPost) {
        let md = render_markdown(post).unwrap_or_default();
        let back = parse_markdown("hello.md", &md, at("2030-01-01T00:00:00Z"))
            .unwrap_or_else(|e| panic!("{}\n{md}", e.message));
        (md, back)
    }

    #[test]
    fn fields_with_yaml_only_line_breaks_get_json_front_matter() {
        let mut post = sample();
        post.hero_image_url = Some("\n\u{2028}".to_owned());
        post.title = "A\u{85}B\u{2029}C".to_owned();
        let (md, back) = read_back(&post);
        assert!(md.starts_with("{\n  \"title\""), "{md}");
        assert_eq!(back.title, post.title);
        assert_eq!(back.hero_image_url, post.hero_image_url);
        assert_eq!(back.content, post.content);
        assert_eq!(back.tags.len(), 1);
    }

    #[test]
    fn markdown_reads_back_to_the_same_post() {
        let post = sample();
        let (md, back) = read_back(&post);
        assert!(md.starts_with("---\n"), "{md}");
        assert_eq!(back.title, post.title);
        assert_eq!(back.content, post.content);
        assert_eq!(back.excerpt, post.excerpt);
        assert_eq!(back.published_at, post.published_at);
        assert_eq!(back.created_at, Some(post.created_at));
        assert_eq!(back.updated_at, Some(post.updated_at));
        assert_eq!(back.seo_description.as_deref(), Some("SEO"));
        assert_eq!(back.tags.len(), 1);
    }
}
