DROP TRIGGER blog_posts_api_json_stale;
ALTER TABLE blog_posts DROP COLUMN api_json;
