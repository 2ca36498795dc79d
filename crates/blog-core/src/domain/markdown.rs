//! Markdown rendering (comrak, GitHub-flavoured: tables, strikethrough, autolinks, task lists),
//! done once when a post is written: the HTML, and a plain-text excerpt for posts that give none.
//! Raw HTML in the Markdown is escaped, never passed through: post content comes from users.

use comrak::nodes::NodeValue;
use comrak::{Arena, Options};

/// The longest derived excerpt, in characters (an ellipsis is added when the text is cut).
pub const EXCERPT_CHARS: usize = 200;

/// What a post's content renders to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rendered {
    pub html: String,
    /// Plain text of the content's first paragraphs, at most [`EXCERPT_CHARS`] characters (plus
    /// `…` when cut); empty when the content has no paragraph text.
    pub excerpt: String,
}

fn options() -> Options<'static> {
    let mut options = Options::default();
    options.extension.strikethrough = true;
    options.extension.table = true;
    options.extension.autolink = true;
    options.extension.tasklist = true;
    // Raw HTML is shown as text (`&lt;script&gt;`), not dropped and never emitted.
    options.render.escape = true;
    options
}

/// Renders `content` to HTML and derives its excerpt. CPU work proportional to the content:
/// run it off the executor for large inputs.
pub fn render(content: &str) -> Rendered {
    if content.trim().is_empty() {
        return Rendered::default();
    }
    let options = options();
    let arena = Arena::new();
    let root = comrak::parse_document(&arena, content, &options);
    let mut html = String::with_capacity(content.len() + content.len() / 4);
    // Writing into a String cannot fail.
    let _ = comrak::format_html(root, &options, &mut html);
    let mut text = String::new();
    for paragraph in root
        .descendants()
        .filter(|n| matches!(n.data().value, NodeValue::Paragraph))
    {
        if text.chars().count() > EXCERPT_CHARS {
            break;
        }
        if !text.is_empty() {
            text.push(' ');
        }
        for node in paragraph.descendants() {
            match &node.data().value {
                NodeValue::Text(t) => text.push_str(t),
                NodeValue::Code(code) => text.push_str(&code.literal),
                NodeValue::SoftBreak | NodeValue::LineBreak => text.push(' '),
                _ => {}
            }
        }
    }
    Rendered {
        html,
        excerpt: shorten(&text),
    }
}

/// Collapses whitespace and cuts at a word boundary within [`EXCERPT_CHARS`].
fn shorten(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = String::new();
    for word in words.iter() {
        let needed = out.chars().count() + usize::from(!out.is_empty()) + word.chars().count();
        if needed > EXCERPT_CHARS {
            if out.is_empty() {
                out = word.chars().take(EXCERPT_CHARS).collect();
            }
            out.push('…');
            return out;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_html() {
        let r =
            render("# Title\n\nSome *emphasis* and ~~gone~~.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n");
        assert!(r.html.contains("<h1>Title</h1>"), "{}", r.html);
        assert!(r.html.contains("<em>emphasis</em>"));
        assert!(r.html.contains("<del>gone</del>"));
        assert!(r.html.contains("<table>"));
    }

    #[test]
    fn raw_html_is_escaped() {
        let r = render("Hello <script>alert(1)</script>\n\n<div onclick=\"x()\">hi</div>\n");
        assert!(!r.html.contains("<script"), "{}", r.html);
        assert!(!r.html.contains("<div"), "{}", r.html);
        assert!(r.html.contains("&lt;script&gt;"), "{}", r.html);
    }

    #[test]
    fn excerpts_are_plain_text_of_the_paragraphs() {
        let r = render("# Heading\n\nFirst **bold** line\nwith `code`.\n\n```\nnot this\n```\n");
        assert_eq!(r.excerpt, "First bold line with code.");
        assert_eq!(render("").excerpt, "");
        assert_eq!(render("# Only a heading").excerpt, "");
    }

    #[test]
    fn long_excerpts_are_cut_at_a_word() {
        let long = "word ".repeat(100);
        let r = render(&long);
        assert!(r.excerpt.ends_with('…'));
        assert!(r.excerpt.chars().count() <= EXCERPT_CHARS + 1);
        assert!(!r.excerpt.contains("wor…"));
        let one = "x".repeat(500);
        assert_eq!(render(&one).excerpt.chars().count(), EXCERPT_CHARS + 1);
    }
}
