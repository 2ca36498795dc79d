//! Properties of the import parsers over arbitrary input: front matter (YAML, TOML, JSON) and
//! zip uploads never panic, refuse over-deep or over-large front matter, and read back what the
//! export writes.

use std::io::{Cursor, Write};

use chrono::{DateTime, NaiveDateTime};
use proptest::prelude::*;
use proptest::test_runner::Config;

use super::export::{ExportedPost, ExportedTag, render_markdown, write_zip};
use super::frontmatter::{
    FRONT_MATTER_MAX_BYTES, FRONT_MATTER_MAX_DEPTH, IncomingPost, parse_markdown,
    split_front_matter,
};
use super::post::{
    EXCERPT_MAX, HERO_IMAGE_URL_MAX, PostStatus, SEO_DESCRIPTION_MAX, SEO_TITLE_MAX, TAG_NAME_MAX,
    TITLE_MAX,
};
use super::slug::{TAG_SLUG_MAX, slugify};
use super::upload::{ParsedItem, UploadError, ZipLimits, parse_upload};

/// `cases` per property, or `PROPTEST_CASES` when set; nothing is written into the source tree
/// (a failure prints its input).
fn config(cases: u32) -> Config {
    let default = Config::default();
    Config {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            default.cases
        } else {
            cases
        },
        failure_persistence: None,
        ..default
    }
}

fn now() -> NaiveDateTime {
    DateTime::from_timestamp(1_900_000_000, 0)
        .map(|t| t.naive_utc())
        .unwrap_or_default()
}

const LIMITS: ZipLimits = ZipLimits {
    max_entries: 64,
    max_unpacked_bytes: 1024 * 1024,
    max_ratio: 100,
};

// ---------------------------------------------------------------------------------------------
// Generators

/// Text made of the pieces of front matter in its three syntaxes, and arbitrary text.
fn front_matter_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        proptest::sample::select(vec![
            "---\n",
            "+++\n",
            "...\n",
            "---",
            "\n",
            "\r\n",
            "\r",
            " ",
            "\t",
            "{",
            "}",
            "[",
            "]",
            "\"",
            "'",
            ":",
            ",",
            "#",
            "- ",
            "? ",
            "|\n",
            ">-\n",
            "&a ",
            "*a",
            "!!str ",
            "<<: *a\n",
            "title: ",
            "title = ",
            "\"title\": ",
            "slug: a/b",
            "date: 2024-01-15",
            "draft: true",
            "status: published",
            "tags: [a, b]",
            "tags = [\"a\"]",
            "author:\n  name: A\n",
            "published: false",
            "cover:\n  image: /c.png\n",
            "2024-01-15T12:00:00Z",
            "null",
            "~",
            "\u{feff}",
            "\u{85}",
            "\u{2028}",
            "é",
            "\0",
            "# Heading\n",
            "```\n",
        ])
        .prop_map(str::to_owned),
        any::<String>(),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

/// Text for a post's fields: anything but NUL (which the API refuses), with the characters
/// YAML gives a meaning to, words it reads as other types, and runs of brackets.
fn text(max_chars: usize) -> impl Strategy<Value = String> {
    let special = proptest::sample::select(vec![
        "true",
        "False",
        "yes",
        "no",
        "on",
        "null",
        "~",
        "1e5",
        "0x1F",
        "0o7",
        ".inf",
        "-.5",
        "12:30",
        "2024-01-01",
        "---",
        "...",
        "- a",
        "? b",
        ": c",
        "#x",
        " #x",
        "&a",
        "*a",
        "!t",
        "|",
        "> x",
        "'q'",
        "\"d\"",
        "[a]",
        "{a: b}",
        "@x",
        "`y`",
        "%z",
        "\\",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "\u{85}",
        "\u{2028}",
        "\u{feff}",
        "é",
        "😀",
        " ",
        "  ",
        "[[[[[[[[",
        "{{{{",
        "]}",
        "[[[[[[[[[[[[[[[[",
        "{{{{{{{{{{{{{{{{",
    ]);
    let piece = prop_oneof![
        special.prop_map(str::to_owned),
        "[^\\x00]{0,12}",
        "[ -~]{0,12}",
    ];
    proptest::collection::vec(piece, 0..10)
        .prop_map(move |pieces| pieces.concat().chars().take(max_chars).collect::<String>())
}

/// A title or tag name: trimmed, not blank (as stored).
fn name(max_chars: usize) -> impl Strategy<Value = String> {
    text(max_chars)
        .prop_map(|s| s.trim().to_owned())
        .prop_filter("blank", |s| !s.is_empty())
}

/// A time as stored: microseconds, years 1970 to 9999.
fn timestamp() -> impl Strategy<Value = NaiveDateTime> {
    (0i64..253_402_300_799, 0u32..1_000_000).prop_map(|(secs, micros)| {
        DateTime::from_timestamp(secs, micros * 1000)
            .map(|t| t.naive_utc())
            .unwrap_or_default()
    })
}

/// A post as the database holds it.
fn exported_post() -> impl Strategy<Value = ExportedPost> {
    let texts = (
        name(TITLE_MAX),
        "[a-z0-9]{1,12}(-[a-z0-9]{1,12}){0,4}",
        proptest::option::of(text(EXCERPT_MAX)),
        text(2000),
        proptest::option::of(name(60)),
        proptest::option::of(text(SEO_TITLE_MAX)),
        proptest::option::of(text(SEO_DESCRIPTION_MAX)),
        proptest::option::of(text(HERO_IMAGE_URL_MAX)),
        proptest::collection::vec(name(TAG_NAME_MAX), 0..4),
    );
    let status = proptest::sample::select(PostStatus::ALL.to_vec());
    let times = (timestamp(), timestamp(), proptest::option::of(timestamp()));
    (texts, status, times).prop_map(|(texts, status, times)| {
        let (title, slug, excerpt, content, author_name, seo_title, seo_description, hero, names) =
            texts;
        let (created_at, updated_at, published_at) = times;
        let mut tags: Vec<ExportedTag> = Vec::new();
        for name in names {
            let slug = slugify(&name, TAG_SLUG_MAX);
            if !tags.iter().any(|t| t.slug == slug) {
                tags.push(ExportedTag { name, slug });
            }
        }
        ExportedPost {
            title,
            slug,
            excerpt,
            content,
            status,
            author_name,
            created_at,
            updated_at,
            // A published post always has its date.
            published_at: match status {
                PostStatus::Published => published_at.or(Some(created_at)),
                _ => published_at,
            },
            seo_title,
            seo_description,
            hero_image_url: hero,
            tags,
        }
    })
}

/// Zip entry names: `..`, absolute paths, drive letters, NUL, hidden and metadata folders,
/// backslashes and bytes that are not UTF-8.
fn entry_name() -> impl Strategy<Value = Vec<u8>> {
    let segment = prop_oneof![
        proptest::sample::select(vec![
            "..",
            ".",
            "",
            "posts",
            "a b",
            "C:",
            "c:x",
            "\0",
            "a\0b",
            "__MACOSX",
            ".hidden",
            "._x.md",
            "_index.md",
            "index.md",
            "x.md",
            "2024-01-15-hello.md",
            "é",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        proptest::collection::vec(any::<u8>(), 1..6),
    ];
    let lead = proptest::sample::select(vec!["", "", "/", "\\", "//"]);
    let separator = proptest::sample::select(vec!["/", "\\"]);
    let ext = proptest::sample::select(vec!["", ".md", ".MD", ".markdown", ".txt", "/", ".md/"]);
    (
        lead,
        proptest::collection::vec((segment, separator), 1..5),
        ext,
    )
        .prop_map(|(lead, segments, ext)| {
            let mut name = lead.as_bytes().to_vec();
            for (i, (segment, separator)) in segments.iter().enumerate() {
                if i > 0 {
                    name.extend_from_slice(separator.as_bytes());
                }
                name.extend_from_slice(segment);
            }
            name.extend_from_slice(ext.as_bytes());
            name
        })
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// A zip of `entries` (raw names, contents); `deflate` picks the compression.
fn zip_of(entries: &[(Vec<u8>, String)], deflate: bool) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let method = if deflate {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    for (name, content) in entries {
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(method)
            .name(name);
        zip.start_file_with_options(options)
            .unwrap_or_else(|e| panic!("entry {name:?}: {e}"));
        zip.write_all(content.as_bytes())
            .unwrap_or_else(|e| panic!("entry {name:?}: {e}"));
    }
    zip.finish()
        .unwrap_or_else(|e| panic!("zip: {e}"))
        .into_inner()
}

/// The deepest nesting of `[` and `{` in `text`, counted the way the front matter check counts.
fn bracket_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for byte in text.bytes() {
        match byte {
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The front matter of a rendered post whose nesting the check counts: the text between its
/// `---` lines. JSON front matter counts nothing here: its check reads JSON's strings, so only
/// the object and the tags' array nest.
fn front_matter_of(markdown: &str) -> &str {
    if markdown.starts_with('{') {
        return "";
    }
    let inner = markdown.strip_prefix("---\n").unwrap_or(markdown);
    inner.split("\n---\n").next().unwrap_or(inner)
}

/// What an import reads from an exported post.
fn same_post(back: &IncomingPost, post: &ExportedPost) -> Result<(), TestCaseError> {
    prop_assert_eq!(&back.title, &post.title);
    prop_assert_eq!(&back.slug, &post.slug);
    prop_assert_eq!(&back.excerpt, &post.excerpt);
    prop_assert_eq!(&back.content, &post.content);
    prop_assert_eq!(back.status, post.status);
    prop_assert_eq!(&back.author_name, &post.author_name);
    prop_assert_eq!(back.created_at, Some(post.created_at));
    prop_assert_eq!(back.updated_at, Some(post.updated_at));
    prop_assert_eq!(back.published_at, post.published_at);
    prop_assert_eq!(&back.seo_title, &post.seo_title);
    prop_assert_eq!(&back.seo_description, &post.seo_description);
    prop_assert_eq!(&back.hero_image_url, &post.hero_image_url);
    let tags: Vec<(&str, &str)> = back
        .tags
        .iter()
        .map(|t| (t.name.as_str(), t.slug.as_str()))
        .collect();
    let expected: Vec<(&str, &str)> = post
        .tags
        .iter()
        .map(|t| (t.name.as_str(), t.slug.as_str()))
        .collect();
    prop_assert_eq!(tags, expected);
    Ok(())
}

/// A name leaves the archive when it starts at the root or has a `..` component.
fn escapes(name: &[u8]) -> bool {
    name.first().is_some_and(|b| *b == b'/' || *b == b'\\')
        || name
            .split(|b| *b == b'/' || *b == b'\\')
            .any(|part| part == b"..")
}

fn is_markdown(name: &[u8]) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(b".md") || lower.ends_with(b".markdown")
}

// ---------------------------------------------------------------------------------------------
// Front matter

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_markdown_never_panics(text in front_matter_like()) {
        if let Ok((_, body)) = split_front_matter(&text) {
            // The content is what follows the front matter, never anything else.
            prop_assert!(text.ends_with(&body), "{body:?}");
        }
        let _ = parse_markdown("posts/2024-01-15-a.md", &text, now());
        let items = parse_upload("a.md", text.as_bytes(), LIMITS, now());
        prop_assert_eq!(items.map(|items| items.len()).ok(), Some(1));
    }

    #[test]
    fn arbitrary_bytes_as_markdown_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        match parse_upload("a.md", &bytes, LIMITS, now()) {
            Ok(items) => prop_assert_eq!(items.len(), 1),
            Err(e) => prop_assert_eq!(e, UploadError::InvalidUtf8("a.md".to_owned())),
        }
    }

    #[test]
    fn over_deep_front_matter_is_refused(
        syntax in 0usize..3,
        depth in (FRONT_MATTER_MAX_DEPTH + 1)..20_000,
        brackets in proptest::collection::vec(any::<bool>(), 1..8),
    ) {
        let opens: String = (0..depth).map(|i| if brackets[i % brackets.len()] { '[' } else { '{' }).collect();
        let text = match syntax {
            0 => format!("---\nx: {opens}\n---\nbody\n"),
            1 => format!("+++\nx = {opens}\n+++\nbody\n"),
            _ => format!("{{\"x\": {opens}\n}}\nbody\n"),
        };
        let err = split_front_matter(&text).err().unwrap_or_default();
        prop_assert!(
            err.contains("nested too deeply") || err.contains("too large"),
            "{err}"
        );
    }

    #[test]
    fn over_large_front_matter_is_refused(
        syntax in 0usize..3,
        extra in 1usize..4096,
        filler in "[a-zé😀 ]{1,8}",
    ) {
        let value: String = filler
            .chars()
            .cycle()
            .take_while({
                let mut len = 0;
                move |c| {
                    len += c.len_utf8();
                    len <= FRONT_MATTER_MAX_BYTES + extra
                }
            })
            .collect();
        let text = match syntax {
            0 => format!("---\nx: \"{value}\"\n---\nbody\n"),
            1 => format!("+++\nx = \"{value}\"\n+++\nbody\n"),
            _ => format!("{{\"x\": \"{value}\"}}\nbody\n"),
        };
        let err = split_front_matter(&text).err().unwrap_or_default();
        prop_assert!(err.contains("too large"), "{err}");
    }

    #[test]
    fn an_exported_post_reads_back_the_same(post in exported_post()) {
        let markdown = render_markdown(&post).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back = parse_markdown(&format!("{}.md", post.slug), &markdown, now());
        if bracket_depth(front_matter_of(&markdown)) > FRONT_MATTER_MAX_DEPTH {
            // The depth check counts brackets inside strings too: more than the limit of
            // unclosed `[`/`{` across the text fields is refused, never misread.
            let message = back.err().map(|e| e.message).unwrap_or_default();
            prop_assert!(message.contains("nested too deeply"), "{message}");
        } else {
            match back {
                Ok(back) => same_post(&back, &post)?,
                Err(e) => return Err(TestCaseError::fail(format!("{}\n{markdown}", e.message))),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Zip uploads

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn arbitrary_bytes_as_a_zip_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        prefix in any::<bool>(),
    ) {
        // With a local file header's signature in front, the reader gets further.
        let mut data = if prefix { b"PK\x03\x04".to_vec() } else { Vec::new() };
        data.extend_from_slice(&bytes);
        if let Ok(items) = parse_upload("a.zip", &data, LIMITS, now()) {
            prop_assert!(items.len() <= LIMITS.max_entries);
        }
    }

    #[test]
    fn damaged_zips_never_panic(
        posts in proptest::collection::vec(exported_post(), 1..4),
        changes in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        truncate in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let (cursor, _) = write_zip(Cursor::new(Vec::new()), std::iter::once(posts))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut bytes = cursor.into_inner();
        for (at, byte) in changes {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        if let Some(at) = truncate {
            bytes.truncate(at.index(bytes.len()));
        }
        if let Ok(items) = parse_upload("a.zip", &bytes, LIMITS, now()) {
            prop_assert!(items.len() <= LIMITS.max_entries);
        }
    }

    #[test]
    fn entry_names_never_panic_and_escaping_ones_fail(
        names in proptest::collection::btree_set(entry_name(), 1..10),
        contents in proptest::collection::vec(front_matter_like(), 10),
        deflate in any::<bool>(),
    ) {
        let entries: Vec<(Vec<u8>, String)> = names.into_iter().zip(contents).collect();
        let bytes = zip_of(&entries, deflate);
        let items: Vec<ParsedItem> = parse_upload("a.zip", &bytes, LIMITS, now())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(items.len() <= entries.len());
        let refused = |item: &ParsedItem| {
            item.post
                .as_ref()
                .err()
                .is_some_and(|e| e.message.contains("leaves the archive"))
        };
        for (name, _) in &entries {
            let Ok(name) = std::str::from_utf8(name) else { continue };
            if escapes(name.as_bytes()) && is_markdown(name.as_bytes()) {
                prop_assert!(
                    items.iter().any(|item| item.file == name && refused(item)),
                    "{name:?} not refused: {items:?}"
                );
            }
        }
        // Names that are not UTF-8 are read as CP437, which keeps `/`, `\` and `..`.
        let escaping = entries
            .iter()
            .filter(|(name, _)| escapes(name) && is_markdown(name))
            .count();
        prop_assert!(items.iter().filter(|item| refused(item)).count() >= escaping);
    }

    #[test]
    fn an_exported_zip_imports_the_same_posts(
        posts in proptest::collection::vec(exported_post(), 1..6),
    ) {
        let mut posts = posts;
        posts.dedup_by(|a, b| a.slug == b.slug);
        let mut seen = std::collections::BTreeSet::new();
        posts.retain(|p| seen.insert(p.slug.clone()));
        let (cursor, count) = write_zip(Cursor::new(Vec::new()), std::iter::once(posts.clone()))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(count, posts.len());
        let items = parse_upload("blog-export.zip", &cursor.into_inner(), LIMITS, now())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(items.len(), posts.len());
        for (item, post) in items.iter().zip(&posts) {
            prop_assert_eq!(&item.file, &format!("{}.md", post.slug));
            let markdown = render_markdown(post).map_err(|e| TestCaseError::fail(e.to_string()))?;
            if bracket_depth(front_matter_of(&markdown)) > FRONT_MATTER_MAX_DEPTH {
                prop_assert!(item.post.is_err());
                continue;
            }
            match &item.post {
                Ok(back) => same_post(back, post)?,
                Err(e) => return Err(TestCaseError::fail(e.message.clone())),
            }
        }
    }
}
