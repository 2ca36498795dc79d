//! Slugs: ASCII transliteration, lower case, runs of other characters as one `-`, trimmed, and cut
//! at a `-` boundary to the limit.

/// Maximum length of a post slug, in characters.
pub const POST_SLUG_MAX: usize = 220;
/// Maximum length of a tag slug, in characters.
pub const TAG_SLUG_MAX: usize = 100;
/// The slug of a text with no letters or digits in any script.
pub const EMPTY_SLUG: &str = "post";

/// The slug of `input`: transliterated to ASCII (`Café` → `cafe`, `Привет мир` → `privet-mir`,
/// CJK too), lower-cased, every run of other characters replaced by one `-`, trimmed of `-`, cut
/// at a `-` boundary to `max` characters; `post` when nothing is left.
pub fn slugify(input: &str, max: usize) -> String {
    let ascii = deunicode::deunicode(input);
    let mut slug = String::with_capacity(ascii.len());
    let mut pending_dash = false;
    for ch in ascii.chars() {
        if ch.is_ascii_alphanumeric() {
            if pending_dash && !slug.is_empty() {
                slug.push('-');
            }
            pending_dash = false;
            slug.push(ch.to_ascii_lowercase());
        } else {
            pending_dash = true;
        }
    }
    let cut = cut_at_dash(&slug, max);
    if cut.is_empty() {
        EMPTY_SLUG.to_owned()
    } else {
        cut.to_owned()
    }
}

/// The longest prefix of an ASCII slug of at most `max` characters that ends at a word boundary;
/// a single word longer than `max` is cut at `max`.
fn cut_at_dash(slug: &str, max: usize) -> &str {
    if slug.len() <= max {
        return slug;
    }
    // `slug` is ASCII, so byte indexes are character indexes. Looking at `max + 1` characters
    // finds a dash that sits right after a full word of exactly `max` characters.
    match slug[..=max].rfind('-') {
        Some(dash) if dash > 0 => &slug[..dash],
        _ => &slug[..max],
    }
}

/// A title made from a slug: `my-first-post` → `My First Post`.
pub fn title_from_slug(slug: &str) -> String {
    slug.split('-')
        .filter(|w| !w.is_empty())
        .map(|word| {
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transliterates_other_scripts() {
        assert_eq!(slugify("Café", POST_SLUG_MAX), "cafe");
        assert_eq!(slugify("Привет мир", POST_SLUG_MAX), "privet-mir");
        assert_eq!(slugify("Hello, World!", POST_SLUG_MAX), "hello-world");
        let cjk = slugify("北京", POST_SLUG_MAX);
        assert!(!cjk.is_empty() && cjk != EMPTY_SLUG, "{cjk}");
        assert!(
            cjk.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        );
    }

    #[test]
    fn trims_and_collapses_separators() {
        assert_eq!(slugify("  --Rust   &  Go--  ", POST_SLUG_MAX), "rust-go");
        assert_eq!(slugify("already-a-slug", POST_SLUG_MAX), "already-a-slug");
        assert_eq!(slugify("!!!", POST_SLUG_MAX), "post");
        assert_eq!(slugify("", TAG_SLUG_MAX), "post");
    }

    #[test]
    fn cuts_at_a_dash_boundary() {
        assert_eq!(slugify("aaaa bbbb", 4), "aaaa");
        assert_eq!(slugify("aaaa bbbb", 6), "aaaa");
        assert_eq!(slugify("aaaa bbbb", 8), "aaaa");
        assert_eq!(slugify("aaaa bbbb", 9), "aaaa-bbbb");
        assert_eq!(slugify("abcdefghij", 4), "abcd");
        let long = "word ".repeat(100);
        let slug = slugify(&long, POST_SLUG_MAX);
        assert!(
            slug.len() <= POST_SLUG_MAX && slug.ends_with("word"),
            "{slug}"
        );
        assert_eq!(slug.len(), 219);
    }

    #[test]
    fn titles_from_slugs() {
        assert_eq!(title_from_slug("my-first-post"), "My First Post");
        assert_eq!(title_from_slug("post"), "Post");
    }
}
