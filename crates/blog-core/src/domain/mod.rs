//! Types and rules with no I/O: slugs, the post lifecycle and field limits, front matter, upload
//! parsing and the export formats.

pub mod export;
pub mod frontmatter;
pub mod markdown;
pub mod post;
pub mod slug;
pub mod upload;

#[cfg(test)]
mod proptests;
