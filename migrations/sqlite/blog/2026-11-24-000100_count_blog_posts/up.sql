-- The number of posts of each status, kept by triggers in the same transaction as the write, so
-- that the public list reads its total from one row instead of counting every published post.
CREATE TABLE blog_post_counts (
    status TEXT PRIMARY KEY NOT NULL CHECK (status IN ('draft', 'published', 'archived')),
    posts BIGINT NOT NULL
);
INSERT INTO blog_post_counts (status, posts)
SELECT s.status, (SELECT COUNT(*) FROM blog_posts p WHERE p.status = s.status)
FROM (SELECT 'draft' AS status UNION ALL SELECT 'published' UNION ALL SELECT 'archived') s;

CREATE TRIGGER blog_posts_counted_insert AFTER INSERT ON blog_posts
BEGIN
    UPDATE blog_post_counts SET posts = posts + 1 WHERE status = NEW.status;
END;

CREATE TRIGGER blog_posts_counted_delete AFTER DELETE ON blog_posts
BEGIN
    UPDATE blog_post_counts SET posts = posts - 1 WHERE status = OLD.status;
END;

CREATE TRIGGER blog_posts_counted_status AFTER UPDATE OF status ON blog_posts
WHEN OLD.status <> NEW.status
BEGIN
    UPDATE blog_post_counts SET posts = posts - 1 WHERE status = OLD.status;
    UPDATE blog_post_counts SET posts = posts + 1 WHERE status = NEW.status;
END;
