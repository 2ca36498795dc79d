-- Each post's own fields as the API shows them (a JSON object: every field of a post response but
-- `id` and `tags`), rendered by the blog module when it writes the post, so that the public reads
-- copy stored text instead of building and escaping every field on each request. NULL means "not
-- rendered": the reads then build the post from its columns, and the module renders what is
-- missing when it starts.
ALTER TABLE blog_posts ADD COLUMN api_json TEXT;

-- A write that changes what the JSON shows without writing the JSON too (a hand edit, or a
-- program that does not know the column) leaves it NULL rather than stale.
CREATE TRIGGER blog_posts_api_json_stale
AFTER UPDATE OF title, slug, excerpt, content, status, author_id, author_name, seo_title,
    seo_description, hero_image_url, created_at, updated_at, published_at, content_html,
    derived_excerpt ON blog_posts
WHEN NEW.api_json IS OLD.api_json
BEGIN
    UPDATE blog_posts SET api_json = NULL WHERE id = NEW.id;
END;
