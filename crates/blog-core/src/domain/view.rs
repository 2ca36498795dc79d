//! A post as the API shows it, written as JSON once, when the post is written, and stored with it
//! (`blog_posts.api_json`): the public reads then copy each post's stored text into the answer
//! instead of reading every column into strings and escaping them again on every request.
//!
//! The stored text is the JSON object of the post's own fields: every field of a post response
//! (`BlogPostResponse`) but `id` and `tags`, in its order. A read writes `{"id":N,`, the stored
//! object's members, then `"tags":[...]}` with the page's tags, each written once per page. A row
//! whose text is missing (stored before the column existed, or changed by a writer that does not
//! render it, which a trigger turns into NULL) is written from its columns instead, through the
//! same [`PostFields`].

use chrono::NaiveDateTime;
use kernel::Timestamp;
use kernel::json::{open_with_id, push_int, push_str, push_time};
use serde::Serialize;

use super::post::PostStatus;

/// The fields of a post that its stored JSON holds, borrowed from a row, in the order of a post
/// response.
#[derive(Debug, Serialize)]
pub struct PostFields<'a> {
    pub title: &'a str,
    pub slug: &'a str,
    /// The post's own excerpt, else the derived one (`None` when that is empty too).
    pub excerpt: Option<&'a str>,
    pub content: &'a str,
    pub content_html: &'a str,
    pub status: PostStatus,
    pub author_id: Option<i64>,
    pub author_name: Option<&'a str>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub published_at: Option<Timestamp>,
    pub seo_title: Option<&'a str>,
    pub seo_description: Option<&'a str>,
    pub hero_image_url: Option<&'a str>,
    pub scheduled_at: Option<Timestamp>,
}

/// The excerpt a post shows: its own, else the one derived from its content when that has text.
pub fn shown_excerpt<'a>(own: Option<&'a str>, derived: &'a str) -> Option<&'a str> {
    own.or_else(|| Some(derived).filter(|e| !e.is_empty()))
}

impl PostFields<'_> {
    /// The JSON object stored with the post.
    pub fn to_json(&self) -> String {
        // Plain fields into a String: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A tag as a post response shows it (`BlogTagResponse`), written once per page.
pub fn tag_json(id: i64, name: &str, slug: &str, created_at: NaiveDateTime) -> Vec<u8> {
    let mut out = Vec::with_capacity(80 + name.len() + slug.len());
    push_tag(&mut out, id, name, slug, &created_at);
    out
}

/// Appends a tag as `BlogTagResponse` serializes, written by hand (see `kernel::json`).
pub fn push_tag(out: &mut Vec<u8>, id: i64, name: &str, slug: &str, created_at: &NaiveDateTime) {
    out.extend_from_slice(b"{\"id\":");
    push_int(out, id);
    out.extend_from_slice(b",\"name\":");
    push_str(out, name);
    out.extend_from_slice(b",\"slug\":");
    push_str(out, slug);
    out.extend_from_slice(b",\"created_at\":");
    push_time(out, created_at);
    out.push(b'}');
}

/// Writes a post response: `{"id":ID,` the members of `fields` (a
/// [spliceable](kernel::json::is_spliceable) object, as [`PostFields::to_json`] writes it), then
/// `"tags":[` the tags' JSON `]}`.
pub fn write_post<'t>(
    out: &mut Vec<u8>,
    id: i64,
    fields: &str,
    tags: impl IntoIterator<Item = &'t [u8]>,
) {
    open_with_id(out, id, fields);
    out.extend_from_slice(b",\"tags\":[");
    for (i, tag) in tags.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(tag);
    }
    out.extend_from_slice(b"]}");
}

/// The start of a list response (`BlogPostListResponse`): its posts follow, separated by commas.
pub fn start_list(out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"posts\":[");
}

/// The end of a list response, after its posts.
pub fn end_list(out: &mut Vec<u8>, total: i64, page: i64, page_size: i64) {
    out.extend_from_slice(b"],\"total\":");
    push_int(out, total);
    out.extend_from_slice(b",\"page\":");
    push_int(out, page);
    out.extend_from_slice(b",\"page_size\":");
    push_int(out, page_size);
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_post_and_a_list_are_written_around_the_stored_members() {
        let mut out = Vec::new();
        start_list(&mut out);
        write_post(
            &mut out,
            7,
            r#"{"title":"T"}"#,
            [&b"{\"id\":1}"[..], b"{\"id\":2}"],
        );
        out.push(b',');
        write_post(&mut out, -1, r#"{"a":null,"b":[]}"#, []);
        end_list(&mut out, 12, 3, 2);
        assert_eq!(
            String::from_utf8(out).ok().as_deref(),
            Some(concat!(
                r#"{"posts":[{"id":7,"title":"T","tags":[{"id":1},{"id":2}]},"#,
                r#"{"id":-1,"a":null,"b":[],"tags":[]}],"total":12,"page":3,"page_size":2}"#
            ))
        );
    }
}
