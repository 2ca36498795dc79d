-- Each post's tag ids, comma-separated ('' for none), written with its links in
-- blog_post_tags, so that a page of posts names its tags without one index seek per post.
ALTER TABLE blog_posts ADD COLUMN tag_ids TEXT NOT NULL DEFAULT '';
UPDATE blog_posts SET tag_ids = COALESCE((
    SELECT group_concat(tag_id, ',')
    FROM blog_post_tags WHERE post_id = blog_posts.id
), '');
