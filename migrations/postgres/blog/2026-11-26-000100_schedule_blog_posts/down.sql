DROP TRIGGER blog_posts_api_json_stale ON blog_posts;
CREATE TRIGGER blog_posts_api_json_stale
BEFORE UPDATE OF title, slug, excerpt, content, status, author_id, author_name, seo_title,
    seo_description, hero_image_url, created_at, updated_at, published_at, content_html,
    derived_excerpt ON blog_posts
FOR EACH ROW EXECUTE FUNCTION blog_posts_api_json_stale();
DROP INDEX blog_posts_scheduled_idx;
ALTER TABLE blog_posts DROP COLUMN scheduled_at;
UPDATE blog_posts SET api_json = NULL;
