-- Posts, tags and the post-tag link of the blog module. author_id is a plain integer without a
-- foreign key: the auth module may be absent.
CREATE TABLE blog_posts (
    id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
    title TEXT NOT NULL,
    slug TEXT NOT NULL UNIQUE,
    excerpt TEXT,
    content TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('draft', 'published', 'archived')),
    author_id BIGINT,
    author_name TEXT,
    seo_title TEXT,
    seo_description TEXT,
    hero_image_url TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    published_at TIMESTAMP
);

-- The public list: published posts, newest publication first.
CREATE INDEX blog_posts_status_published_idx ON blog_posts (status, published_at DESC, id DESC);
-- The editor list and the export: by creation time.
CREATE INDEX blog_posts_created_idx ON blog_posts (created_at, id);

CREATE TABLE blog_tags (
    id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
    name TEXT NOT NULL,
    -- the name lower-cased: names collide case-insensitively
    name_key TEXT NOT NULL UNIQUE,
    slug TEXT NOT NULL UNIQUE,
    created_at TIMESTAMP NOT NULL
);

CREATE TABLE blog_post_tags (
    post_id BIGINT NOT NULL REFERENCES blog_posts (id) ON DELETE CASCADE,
    tag_id BIGINT NOT NULL REFERENCES blog_tags (id) ON DELETE CASCADE,
    PRIMARY KEY (post_id, tag_id)
);

CREATE INDEX blog_post_tags_tag_idx ON blog_post_tags (tag_id, post_id);
