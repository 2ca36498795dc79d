-- Markdown rendered once, when a post is written: its HTML, and a plain-text excerpt shown when
-- the post gives none. Rows written before this migration are rendered when the module starts.
ALTER TABLE blog_posts ADD COLUMN content_html TEXT NOT NULL DEFAULT '';
ALTER TABLE blog_posts ADD COLUMN derived_excerpt TEXT NOT NULL DEFAULT '';
