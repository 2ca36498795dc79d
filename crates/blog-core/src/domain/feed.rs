//! The blog for feed readers and crawlers, without I/O: the Atom 1.0 and RSS 2.0 feeds of the
//! latest published posts and the sitemap (sitemaps.org protocol 0.9) of every published post.
//!
//! Every text goes through [`escape`]: `&`, `<`, `>`, `"` and `'` become entities, and the
//! characters XML 1.0 cannot carry at all (NUL and the other C0 controls but tab, line feed and
//! carriage return; lone surrogates cannot occur in a Rust string; U+FFFE and U+FFFF) are left
//! out, so that a document is well-formed whatever a post holds.

use std::fmt::Write as _;

use chrono::{DateTime, NaiveDateTime, Utc};

/// The sitemap protocol's limit of URLs in one sitemap file.
pub const SITEMAP_MAX_URLS: i64 = 50_000;

/// What the feeds say about the blog itself, and where its posts live.
#[derive(Debug, Clone)]
pub struct FeedSite {
    /// `BLOG_FEED_TITLE`.
    pub title: String,
    /// `PUBLIC_BASE_URL`, without a trailing `/`.
    pub base_url: String,
    /// The post URL template with `{slug}`: a path joined to `base_url`, or an absolute URL.
    pub post_url_template: String,
    /// Where the module is mounted (`/api/v1/blog`), for the feeds' own addresses.
    pub mount: String,
}

impl FeedSite {
    /// The absolute address of the post `slug`.
    pub fn post_url(&self, slug: &str) -> String {
        let url = self
            .post_url_template
            .replace("{slug}", &percent_path(slug));
        if url.starts_with('/') {
            format!("{}{url}", self.base_url)
        } else {
            url
        }
    }

    /// The absolute address of one of the module's routes (`/feed.atom`), with the tag filter.
    pub fn own_url(&self, route: &str, tag: Option<&str>) -> String {
        let mut url = format!("{}{}{route}", self.base_url, self.mount);
        if let Some(tag) = tag {
            url.push_str("?tag=");
            url.push_str(&percent_path(tag));
        }
        url
    }

    /// The host of `base_url` (no scheme, user, port or path), for the entries' tag URIs.
    fn host(&self) -> &str {
        let rest = self
            .base_url
            .split_once("://")
            .map_or(self.base_url.as_str(), |(_, rest)| rest);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        if host.starts_with('[') {
            return host.split_once(']').map_or(host, |(h, _)| &h[1..]);
        }
        host.split(':').next().unwrap_or(host)
    }
}

/// A post as the feeds show it.
#[derive(Debug, Clone)]
pub struct FeedPost<'a> {
    pub id: i64,
    pub title: &'a str,
    pub slug: &'a str,
    /// The excerpt it shows (its own, else the one derived from its content).
    pub summary: Option<&'a str>,
    pub content_html: &'a str,
    pub author_name: Option<&'a str>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    pub published_at: Option<NaiveDateTime>,
    /// (slug, name) of each tag, in display order.
    pub tags: Vec<(&'a str, &'a str)>,
}

/// A published post as the sitemap lists it.
#[derive(Debug, Clone)]
pub struct SitemapEntry {
    pub slug: String,
    pub updated_at: NaiveDateTime,
}

/// `text` made safe for XML character data and attribute values (see the module's notes).
pub fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    let needs = text.chars().any(|c| {
        matches!(c, '&' | '<' | '>' | '"' | '\'' | '\u{FFFE}' | '\u{FFFF}')
            || (c < ' ' && !matches!(c, '\t' | '\n' | '\r'))
    });
    if !needs {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `raw` percent-encoded for a URL path segment or query value (unreserved characters kept).
fn percent_path(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for b in raw.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}"); // writing to a String cannot fail
        }
    }
    out
}

fn utc(t: NaiveDateTime) -> DateTime<Utc> {
    DateTime::from_naive_utc_and_offset(t, Utc)
}

/// RFC 3339 in UTC to the second, as Atom and the sitemap write dates.
fn rfc3339(t: NaiveDateTime) -> String {
    utc(t).format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// RFC 822 (with a four-digit year), as RSS writes dates.
fn rfc822(t: NaiveDateTime) -> String {
    utc(t).format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// The newest change among `posts` (the epoch for none, so that an empty feed stays the same).
fn newest(posts: &[FeedPost<'_>]) -> NaiveDateTime {
    posts
        .iter()
        .map(|p| p.updated_at.max(p.published_at.unwrap_or(p.updated_at)))
        .max()
        .unwrap_or_default()
}

/// A post's permanent id: a tag URI (RFC 4151) of the site's host, the day the post was created
/// and its id, so that it survives a change of slug.
fn entry_id(site: &FeedSite, post: &FeedPost<'_>) -> String {
    let host = site.host();
    let host = if host.is_empty() { "localhost" } else { host };
    format!(
        "tag:{},{}:blog-post-{}",
        percent_path(host),
        post.created_at.format("%Y-%m-%d"),
        post.id
    )
}

/// The Atom 1.0 feed (RFC 4287) of `posts`, newest first.
pub fn atom(site: &FeedSite, tag: Option<&str>, posts: &[FeedPost<'_>]) -> String {
    let mut out = String::with_capacity(1024 + posts.iter().map(feed_size).sum::<usize>());
    let self_url = site.own_url("/feed.atom", tag);
    let title = match tag {
        Some(tag) => format!("{}: {tag}", site.title),
        None => site.title.clone(),
    };
    out.push_str("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n");
    out.push_str("<feed xmlns=\"http://www.w3.org/2005/Atom\">\n");
    let _ = write!(
        out,
        "<id>{id}</id>\n<title type=\"text\">{title}</title>\n<updated>{updated}</updated>\n\
         <link rel=\"self\" type=\"application/atom+xml\" href=\"{id}\"/>\n\
         <link rel=\"alternate\" type=\"application/rss+xml\" href=\"{rss}\"/>\n\
         <author><name>{title}</name></author>\n<generator>Keel</generator>\n",
        id = escape(&self_url),
        title = escape(&title),
        updated = rfc3339(newest(posts)),
        rss = escape(&site.own_url("/feed.rss", tag)),
    );
    for post in posts {
        let link = site.post_url(post.slug);
        let _ = write!(
            out,
            "<entry>\n<id>{id}</id>\n<title type=\"text\">{title}</title>\n\
             <link rel=\"alternate\" type=\"text/html\" href=\"{link}\"/>\n\
             <updated>{updated}</updated>\n",
            id = escape(&entry_id(site, post)),
            title = escape(post.title),
            link = escape(&link),
            updated = rfc3339(post.updated_at.max(post.published_at.unwrap_or_default())),
        );
        if let Some(published) = post.published_at {
            let _ = writeln!(out, "<published>{}</published>", rfc3339(published));
        }
        if let Some(name) = post.author_name.filter(|n| !n.trim().is_empty()) {
            let _ = writeln!(out, "<author><name>{}</name></author>", escape(name));
        }
        for (slug, name) in &post.tags {
            let _ = writeln!(
                out,
                "<category term=\"{}\" label=\"{}\"/>",
                escape(slug),
                escape(name)
            );
        }
        if let Some(summary) = post.summary {
            let _ = writeln!(out, "<summary type=\"text\">{}</summary>", escape(summary));
        }
        let _ = writeln!(
            out,
            "<content type=\"html\">{}</content>\n</entry>",
            escape(post.content_html)
        );
    }
    out.push_str("</feed>\n");
    out
}

/// The RSS 2.0 feed of `posts`, newest first.
pub fn rss(site: &FeedSite, tag: Option<&str>, posts: &[FeedPost<'_>]) -> String {
    let mut out = String::with_capacity(1024 + posts.iter().map(feed_size).sum::<usize>());
    let title = match tag {
        Some(tag) => format!("{}: {tag}", site.title),
        None => site.title.clone(),
    };
    out.push_str("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n");
    out.push_str(
        "<rss version=\"2.0\" xmlns:atom=\"http://www.w3.org/2005/Atom\" \
         xmlns:dc=\"http://purl.org/dc/elements/1.1/\">\n<channel>\n",
    );
    let _ = write!(
        out,
        "<title>{title}</title>\n<link>{link}</link>\n<description>{title}</description>\n\
         <atom:link rel=\"self\" type=\"application/rss+xml\" href=\"{link}\"/>\n\
         <lastBuildDate>{updated}</lastBuildDate>\n<generator>Keel</generator>\n",
        title = escape(&title),
        link = escape(&site.own_url("/feed.rss", tag)),
        updated = rfc822(newest(posts)),
    );
    for post in posts {
        let _ = write!(
            out,
            "<item>\n<title>{title}</title>\n<link>{link}</link>\n\
             <guid isPermaLink=\"false\">{id}</guid>\n",
            title = escape(post.title),
            link = escape(&site.post_url(post.slug)),
            id = escape(&entry_id(site, post)),
        );
        if let Some(published) = post.published_at {
            let _ = writeln!(out, "<pubDate>{}</pubDate>", rfc822(published));
        }
        if let Some(name) = post.author_name.filter(|n| !n.trim().is_empty()) {
            let _ = writeln!(out, "<dc:creator>{}</dc:creator>", escape(name));
        }
        for (_, name) in &post.tags {
            let _ = writeln!(out, "<category>{}</category>", escape(name));
        }
        let _ = writeln!(
            out,
            "<description>{}</description>\n</item>",
            escape(post.content_html)
        );
    }
    out.push_str("</channel>\n</rss>\n");
    out
}

/// The sitemap (sitemaps.org 0.9) of `entries`: each post's address and when it last changed.
pub fn sitemap(site: &FeedSite, entries: &[SitemapEntry]) -> String {
    let mut out = String::with_capacity(128 + entries.len() * 128);
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str("<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n");
    for entry in entries {
        let _ = writeln!(
            out,
            "<url><loc>{}</loc><lastmod>{}</lastmod></url>",
            escape(&site.post_url(&entry.slug)),
            rfc3339(entry.updated_at)
        );
    }
    out.push_str("</urlset>\n");
    out
}

/// Room for one entry of a feed.
fn feed_size(post: &FeedPost<'_>) -> usize {
    post.content_html.len() + post.title.len() + post.summary.map_or(0, str::len) + 512
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> FeedSite {
        FeedSite {
            title: "The & <Blog>".into(),
            base_url: "https://user@example.com:8443".into(),
            post_url_template: "/blog/{slug}".into(),
            mount: "/api/v1/blog".into(),
        }
    }

    #[test]
    fn escaping_covers_markup_and_drops_what_xml_cannot_carry() {
        assert_eq!(escape("plain"), "plain");
        assert_eq!(
            escape("a & b < c > d \" e ' f"),
            "a &amp; b &lt; c &gt; d &quot; e &apos; f"
        );
        assert_eq!(
            escape("x\u{0}y\u{1}\u{1F}\t\n\r\u{FFFE}\u{FFFF}z"),
            "xy\t\n\rz"
        );
        assert_eq!(escape("café 北京"), "café 北京");
    }

    #[test]
    fn links_are_absolute_and_ids_use_the_host() {
        let site = site();
        assert_eq!(
            site.post_url("a-b"),
            "https://user@example.com:8443/blog/a-b"
        );
        assert_eq!(
            site.own_url("/feed.atom", Some("r&d é")),
            "https://user@example.com:8443/api/v1/blog/feed.atom?tag=r%26d%20%C3%A9"
        );
        assert_eq!(site.host(), "example.com");
        let v6 = FeedSite {
            base_url: "http://[::1]:8000".into(),
            ..site
        };
        assert_eq!(v6.host(), "::1");
    }

    #[test]
    fn documents_hold_no_raw_markup_from_posts() {
        let t = DateTime::from_timestamp(1_700_000_000, 0)
            .map(|t| t.naive_utc())
            .unwrap_or_default();
        let post = FeedPost {
            id: 7,
            title: "Fish & <Chips> \"quoted\" \u{0}",
            slug: "fish",
            summary: Some("a < b"),
            content_html: "<p>x &amp; y</p>",
            author_name: Some("O'Brien"),
            created_at: t,
            updated_at: t,
            published_at: Some(t),
            tags: vec![("r-d", "R&D")],
        };
        for doc in [
            atom(&site(), Some("r-d"), std::slice::from_ref(&post)),
            rss(&site(), None, std::slice::from_ref(&post)),
        ] {
            assert!(!doc.contains('\u{0}'));
            assert!(
                doc.contains("Fish &amp; &lt;Chips&gt; &quot;quoted&quot; "),
                "{doc}"
            );
            assert!(doc.contains("&lt;p&gt;x &amp;amp; y&lt;/p&gt;"), "{doc}");
            assert!(doc.contains("R&amp;D"), "{doc}");
        }
        let map = sitemap(
            &site(),
            &[SitemapEntry {
                slug: "fish".into(),
                updated_at: t,
            }],
        );
        assert!(map.contains(
            "<loc>https://user@example.com:8443/blog/fish</loc><lastmod>2023-11-14T22:13:20Z</lastmod>"
        ));
    }
}
