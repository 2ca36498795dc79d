DO $$
BEGIN
    EXECUTE 'ALTER TABLE blog_posts '
        'ALTER COLUMN content SET COMPRESSION default, '
        'ALTER COLUMN content_html SET COMPRESSION default, '
        'ALTER COLUMN api_json SET COMPRESSION default';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    NULL;
END;
$$;

DROP TRIGGER blog_posts_counted_delete ON blog_posts;
DROP TRIGGER blog_posts_counted_insert ON blog_posts;
DROP FUNCTION blog_posts_count_statement();

CREATE TRIGGER blog_posts_counted AFTER INSERT OR DELETE ON blog_posts
FOR EACH ROW EXECUTE FUNCTION blog_posts_count();
