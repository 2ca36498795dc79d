-- Scheduled publishing: a draft with scheduled_at is published at that time by a background task
-- (or by the module's sweep of overdue posts). NULL: not scheduled.
ALTER TABLE blog_posts ADD COLUMN scheduled_at TIMESTAMP;

-- The sweep of overdue scheduled drafts reads only the scheduled ones.
CREATE INDEX blog_posts_scheduled_idx ON blog_posts (scheduled_at, id)
    WHERE scheduled_at IS NOT NULL;

-- The stored JSON of a post shows scheduled_at too: a write of scheduled_at without the JSON
-- leaves it NULL rather than stale, like the other shown columns.
DROP TRIGGER blog_posts_api_json_stale;
CREATE TRIGGER blog_posts_api_json_stale
AFTER UPDATE OF title, slug, excerpt, content, status, author_id, author_name, seo_title,
    seo_description, hero_image_url, created_at, updated_at, published_at, content_html,
    derived_excerpt, scheduled_at ON blog_posts
WHEN NEW.api_json IS OLD.api_json
BEGIN
    UPDATE blog_posts SET api_json = NULL WHERE id = NEW.id;
END;

-- Every stored JSON lacks the new field: the module writes them again when it starts.
UPDATE blog_posts SET api_json = NULL;
