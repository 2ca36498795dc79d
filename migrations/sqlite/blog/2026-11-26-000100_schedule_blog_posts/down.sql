DROP TRIGGER blog_posts_api_json_stale;
CREATE TRIGGER blog_posts_api_json_stale
AFTER UPDATE OF title, slug, excerpt, content, status, author_id, author_name, seo_title,
    seo_description, hero_image_url, created_at, updated_at, published_at, content_html,
    derived_excerpt ON blog_posts
WHEN NEW.api_json IS OLD.api_json
BEGIN
    UPDATE blog_posts SET api_json = NULL WHERE id = NEW.id;
END;
DROP INDEX blog_posts_scheduled_idx;
ALTER TABLE blog_posts DROP COLUMN scheduled_at;
UPDATE blog_posts SET api_json = NULL;
