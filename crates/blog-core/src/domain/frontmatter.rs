//! Reading posts written for static-site generators: YAML (`---`: Jekyll, Hugo, Astro, Eleventy),
//! TOML (`+++`: Hugo) and JSON (`{...}`: Hugo) front matter, their aliases, file-name
//! conventions, dates and status rules; and the elements of a JSON export.

use chrono::{DateTime, NaiveDate, NaiveDateTime, SubsecRound};
use serde_json::{Map, Value};

use super::markdown::Rendered;
use super::post::{Checker, PostStatus};
use super::slug::{EMPTY_SLUG, POST_SLUG_MAX, TAG_SLUG_MAX, slugify, title_from_slug};

/// A tag named by an imported post (created when missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingTag {
    pub name: String,
    pub slug: String,
}

/// An imported post, validated against the same limits as the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingPost {
    pub title: String,
    pub slug: String,
    pub excerpt: Option<String>,
    pub content: String,
    pub status: PostStatus,
    pub author_name: Option<String>,
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
    pub published_at: Option<NaiveDateTime>,
    pub seo_title: Option<String>,
    pub seo_description: Option<String>,
    pub hero_image_url: Option<String>,
    pub tags: Vec<IncomingTag>,
    /// The content rendered (filled in off the executor, once the upload is parsed).
    pub rendered: Rendered,
}

/// Why one imported post was refused; the others still land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemError {
    /// The post's slug when it could be worked out, else empty.
    pub slug: String,
    pub message: String,
}

impl ItemError {
    pub(crate) fn new(slug: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            slug: slug.into(),
            message: message.into(),
        }
    }
}

/// A Markdown file: optional front matter, then the content. `path` is the file's name inside the
/// upload (folders allowed); its stem is the slug when the front matter has none.
pub fn parse_markdown(
    path: &str,
    text: &str,
    now: NaiveDateTime,
) -> Result<IncomingPost, ItemError> {
    let fallback_slug = path_slug(path).map(|(slug, _)| slug).unwrap_or_default();
    let (fields, body) = split_front_matter(text).map_err(|m| ItemError::new(fallback_slug, m))?;
    build(fields, Some(body), Some(path), now)
}

/// One element of a JSON import: an ExportedPost (also the reference implementation's shape with
/// `tag_slugs`), read with the same aliases as front matter.
pub fn parse_json_post(value: Value, now: NaiveDateTime) -> Result<IncomingPost, ItemError> {
    match value {
        Value::Object(fields) => build(fields, None, None, now),
        other => Err(ItemError::new(
            "",
            format!("Expected a post object, found {}", kind(&other)),
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

// ---------------------------------------------------------------------------------------------
// Front matter

/// Splits a Markdown file into its front matter (as a JSON object) and its content. The content
/// starts after the closing delimiter line, less one blank line.
pub fn split_front_matter(text: &str) -> Result<(Map<String, Value>, String), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Some(fenced) = fenced(text, "---", Some("...")) {
        let (inner, body) = fenced?;
        return Ok((yaml_fields(inner)?, strip_blank_line(body).to_owned()));
    }
    if let Some(fenced) = fenced(text, "+++", None) {
        let (inner, body) = fenced?;
        return Ok((toml_fields(inner)?, strip_blank_line(body).to_owned()));
    }
    if text.starts_with('{') {
        // The object's end is not known before it is read: check the first bytes' nesting, then
        // the size of what was read.
        let mut head = text.len().min(FRONT_MATTER_MAX_BYTES);
        while !text.is_char_boundary(head) {
            head -= 1;
        }
        check_json_front_matter_depth(&text[..head])?;
        let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        return match stream.next() {
            Some(Ok(_)) if stream.byte_offset() > FRONT_MATTER_MAX_BYTES => Err(too_large()),
            Some(Ok(Value::Object(map))) => {
                let rest = &text[stream.byte_offset()..];
                // The rest of the line that closes the object, then one blank line.
                let rest = match rest.find('\n') {
                    Some(i) if rest[..i].trim().is_empty() => &rest[i + 1..],
                    _ => rest.trim_start_matches([' ', '\t']),
                };
                Ok((map, strip_blank_line(rest).to_owned()))
            }
            Some(Ok(_)) => Err("Invalid JSON front matter: expected an object".to_owned()),
            Some(Err(e)) => Err(format!("Invalid JSON front matter: {e}")),
            None => Err("Invalid JSON front matter: empty".to_owned()),
        };
    }
    Ok((Map::new(), text.to_owned()))
}

/// The text between a first line `fence` and the next line `fence` (or `alt_close`), and the text
/// after that line. `None` when the file does not start with `fence`.
fn fenced<'a>(
    text: &'a str,
    fence: &str,
    alt_close: Option<&str>,
) -> Option<Result<(&'a str, &'a str), String>> {
    let mut lines = text.split_inclusive('\n');
    let first = lines.next()?;
    if first.trim_end() != fence {
        return None;
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        let t = line.trim_end();
        if t == fence || alt_close == Some(t) {
            return Some(Ok((&text[start..offset], &text[offset + line.len()..])));
        }
        offset += line.len();
    }
    Some(Err(format!(
        "Front matter opened with {fence} is never closed"
    )))
}

fn strip_blank_line(body: &str) -> &str {
    body.strip_prefix("\r\n")
        .or_else(|| body.strip_prefix('\n'))
        .unwrap_or(body)
}

/// The largest front matter read: metadata, not content.
pub const FRONT_MATTER_MAX_BYTES: usize = 64 * 1024;
/// The deepest nesting of `[` and `{` in front matter.
pub const FRONT_MATTER_MAX_DEPTH: usize = 32;

fn too_large() -> String {
    format!("Front matter too large: at most {FRONT_MATTER_MAX_BYTES} bytes")
}

/// Refuses front matter too large or too deeply nested before a parser sees it: a YAML parser
/// spends seconds of CPU on `x: [[[[…]]]]` nested 100,000 deep.
fn check_front_matter_shape(inner: &str) -> Result<(), String> {
    if inner.len() > FRONT_MATTER_MAX_BYTES {
        return Err(too_large());
    }
    let mut depth = 0usize;
    for byte in inner.bytes() {
        match byte {
            b'[' | b'{' => {
                depth += 1;
                if depth > FRONT_MATTER_MAX_DEPTH {
                    return Err(too_deep());
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// The nesting check of JSON front matter, which knows JSON's strings: brackets inside a string
/// do not count, and the scan ends with the object (the content after it is not front matter).
fn check_json_front_matter_depth(text: &str) -> Result<(), String> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > FRONT_MATTER_MAX_DEPTH {
                    return Err(too_deep());
                }
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn too_deep() -> String {
    format!("Front matter nested too deeply: at most {FRONT_MATTER_MAX_DEPTH} levels of [ and {{")
}

fn yaml_fields(inner: &str) -> Result<Map<String, Value>, String> {
    check_front_matter_shape(inner)?;
    if inner.trim().is_empty() {
        return Ok(Map::new());
    }
    let value: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(inner).map_err(|e| format!("Invalid YAML front matter: {e}"))?;
    match yaml_to_json(value) {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        _ => Err("Invalid YAML front matter: expected key: value pairs".to_owned()),
    }
}

fn yaml_to_json(value: serde_yaml_ng::Value) -> Value {
    use serde_yaml_ng::Value as Y;
    match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(Value::Null, Value::Number)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(yaml_to_json).collect()),
        Y::Mapping(map) => Value::Object(
            map.into_iter()
                .filter_map(|(k, v)| {
                    let key = match yaml_to_json(k) {
                        Value::String(s) => s,
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        _ => return None,
                    };
                    Some((key, yaml_to_json(v)))
                })
                .collect(),
        ),
        Y::Tagged(tagged) => yaml_to_json(tagged.value),
    }
}

fn toml_fields(inner: &str) -> Result<Map<String, Value>, String> {
    check_front_matter_shape(inner)?;
    let table: toml::Table =
        toml::from_str(inner).map_err(|e| format!("Invalid TOML front matter: {}", e.message()))?;
    Ok(table
        .into_iter()
        .map(|(k, v)| (k, toml_to_json(v)))
        .collect())
}

fn toml_to_json(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => {
            Value::Object(t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// From fields to a post

/// The first present, non-null value among `keys`, with the key that held it.
fn first<'a>(
    fields: &'a Map<String, Value>,
    keys: &[&'static str],
) -> Option<(&'static str, &'a Value)> {
    keys.iter()
        .find_map(|k| fields.get(*k).filter(|v| !v.is_null()).map(|v| (*k, v)))
}

/// A scalar as text; lists and objects are refused (numbers and booleans are written as text).
fn text(check: &mut Checker, fields: &Map<String, Value>, keys: &[&'static str]) -> Option<String> {
    let (key, value) = first(fields, keys)?;
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => {
            check.fail(key, format!("{key} must be text"));
            None
        }
    }
}

/// `true`/`false`, also written as a string.
fn boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s.trim().eq_ignore_ascii_case("true") => Some(true),
        Value::String(s) if s.trim().eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

/// An author: a name, a list of names (joined), or an object with a `name`.
fn author(check: &mut Checker, fields: &Map<String, Value>) -> Option<String> {
    let (key, value) = first(fields, &["author_name", "author"])?;
    let name = match value {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(|i| match i {
                    Value::String(s) => Some(s.trim().to_owned()),
                    Value::Object(o) => o
                        .get("name")
                        .and_then(Value::as_str)
                        .map(|s| s.trim().to_owned()),
                    _ => None,
                })
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(", "),
        ),
        Value::Object(o) => o
            .get("name")
            .and_then(Value::as_str)
            .map(|s| s.trim().to_owned()),
        _ => None,
    };
    match name {
        Some(n) if !n.is_empty() => {
            check.no_nul(key, &n);
            Some(n)
        }
        Some(_) => None,
        None => {
            check.fail(key, format!("{key} must be a name"));
            None
        }
    }
}

/// A hero image: a URL, or an object holding one under `image`, `src` or `url` (Hugo themes write
/// `cover: {image: ...}`).
fn hero_image(check: &mut Checker, fields: &Map<String, Value>) -> Option<String> {
    let keys = [
        "hero_image_url",
        "image",
        "cover",
        "coverImage",
        "heroImage",
        "hero",
        "feature_image",
    ];
    let (key, value) = first(fields, &keys)?;
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => match ["image", "src", "url"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str))
        {
            Some(url) => Some(url.to_owned()),
            None => {
                check.fail(key, format!("{key} must be an image URL"));
                None
            }
        },
        _ => {
            check.fail(key, format!("{key} must be an image URL"));
            None
        }
    }
}

/// A date: RFC 3339, `YYYY-MM-DD`, Jekyll's `YYYY-MM-DD HH:MM:SS +0000`, a date and time
/// without a zone (read as UTC), or `Jul 08 2022`. Kept to microseconds.
pub fn parse_date(raw: &str) -> Option<NaiveDateTime> {
    let raw = raw.trim();
    let zoned = match raw.strip_suffix(['Z', 'z']) {
        Some(rest) => format!("{}+00:00", rest.trim_end()),
        None => raw.to_owned(),
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(&zoned) {
        return Some(t.naive_utc().trunc_subsecs(6));
    }
    const ZONED: [&str; 6] = [
        "%Y-%m-%d %H:%M:%S%.f %z",
        "%Y-%m-%d %H:%M:%S%.f%z",
        "%Y-%m-%dT%H:%M:%S%.f%z",
        "%Y-%m-%d %H:%M %z",
        "%Y-%m-%dT%H:%M%z",
        "%Y-%m-%d %H:%M%z",
    ];
    for format in ZONED {
        if let Ok(t) = DateTime::parse_from_str(&zoned, format) {
            return Some(t.naive_utc().trunc_subsecs(6));
        }
    }
    const NAIVE: [&str; 4] = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ];
    for format in NAIVE {
        if let Ok(t) = NaiveDateTime::parse_from_str(raw, format) {
            return Some(t.trunc_subsecs(6));
        }
    }
    // `2024-01-15`, and month names as Astro's starter writes them (`Jul 08 2022`).
    const DATES: [&str; 5] = ["%Y-%m-%d", "%b %d %Y", "%b %d, %Y", "%B %d %Y", "%B %d, %Y"];
    DATES
        .iter()
        .find_map(|format| NaiveDate::parse_from_str(raw, format).ok())
        .and_then(|d| d.and_hms_opt(0, 0, 0))
}

fn date(
    check: &mut Checker,
    fields: &Map<String, Value>,
    keys: &[&'static str],
) -> Option<NaiveDateTime> {
    let (key, value) = first(fields, keys)?;
    let parsed = value.as_str().and_then(parse_date);
    if parsed.is_none() {
        check.fail(key, format!("{key} is not a date: {value}"));
    }
    parsed
}

/// A tag as written: a name, or `{name, slug}`.
struct RawTag {
    name: Option<String>,
    slug: Option<String>,
}

/// Tags from a list or a comma-separated string. `space_separated`: a string without commas is
/// split on spaces (Jekyll's `categories: news updates`).
fn raw_tags(
    check: &mut Checker,
    key: &str,
    value: &Value,
    space_separated: bool,
    out: &mut Vec<RawTag>,
) {
    let name = |s: &str| RawTag {
        name: Some(s.trim().to_owned()),
        slug: None,
    };
    match value {
        Value::Null => {}
        Value::String(s) if s.contains(',') || !space_separated => {
            out.extend(s.split(',').map(name))
        }
        Value::String(s) => out.extend(s.split_whitespace().map(name)),
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::String(s) => out.push(name(s)),
                    Value::Number(n) => out.push(name(&n.to_string())),
                    Value::Object(o) => out.push(RawTag {
                        name: o
                            .get("name")
                            .and_then(Value::as_str)
                            .map(|s| s.trim().to_owned()),
                        slug: o
                            .get("slug")
                            .and_then(Value::as_str)
                            .map(|s| s.trim().to_owned()),
                    }),
                    _ => check.fail(key, format!("{key} must be names")),
                }
            }
        }
        _ => check.fail(
            key,
            format!("{key} must be a list or a comma-separated string"),
        ),
    }
}

fn tags(check: &mut Checker, fields: &Map<String, Value>) -> Vec<IncomingTag> {
    let mut raw = Vec::new();
    if let Some(v) = fields.get("tags") {
        raw_tags(check, "tags", v, false, &mut raw);
    }
    if let Some(v) = fields.get("categories") {
        raw_tags(check, "categories", v, true, &mut raw);
    }
    if let Some(v) = fields.get("tag_slugs") {
        let mut slugs = Vec::new();
        raw_tags(check, "tag_slugs", v, false, &mut slugs);
        raw.extend(slugs.into_iter().map(|t| RawTag {
            slug: t.name.clone(),
            name: t.name,
        }));
    }
    let mut out: Vec<IncomingTag> = Vec::new();
    for tag in raw {
        let name = tag
            .name
            .filter(|n| !n.is_empty())
            .or_else(|| tag.slug.clone());
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            continue;
        };
        let name = check.tag_name("tag name", &name);
        let slug = match tag.slug.filter(|s| !s.is_empty()) {
            Some(s) => check.tag_slug("tag slug", &s),
            None => slugify(&name, TAG_SLUG_MAX),
        };
        if !out.iter().any(|t| t.slug == slug) {
            out.push(IncomingTag { name, slug });
        }
    }
    out
}

/// The slug a file name gives, and the date of a Jekyll `YYYY-MM-DD-` prefix. `index.md` (a Hugo
/// page bundle) takes its folder's name.
fn path_slug(path: &str) -> Option<(String, Option<NaiveDateTime>)> {
    let parts: Vec<&str> = path.split(['/', '\\']).filter(|p| !p.is_empty()).collect();
    let file = *parts.last()?;
    let lower = file.to_ascii_lowercase();
    let stem = if lower.ends_with(".markdown") {
        &file[..file.len() - ".markdown".len()]
    } else if lower.ends_with(".md") {
        &file[..file.len() - ".md".len()]
    } else {
        file
    };
    let stem = if stem.eq_ignore_ascii_case("index") && parts.len() >= 2 {
        parts[parts.len() - 2]
    } else {
        stem
    };
    let (stem, date) = match jekyll_prefix(stem) {
        Some((date, rest)) => (rest, Some(date)),
        None => (stem, None),
    };
    if stem.trim().is_empty() {
        return None;
    }
    Some((slugify(stem, POST_SLUG_MAX), date))
}

/// `2024-01-15-my-post` → (2024-01-15, `my-post`).
fn jekyll_prefix(stem: &str) -> Option<(NaiveDateTime, &str)> {
    let prefix = stem.get(..11)?;
    let rest = stem.get(11..)?;
    if !prefix.ends_with('-') || rest.is_empty() {
        return None;
    }
    let date = NaiveDate::parse_from_str(&prefix[..10], "%Y-%m-%d").ok()?;
    Some((date.and_hms_opt(0, 0, 0)?, rest))
}

/// The first `# heading` of the content (outside code fences), and the content without it.
pub fn take_first_heading(content: &str) -> Option<(String, String)> {
    let mut offset = 0;
    let mut fence: Option<char> = None;
    for line in content.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        let trimmed = bare.trim_start();
        let indent = bare.len() - trimmed.len();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            let mark = trimmed.chars().next();
            fence = match fence {
                None => mark,
                Some(open) if Some(open) == mark => None,
                open => open,
            };
        } else if fence.is_none()
            && indent <= 3
            && (trimmed == "#" || trimmed.starts_with("# ") || trimmed.starts_with("#\t"))
        {
            let title = strip_closing_hashes(trimmed[1..].trim());
            if !title.is_empty() {
                let before = &content[..offset];
                let after = &content[offset + line.len()..];
                let rest = if before.trim().is_empty() {
                    after.trim_start_matches(['\n', '\r']).to_owned()
                } else {
                    format!("{before}{after}")
                };
                return Some((title.to_owned(), rest));
            }
        }
        offset += line.len();
    }
    None
}

/// `Title ##` → `Title` (a closing sequence needs a space before it).
fn strip_closing_hashes(text: &str) -> &str {
    let without = text.trim_end_matches('#');
    if without.is_empty() {
        ""
    } else if without.len() < text.len() && without.ends_with([' ', '\t']) {
        without.trim_end()
    } else {
        text
    }
}

fn build(
    fields: Map<String, Value>,
    body: Option<String>,
    path: Option<&str>,
    now: NaiveDateTime,
) -> Result<IncomingPost, ItemError> {
    let mut check = Checker::default();
    let mut content = match body {
        Some(body) => body,
        None => text(&mut check, &fields, &["content"]).unwrap_or_default(),
    };
    let mut title = text(&mut check, &fields, &["title"]).filter(|t| !t.trim().is_empty());
    if title.is_none()
        && let Some((heading, rest)) = take_first_heading(&content)
    {
        title = Some(heading);
        content = rest;
    }
    let from_path = path.and_then(path_slug);
    let slug = match text(&mut check, &fields, &["slug"]).filter(|s| !s.trim().is_empty()) {
        Some(given) => check.post_slug(&given),
        None => match (&from_path, &title) {
            (Some((slug, _)), _) => slug.clone(),
            (None, Some(title)) => slugify(title, POST_SLUG_MAX),
            (None, None) => EMPTY_SLUG.to_owned(),
        },
    };
    let title = check.title(&title.unwrap_or_else(|| title_from_slug(&slug)));
    check.content(&content);

    let summary_excerpt = text(&mut check, &fields, &["excerpt", "summary"]);
    let seo_description = text(&mut check, &fields, &["seo_description", "description"]);
    let excerpt = summary_excerpt.or_else(|| {
        fields
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let seo_title = text(&mut check, &fields, &["seo_title"]);
    let hero_image_url = hero_image(&mut check, &fields);
    check.post_extras(
        excerpt.as_deref(),
        seo_title.as_deref(),
        seo_description.as_deref(),
        hero_image_url.as_deref(),
    );

    let author_name = author(&mut check, &fields);
    let created_at = date(&mut check, &fields, &["created_at"]);
    let updated_at = date(
        &mut check,
        &fields,
        &["updated_at", "lastmod", "updated", "updatedDate"],
    );
    // `published` is a date in some generators and a flag in Jekyll (`published: false`).
    let published_flag = fields.get("published").and_then(boolean);
    let mut date_keys = vec!["published_at", "publishDate", "pubDate"];
    if published_flag.is_none() {
        date_keys.push("published");
    }
    date_keys.push("date");
    let mut published_at = date(&mut check, &fields, &date_keys);
    if published_at.is_none() {
        published_at = from_path.as_ref().and_then(|(_, d)| *d);
    }

    let explicit = text(&mut check, &fields, &["status"]).and_then(|raw| {
        let status = PostStatus::parse(&raw.trim().to_ascii_lowercase());
        if status.is_none() {
            check.fail(
                "status",
                format!("status must be draft, published or archived, not {raw:?}"),
            );
        }
        status
    });
    let draft = match first(&fields, &["draft"]) {
        Some((_, v)) => {
            let flag = boolean(v);
            if flag.is_none() {
                check.fail("draft", "draft must be true or false");
            }
            flag
        }
        None => None,
    };
    let status = match (explicit, draft, published_flag) {
        (Some(status), _, _) => status,
        (None, Some(true), _) => PostStatus::Draft,
        (None, Some(false), _) => PostStatus::Published,
        (None, None, Some(true)) => PostStatus::Published,
        (None, None, Some(false)) => PostStatus::Draft,
        (None, None, None) if published_at.is_some() => PostStatus::Published,
        (None, None, None) => PostStatus::Draft,
    };
    if status == PostStatus::Published && published_at.is_none() {
        published_at = Some(created_at.unwrap_or(now));
    }
    let tags = tags(&mut check, &fields);

    if !check.is_ok() {
        return Err(ItemError::new(slug, check.summary()));
    }
    Ok(IncomingPost {
        title,
        slug,
        excerpt,
        content,
        status,
        author_name,
        created_at,
        updated_at,
        published_at,
        seo_title,
        seo_description,
        hero_image_url,
        tags,
        rendered: Rendered::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_or_huge_front_matter_fails_at_once() {
        let nested = |n: usize| format!("---\nx: {}{}\n---\nbody\n", "[".repeat(n), "]".repeat(n));
        let err = split_front_matter(&nested(1_000)).err().unwrap_or_default();
        assert!(err.contains("nested too deeply"), "{err}");
        // The 200 KB upload that cost 33 s of CPU: refused by its size before any parser runs.
        let err = split_front_matter(&nested(100_000))
            .err()
            .unwrap_or_default();
        assert!(err.contains("too large"), "{err}");
        let json = format!("{}\n", "{\"a\":".repeat(40));
        let err = split_front_matter(&json).err().unwrap_or_default();
        assert!(err.contains("nested too deeply"), "{err}");
        let huge = format!("+++\ntitle = \"{}\"\n+++\n", "x".repeat(70_000));
        let err = split_front_matter(&huge).err().unwrap_or_default();
        assert!(err.contains("too large"), "{err}");
        // Ordinary nesting still parses.
        let fine = "---\ntags: [a, [b, {c: d}]]\n---\nbody\n";
        assert!(split_front_matter(fine).is_ok());
        // JSON's check reads its strings and stops with the object: brackets in a string or in
        // the content after it do not count.
        let brackets = "[{".repeat(40);
        let json = format!("{{\"title\": \"{brackets}\\\" {brackets}\"}}\n\n{brackets}\n");
        let (fields, content) = split_front_matter(&json).unwrap_or_default();
        assert_eq!(fields["title"], format!("{brackets}\" {brackets}"));
        assert_eq!(content, format!("{brackets}\n"));
    }

    #[test]
    fn large_json_front_matter_is_refused_without_panicking() {
        // A character across byte 65,536 panicked the check of the first bytes; and JSON front
        // matter of any size was read.
        for filler in ["😀", "x"] {
            let value = filler.repeat(FRONT_MATTER_MAX_BYTES / filler.len());
            let text = format!("{{\"x\": \"{value}\"}}\nbody\n");
            let err = split_front_matter(&text).err().unwrap_or_default();
            assert!(err.contains("too large"), "{err}");
        }
        let text = format!("{{\"x\": \"{}\"}}\nbody", "😀".repeat(100));
        assert!(split_front_matter(&text).is_ok());
    }

    fn now() -> NaiveDateTime {
        parse_date("2030-01-01T00:00:00Z").unwrap_or_default()
    }

    fn at(s: &str) -> Option<NaiveDateTime> {
        parse_date(s)
    }

    fn md(path: &str, text: &str) -> IncomingPost {
        match parse_markdown(path, text, now()) {
            Ok(post) => post,
            Err(e) => panic!("{path}: {} ({})", e.message, e.slug),
        }
    }

    #[test]
    fn dates_in_every_accepted_form() {
        let noon = at("2024-01-15T12:00:00Z");
        assert!(noon.is_some());
        assert_eq!(at("2024-01-15T14:00:00+02:00"), noon);
        assert_eq!(at("2024-01-15 12:00:00 +0000"), noon);
        assert_eq!(at("2024-01-15 13:00:00 +0100"), noon);
        assert_eq!(at("2024-01-15T12:00:00"), noon);
        assert_eq!(at("2024-01-15 12:00"), noon);
        assert_eq!(at("2024-01-15"), at("2024-01-15T00:00:00Z"));
        assert_eq!(
            at("2024-01-15T12:00:00.1234567Z"),
            at("2024-01-15T12:00:00.123456Z")
        );
        assert_eq!(at("Jul 08 2022"), at("2022-07-08"));
        assert_eq!(at("July 8, 2022"), at("2022-07-08"));
        assert_eq!(at("next tuesday"), None);
    }

    #[test]
    fn jekyll_file_names_give_slug_and_date() {
        let post = md(
            "_posts/2024-01-15-hello-world.md",
            "---\ntitle: Hello\n---\nBody\n",
        );
        assert_eq!(post.slug, "hello-world");
        assert_eq!(post.published_at, at("2024-01-15"));
        assert_eq!(post.status, PostStatus::Published);
        assert_eq!(post.content, "Body\n");
    }

    #[test]
    fn hugo_bundles_take_the_folder_name() {
        let post = md(
            "content/posts/my-trip/index.md",
            "+++\ntitle = \"Trip\"\ndraft = true\n+++\n\nText",
        );
        assert_eq!(post.slug, "my-trip");
        assert_eq!(post.status, PostStatus::Draft);
        assert_eq!(post.content, "Text");
    }

    #[test]
    fn status_rules() {
        let status = |fm: &str| md("a.md", &format!("---\ntitle: T\n{fm}\n---\n")).status;
        assert_eq!(
            status("status: archived\ndraft: true"),
            PostStatus::Archived
        );
        assert_eq!(status("draft: true\ndate: 2024-01-01"), PostStatus::Draft);
        assert_eq!(status("draft: false"), PostStatus::Published);
        assert_eq!(status("date: 2024-01-01"), PostStatus::Published);
        assert_eq!(
            status("published: false\ndate: 2024-01-01"),
            PostStatus::Draft
        );
        assert_eq!(status("tags: [a]"), PostStatus::Draft);
        let err = parse_markdown("a.md", "---\ntitle: T\nstatus: live\n---\n", now()).err();
        assert!(err.is_some_and(|e| e.message.contains("status") && e.slug == "a"));
    }

    #[test]
    fn a_published_post_without_a_date_gets_one() {
        let post = md(
            "a.md",
            "---\ntitle: T\nstatus: published\ncreated_at: 2024-05-01T00:00:00Z\n---\n",
        );
        assert_eq!(post.published_at, at("2024-05-01"));
        let post = md("a.md", "---\ntitle: T\ndraft: false\n---\n");
        assert_eq!(post.published_at, Some(now()));
    }

    #[test]
    fn aliases() {
        let post = md(
            "x.md",
            "---\ntitle: T\nauthor: [Ada, Grace]\npubDate: 2024-02-02\nlastmod: 2024-03-03\ndescription: D\ncover:\n  image: /c.png\ncategories: news updates\ntags: Rust, Go\n---\n",
        );
        assert_eq!(post.author_name.as_deref(), Some("Ada, Grace"));
        assert_eq!(post.published_at, at("2024-02-02"));
        assert_eq!(post.updated_at, at("2024-03-03"));
        assert_eq!(post.seo_description.as_deref(), Some("D"));
        assert_eq!(post.excerpt.as_deref(), Some("D"));
        assert_eq!(post.hero_image_url.as_deref(), Some("/c.png"));
        let slugs: Vec<&str> = post.tags.iter().map(|t| t.slug.as_str()).collect();
        assert_eq!(slugs, ["rust", "go", "news", "updates"]);
        let post = md("x.md", "---\ntitle: T\nsummary: S\ndescription: D\n---\n");
        assert_eq!(post.excerpt.as_deref(), Some("S"));
    }

    #[test]
    fn titles_from_headings_or_slugs() {
        let post = md("notes/first-steps.md", "# Getting started\n\nText\n");
        assert_eq!(post.title, "Getting started");
        assert_eq!(post.content, "Text\n");
        assert_eq!(post.slug, "first-steps");
        let post = md("notes/first-steps.md", "```\n# not a heading\n```\n");
        assert_eq!(post.title, "First Steps");
        let post = md("a.md", "Intro\n\n## Sub\n# Main ##\nMore");
        assert_eq!(post.title, "Main");
        assert_eq!(post.content, "Intro\n\n## Sub\nMore");
    }

    #[test]
    fn json_front_matter() {
        let post = md(
            "j.md",
            "{\n  \"title\": \"J\",\n  \"tags\": [\"x\"]\n}\n\nBody",
        );
        assert_eq!(post.title, "J");
        assert_eq!(post.content, "Body");
        assert_eq!(post.tags.len(), 1);
    }

    #[test]
    fn broken_front_matter_fails_the_post() {
        assert!(parse_markdown("a.md", "---\ntitle: [unclosed\n---\n", now()).is_err());
        assert!(parse_markdown("a.md", "---\ntitle: T\n", now()).is_err());
        assert!(parse_markdown("a.md", "+++\ntitle = \n+++\n", now()).is_err());
        let long = format!("---\ntitle: {}\n---\n", "x".repeat(201));
        let err = parse_markdown("a.md", &long, now()).err();
        assert!(err.is_some_and(|e| e.message == "title must be 1 to 200 characters"));
    }

    #[test]
    fn json_posts_accept_tag_objects_and_slugs() {
        let value = serde_json::json!({
            "title": "T", "content": "C", "status": "published", "published_at": "2024-01-01T00:00:00Z",
            "tags": [{"name": "Rust Lang", "slug": "rust"}], "tag_slugs": ["extra-one"]
        });
        let post = parse_json_post(value, now()).map_err(|e| e.message);
        let post = post.as_ref().ok();
        let tags: Vec<(&str, &str)> = post
            .map(|p| {
                p.tags
                    .iter()
                    .map(|t| (t.name.as_str(), t.slug.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(tags, [("Rust Lang", "rust"), ("extra-one", "extra-one")]);
        assert_eq!(post.map(|p| p.slug.as_str()), Some("t"));
    }
}
