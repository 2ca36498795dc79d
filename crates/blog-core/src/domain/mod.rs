//! Types and rules with no I/O: slugs, the post lifecycle and field limits, front matter, upload
//! parsing, the export formats, and the JSON a post is shown as.

pub mod export;
pub mod feed;
pub mod frontmatter;
pub mod markdown;
pub mod post;
pub mod slug;
pub mod upload;
pub mod view;

#[cfg(test)]
mod proptests;
