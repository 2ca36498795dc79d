//! An uploaded import file, read in memory: one Markdown post, a zip of them, or a JSON array.
//! Runs on a blocking thread (decompression and parsing are CPU work). Zip entry names are only
//! used as names; nothing is ever written to disk.

use std::io::{Cursor, Read};

use chrono::NaiveDateTime;
use serde_json::Value;

use super::frontmatter::{IncomingPost, ItemError, parse_json_post, parse_markdown};

/// Entries bigger than this are checked against the compression ratio limit (small files of
/// repeated characters compress very well and are harmless).
pub const RATIO_CHECK_MIN_BYTES: u64 = 1024 * 1024;

/// The zip-bomb limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZipLimits {
    /// Entries in the archive, folders and ignored files included (`BLOG_IMPORT_MAX_ENTRIES`).
    pub max_entries: usize,
    /// Bytes unpacked from the Markdown entries in all (`BLOG_IMPORT_MAX_UNPACKED_BYTES`).
    pub max_unpacked_bytes: u64,
    /// Uncompressed size over compressed size of one entry (`BLOG_IMPORT_MAX_RATIO`).
    pub max_ratio: u64,
}

/// Why an upload was refused as a whole (400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadError {
    #[error("Unsupported file type. Use .md, .zip, or .json.")]
    Unsupported,
    /// A file to import from disk (the CLI) that cannot be read.
    #[error("Cannot read {0}")]
    Unreadable(String),
    #[error("Invalid UTF-8 in {0}")]
    InvalidUtf8(String),
    #[error("Invalid JSON in {file}: {message}")]
    Json { file: String, message: String },
    #[error("Expected a JSON array of posts in {0}")]
    NotAnArray(String),
    #[error("Invalid zip file: {0}")]
    Zip(String),
    #[error("Zip file has {count} entries: the limit is {limit} (BLOG_IMPORT_MAX_ENTRIES)")]
    TooManyEntries { count: usize, limit: usize },
    #[error("Zip file unpacks to more than {limit} bytes (BLOG_IMPORT_MAX_UNPACKED_BYTES)")]
    TooMuchUnpacked { limit: u64 },
    #[error("Zip entry {entry} is compressed more than {limit} to 1 (BLOG_IMPORT_MAX_RATIO)")]
    Ratio { entry: String, limit: u64 },
}

/// One post of an upload: where it came from, and the post or why it was refused.
#[derive(Debug, Clone)]
pub struct ParsedItem {
    /// The upload's file name, the zip entry's name, or `file.json[index]`.
    pub file: String,
    pub post: Result<IncomingPost, ItemError>,
}

/// What kind of file an upload is, by its name's extension (case-insensitive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadKind {
    Markdown,
    Zip,
    Json,
}

impl UploadKind {
    pub fn of(file_name: &str) -> Option<UploadKind> {
        let lower = file_name.trim().to_ascii_lowercase();
        if lower.ends_with(".md") || lower.ends_with(".markdown") {
            Some(UploadKind::Markdown)
        } else if lower.ends_with(".zip") {
            Some(UploadKind::Zip)
        } else if lower.ends_with(".json") {
            Some(UploadKind::Json)
        } else {
            None
        }
    }
}

/// Reads every post of an upload. Per-post problems (front matter, field limits) are kept in
/// the items; problems with the file itself refuse the whole upload.
pub fn parse_upload(
    file_name: &str,
    bytes: &[u8],
    limits: ZipLimits,
    now: NaiveDateTime,
) -> Result<Vec<ParsedItem>, UploadError> {
    let mut items = match UploadKind::of(file_name).ok_or(UploadError::Unsupported)? {
        UploadKind::Markdown => {
            let text = std::str::from_utf8(bytes)
                .map_err(|_| UploadError::InvalidUtf8(file_name.to_owned()))?;
            vec![ParsedItem {
                file: file_name.to_owned(),
                post: parse_markdown(file_name, text, now),
            }]
        }
        UploadKind::Json => parse_json(file_name, bytes, now)?,
        UploadKind::Zip => parse_zip(bytes, limits, now)?,
    };
    // Rendered here, off the executor, rather than while the posts are written.
    render_all(&mut items);
    Ok(items)
}

/// Items below which one thread renders them all: starting threads costs more than it saves.
const RENDER_ALONE: usize = 256;

/// Renders the posts' Markdown, a share of them on each core: on a large archive rendering is
/// most of the parsing, and the posts are written only once it is done.
fn render_all(items: &mut [ParsedItem]) {
    fn render(items: &mut [ParsedItem]) {
        for post in items.iter_mut().filter_map(|item| item.post.as_mut().ok()) {
            post.rendered = super::markdown::render(&post.content);
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores == 1 || items.len() < RENDER_ALONE {
        return render(items);
    }
    let share = items.len().div_ceil(cores);
    std::thread::scope(|scope| {
        for part in items.chunks_mut(share) {
            scope.spawn(|| render(part));
        }
    });
}

fn parse_json(
    file_name: &str,
    bytes: &[u8],
    now: NaiveDateTime,
) -> Result<Vec<ParsedItem>, UploadError> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| UploadError::InvalidUtf8(file_name.to_owned()))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: Value = serde_json::from_str(text).map_err(|e| UploadError::Json {
        file: file_name.to_owned(),
        message: e.to_string(),
    })?;
    let Value::Array(items) = value else {
        return Err(UploadError::NotAnArray(file_name.to_owned()));
    };
    Ok(items
        .into_iter()
        .enumerate()
        .map(|(i, item)| ParsedItem {
            file: format!("{file_name}[{i}]"),
            post: parse_json_post(item, now),
        })
        .collect())
}

/// Whether a zip entry is a post: a `.md`/`.markdown` file that is not a hidden file, macOS
/// metadata (`__MACOSX/`, `._name`) or a Hugo section page (`_index.md`).
fn is_post_entry(name: &str) -> bool {
    if UploadKind::of(name) != Some(UploadKind::Markdown) {
        return false;
    }
    let parts: Vec<&str> = name.split(['/', '\\']).filter(|p| !p.is_empty()).collect();
    let Some(file) = parts.last() else {
        return false;
    };
    let hidden = parts.iter().any(|p| p.starts_with('.') || *p == "__MACOSX");
    let section = file.to_ascii_lowercase().starts_with("_index.");
    !hidden && !section
}

/// A `..` component, or a path from the root (`/x`, `\\x`, `C:`).
fn escapes_the_archive(name: &str) -> bool {
    name.starts_with(['/', '\\'])
        || name.get(1..2) == Some(":")
        || name.split(['/', '\\']).any(|part| part == "..")
}

fn ratio_exceeded(size: u64, compressed: u64, limit: u64) -> bool {
    size > RATIO_CHECK_MIN_BYTES && size / compressed.max(1) > limit
}

fn parse_zip(
    bytes: &[u8],
    limits: ZipLimits,
    now: NaiveDateTime,
) -> Result<Vec<ParsedItem>, UploadError> {
    let mut archive =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| UploadError::Zip(e.to_string()))?;
    if archive.len() > limits.max_entries {
        return Err(UploadError::TooManyEntries {
            count: archive.len(),
            limit: limits.max_entries,
        });
    }
    let mut budget = limits.max_unpacked_bytes;
    let mut items = Vec::new();
    for index in 0..archive.len() {
        let entry = archive
            .by_index(index)
            .map_err(|e| UploadError::Zip(e.to_string()))?;
        if entry.is_dir() {
            continue;
        }
        let name = entry
            .name()
            .map_err(|e| UploadError::Zip(e.to_string()))?
            .into_owned();
        if UploadKind::of(&name) == Some(UploadKind::Markdown) && escapes_the_archive(&name) {
            // Names are never used as paths, but a `..` entry is a sign of a crafted archive:
            // report it rather than drop it silently.
            let message = "entry path leaves the archive (a `..` component or an absolute path)";
            items.push(ParsedItem {
                post: Err(ItemError::new(String::new(), message)),
                file: name,
            });
            continue;
        }
        if !is_post_entry(&name) {
            continue;
        }
        let (declared, compressed) = (entry.size(), entry.compressed_size());
        if declared > budget {
            return Err(UploadError::TooMuchUnpacked {
                limit: limits.max_unpacked_bytes,
            });
        }
        if ratio_exceeded(declared, compressed, limits.max_ratio) {
            return Err(UploadError::Ratio {
                entry: name,
                limit: limits.max_ratio,
            });
        }
        // The declared size may lie: never read more than what is left of the budget.
        let mut data =
            Vec::with_capacity(usize::try_from(declared).unwrap_or(0).min(16 * 1024 * 1024));
        entry
            .take(budget.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|e| UploadError::Zip(format!("{name}: {e}")))?;
        let size = data.len() as u64;
        if size > budget {
            return Err(UploadError::TooMuchUnpacked {
                limit: limits.max_unpacked_bytes,
            });
        }
        if ratio_exceeded(size, compressed, limits.max_ratio) {
            return Err(UploadError::Ratio {
                entry: name,
                limit: limits.max_ratio,
            });
        }
        budget -= size;
        let text = String::from_utf8(data).map_err(|_| UploadError::InvalidUtf8(name.clone()))?;
        let post = parse_markdown(&name, &text, now);
        items.push(ParsedItem { file: name, post });
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_extension() {
        assert_eq!(UploadKind::of("a.MD"), Some(UploadKind::Markdown));
        assert_eq!(UploadKind::of("a.markdown"), Some(UploadKind::Markdown));
        assert_eq!(UploadKind::of("posts.Zip"), Some(UploadKind::Zip));
        assert_eq!(UploadKind::of("x.json"), Some(UploadKind::Json));
        assert_eq!(UploadKind::of("x.txt"), None);
        assert_eq!(UploadKind::of("md"), None);
    }

    #[test]
    fn entries_leaving_the_archive() {
        assert!(escapes_the_archive("../evil.md"));
        assert!(escapes_the_archive("posts/../../evil.md"));
        assert!(escapes_the_archive("/etc/evil.md"));
        assert!(escapes_the_archive("C:\\evil.md"));
        assert!(!escapes_the_archive("posts/ok..md"));
        assert!(!escapes_the_archive("posts/a.md"));
    }

    #[test]
    fn post_entries() {
        assert!(is_post_entry("content/posts/a.md"));
        assert!(is_post_entry("b.markdown"));
        assert!(!is_post_entry("content/posts/_index.md"));
        assert!(!is_post_entry("__MACOSX/content/._a.md"));
        assert!(!is_post_entry("content/._a.md"));
        assert!(!is_post_entry(".github/README.md"));
        assert!(!is_post_entry("images/a.png"));
    }

    #[test]
    fn every_post_is_rendered_in_place_whatever_the_share() {
        let now = kernel::time::now();
        for count in [1, RENDER_ALONE - 1, RENDER_ALONE, 1001] {
            let posts: Vec<Value> = (0..count)
                .map(|i| {
                    let (title, content) = (format!("Post {i}"), format!("# Heading {i}"));
                    serde_json::json!({"title": title, "content": content})
                })
                .collect();
            let bytes = serde_json::to_vec(&posts).unwrap_or_default();
            let limits = ZipLimits {
                max_entries: 1,
                max_unpacked_bytes: 1,
                max_ratio: 1,
            };
            let items = parse_upload("posts.json", &bytes, limits, now).unwrap_or_default();
            assert_eq!(items.len(), count);
            for (i, item) in items.iter().enumerate() {
                let html = item.post.as_ref().map(|p| p.rendered.html.clone());
                let html = html.unwrap_or_default();
                assert_eq!(
                    html,
                    format!("<h1>Heading {i}</h1>\n"),
                    "item {i} of {count}"
                );
            }
        }
    }
}
