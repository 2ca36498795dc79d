ALTER TABLE blog_posts DROP COLUMN tag_ids;
