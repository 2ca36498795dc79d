ALTER TABLE blog_posts DROP COLUMN derived_excerpt;
ALTER TABLE blog_posts DROP COLUMN content_html;
