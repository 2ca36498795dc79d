DROP TRIGGER blog_posts_counted_status;
DROP TRIGGER blog_posts_counted_delete;
DROP TRIGGER blog_posts_counted_insert;
DROP TABLE blog_post_counts;
