DROP TABLE blog_post_tags;
DROP TABLE blog_tags;
DROP TABLE blog_posts;
