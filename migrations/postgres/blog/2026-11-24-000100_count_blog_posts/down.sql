DROP TRIGGER blog_posts_counted_status ON blog_posts;
DROP TRIGGER blog_posts_counted ON blog_posts;
DROP FUNCTION blog_posts_count();
DROP TABLE blog_post_counts;
