-- The number of posts of each status, kept by a trigger in the same transaction as the write, so
-- that the public list reads its total from one row instead of counting every published post.
CREATE TABLE blog_post_counts (
    status TEXT PRIMARY KEY CHECK (status IN ('draft', 'published', 'archived')),
    posts BIGINT NOT NULL
);
INSERT INTO blog_post_counts (status, posts)
SELECT s.status, (SELECT COUNT(*) FROM blog_posts p WHERE p.status = s.status)
FROM (VALUES ('draft'), ('published'), ('archived')) AS s (status);

CREATE FUNCTION blog_posts_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE blog_post_counts SET posts = posts - 1 WHERE status = OLD.status;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE blog_post_counts SET posts = posts + 1 WHERE status = NEW.status;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER blog_posts_counted AFTER INSERT OR DELETE ON blog_posts
FOR EACH ROW EXECUTE FUNCTION blog_posts_count();

CREATE TRIGGER blog_posts_counted_status AFTER UPDATE OF status ON blog_posts
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION blog_posts_count();
