-- Each post's tag ids, comma-separated ('' for none), written with its links in
-- blog_post_tags, so that a page of posts names its tags without reading the links.
ALTER TABLE blog_posts ADD COLUMN tag_ids TEXT NOT NULL DEFAULT '';
UPDATE blog_posts p SET tag_ids = l.ids
FROM (
    SELECT post_id, string_agg(tag_id::text, ',') AS ids
    FROM blog_post_tags GROUP BY post_id
) l
WHERE l.post_id = p.id;
