//! Table definitions, portable across PostgreSQL and SQLite.

diesel::table! {
    blog_posts (id) {
        id -> BigInt,
        title -> Text,
        slug -> Text,
        excerpt -> Nullable<Text>,
        content -> Text,
        status -> Text,
        author_id -> Nullable<BigInt>,
        author_name -> Nullable<Text>,
        seo_title -> Nullable<Text>,
        seo_description -> Nullable<Text>,
        hero_image_url -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        published_at -> Nullable<Timestamp>,
        content_html -> Text,
        derived_excerpt -> Text,
        /// The ids of the post's tags, comma-separated (see `store::set_post_tags`).
        tag_ids -> Text,
        /// The post's own fields as the API shows them, NULL when not rendered (see
        /// `domain::view`).
        api_json -> Nullable<Text>,
        /// When a draft is to be published by itself (NULL: not scheduled).
        scheduled_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    blog_tags (id) {
        id -> BigInt,
        name -> Text,
        name_key -> Text,
        slug -> Text,
        created_at -> Timestamp,
    }
}

diesel::table! {
    blog_post_tags (post_id, tag_id) {
        post_id -> BigInt,
        tag_id -> BigInt,
    }
}

diesel::table! {
    /// The number of posts of each status, kept by triggers on `blog_posts`.
    blog_post_counts (status) {
        status -> Text,
        posts -> BigInt,
    }
}

diesel::joinable!(blog_post_tags -> blog_posts (post_id));
diesel::joinable!(blog_post_tags -> blog_tags (tag_id));
diesel::allow_tables_to_appear_in_same_query!(
    blog_posts,
    blog_tags,
    blog_post_tags,
    blog_post_counts
);
