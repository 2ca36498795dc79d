DROP TRIGGER blog_posts_counted_delete ON blog_posts;
DROP TRIGGER blog_posts_counted_insert ON blog_posts;
DROP FUNCTION blog_posts_count_deleted();
DROP FUNCTION blog_posts_count_inserted();

CREATE TRIGGER blog_posts_counted AFTER INSERT OR DELETE ON blog_posts
FOR EACH ROW EXECUTE FUNCTION blog_posts_count();
