//! The Atom and RSS feeds and the sitemap: published posts only, newest first, absolute links,
//! tags as categories, the tag filter, and text escaped whatever a post holds.

use super::*;

kernel::backend_tests! {
    feeds_show_the_latest_published_posts_with_absolute_links,
    feeds_escape_what_posts_hold,
    the_sitemap_lists_every_published_post_with_lastmod,
    links_follow_the_post_url_template,
}

fn site_config() -> BlogConfig {
    BlogConfig {
        public_base_url: "https://blog.example.com".into(),
        feed_title: "Example & Co".into(),
        ..BlogConfig::default()
    }
}

async fn text(c: &Ctx, path: &str, content_type: &str) -> String {
    let r = c.get(path, None).await;
    assert_eq!(r.status(), StatusCode::OK, "{path}");
    assert_eq!(r.headers()["content-type"], content_type, "{path}");
    r.text().await.unwrap()
}

async fn feeds_show_the_latest_published_posts_with_absolute_links(db: TestDb) {
    let c = start(db, site_config(), true).await;
    c.tag("Rust").await;
    c.tag("Web Dev").await;
    let first = c
        .create(json!({"title": "First", "content": "One *two*", "tag_slugs": ["rust", "web-dev"]}))
        .await;
    let second = c
        .create(json!({"title": "Second", "excerpt": "Short", "tag_slugs": ["web-dev"]}))
        .await;
    c.create(json!({"title": "Draft only", "tag_slugs": ["rust"]}))
        .await;
    c.publish(&first["id"]).await;
    c.publish(&second["id"]).await;
    let archived = c.create_titled("Gone").await;
    c.publish(&archived["id"]).await;
    c.archive(&archived["id"]).await;

    let atom = text(&c, "/feed.atom", "application/atom+xml; charset=utf-8").await;
    assert!(atom.starts_with(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<feed xmlns=\"http://www.w3.org/2005/Atom\">"
    ));
    assert!(
        atom.contains("<title type=\"text\">Example &amp; Co</title>"),
        "{atom}"
    );
    assert!(atom.contains(
        "<link rel=\"self\" type=\"application/atom+xml\" href=\"https://blog.example.com/api/v1/blog/feed.atom\"/>"
    ));
    // Newest publication first; drafts and archived posts are left out.
    let second_at = atom.find("<title type=\"text\">Second</title>").unwrap();
    let first_at = atom.find("<title type=\"text\">First</title>").unwrap();
    assert!(second_at < first_at, "{atom}");
    assert!(
        !atom.contains("Draft only") && !atom.contains("Gone"),
        "{atom}"
    );
    assert!(atom.contains(
        "<link rel=\"alternate\" type=\"text/html\" href=\"https://blog.example.com/api/v1/blog/posts/first\"/>"
    ));
    assert!(atom.contains("<category term=\"rust\" label=\"Rust\"/>"));
    assert!(atom.contains("<category term=\"web-dev\" label=\"Web Dev\"/>"));
    assert!(
        atom.contains(
            "<content type=\"html\">&lt;p&gt;One &lt;em&gt;two&lt;/em&gt;&lt;/p&gt;\n</content>"
        ),
        "{atom}"
    );
    assert!(atom.contains("<summary type=\"text\">Short</summary>"));
    assert!(atom.contains("<author><name>Ada Admin</name></author>"));
    let id = first["id"].as_i64().unwrap();
    assert!(atom.contains(&format!(":blog-post-{id}</id>")));
    assert!(atom.contains("<id>tag:blog.example.com,"), "{atom}");

    let rss = text(&c, "/feed.rss", "application/rss+xml; charset=utf-8").await;
    assert!(rss.contains("<rss version=\"2.0\""));
    assert!(rss.contains("<link>https://blog.example.com/api/v1/blog/posts/second</link>"));
    assert!(rss.contains("<category>Web Dev</category>"));
    assert!(
        rss.contains(
            "<description>&lt;p&gt;One &lt;em&gt;two&lt;/em&gt;&lt;/p&gt;\n</description>"
        )
    );
    assert!(rss.contains("<pubDate>") && rss.contains(" GMT</pubDate>"));
    assert!(!rss.contains("Draft only") && !rss.contains("Gone"));

    // The tag filter: only posts with the tag (by slug, normalized), its address in the links.
    let tagged = text(
        &c,
        "/feed.atom?tag=Rust",
        "application/atom+xml; charset=utf-8",
    )
    .await;
    assert!(tagged.contains("<title type=\"text\">First</title>"));
    assert!(!tagged.contains("<title type=\"text\">Second</title>"));
    assert!(tagged.contains("href=\"https://blog.example.com/api/v1/blog/feed.atom?tag=rust\""));
    let tagged = text(
        &c,
        "/feed.rss?tag=web-dev",
        "application/rss+xml; charset=utf-8",
    )
    .await;
    assert_eq!(tagged.matches("<item>").count(), 2);
    for path in ["/feed.atom?tag=unknown", "/feed.atom?tag=%21%21"] {
        let empty = text(&c, path, "application/atom+xml; charset=utf-8").await;
        assert!(!empty.contains("<entry>"), "{path}");
    }

    // At most BLOG_FEED_ENTRIES posts.
    let few = BlogConfig {
        feed_entries: 1,
        ..site_config()
    };
    let c2 = start(sibling(&c.db).await, few, true).await;
    for title in ["One", "Two", "Three"] {
        let post = c2.create_titled(title).await;
        c2.publish(&post["id"]).await;
    }
    let rss = text(&c2, "/feed.rss", "application/rss+xml; charset=utf-8").await;
    assert_eq!(rss.matches("<item>").count(), 1);
    assert!(rss.contains("<title>Three</title>"));
}

async fn feeds_escape_what_posts_hold(db: TestDb) {
    let c = start(db, site_config(), true).await;
    let r = c
        .post(
            "/tags",
            Some(ADMIN),
            json!({"name": "R&D <\"x\">", "slug": "r-d"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let tricky = "Fish & <Chips> \"quoted\" 'single' \u{1}\u{8}\u{b}\u{c}\u{1f}\u{fffe}end";
    let post = c
        .create(json!({
            "title": tricky,
            "slug": "fish",
            "content": "<script>alert('x')</script> & ]]> \u{1}",
            "excerpt": "a < b \u{2}",
            "tag_slugs": ["r-d"],
        }))
        .await;
    c.publish(&post["id"]).await;
    for (path, kind) in [
        ("/feed.atom", "application/atom+xml; charset=utf-8"),
        ("/feed.rss", "application/rss+xml; charset=utf-8"),
        ("/sitemap.xml", "application/xml; charset=utf-8"),
    ] {
        let doc = text(&c, path, kind).await;
        // No character XML 1.0 cannot carry, and no markup from a post.
        assert!(
            !doc.chars()
                .any(|ch| (ch < ' ' && !matches!(ch, '\t' | '\n' | '\r')) || ch == '\u{fffe}'),
            "{path}: {doc:?}"
        );
        assert!(
            !doc.contains("<script>") && !doc.contains("<Chips>"),
            "{path}"
        );
        if path != "/sitemap.xml" {
            assert!(
                doc.contains("Fish &amp; &lt;Chips&gt; &quot;quoted&quot; &apos;single&apos; end"),
                "{path}: {doc}"
            );
            assert!(
                doc.contains("R&amp;D &lt;&quot;x&quot;&gt;"),
                "{path}: {doc}"
            );
        }
    }
}

async fn the_sitemap_lists_every_published_post_with_lastmod(db: TestDb) {
    let c = start(db, site_config(), true).await;
    let empty = text(&c, "/sitemap.xml", "application/xml; charset=utf-8").await;
    assert_eq!(
        empty,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n</urlset>\n"
    );
    let a = c.create_titled("Alpha").await;
    let b = c.create_titled("Beta").await;
    c.create_titled("Draft").await;
    c.publish(&a["id"]).await;
    let b = c.publish(&b["id"]).await;
    let map = text(&c, "/sitemap.xml", "application/xml; charset=utf-8").await;
    assert_eq!(map.matches("<url>").count(), 2, "{map}");
    let updated = &b["updated_at"].as_str().unwrap()[..19];
    assert!(map.contains(&format!(
        "<url><loc>https://blog.example.com/api/v1/blog/posts/beta</loc><lastmod>{updated}Z</lastmod></url>"
    )), "{map}");
    assert!(map.find("/posts/beta<").unwrap() < map.find("/posts/alpha<").unwrap());
    assert!(!map.contains("/posts/draft<"));
}

async fn links_follow_the_post_url_template(db: TestDb) {
    let config = BlogConfig {
        post_url_template: "/blog/{slug}/".into(),
        ..site_config()
    };
    let c = start(db, config, true).await;
    let post = c.create_titled("Hello").await;
    c.publish(&post["id"]).await;
    let atom = text(&c, "/feed.atom", "application/atom+xml; charset=utf-8").await;
    assert!(
        atom.contains("href=\"https://blog.example.com/blog/hello/\""),
        "{atom}"
    );
    let map = text(&c, "/sitemap.xml", "application/xml; charset=utf-8").await;
    assert!(map.contains("<loc>https://blog.example.com/blog/hello/</loc>"));
    let config = BlogConfig {
        post_url_template: "https://www.example.org/p?s={slug}&x=1".into(),
        ..site_config()
    };
    let c = start(sibling(&c.db).await, config, true).await;
    let post = c.create_titled("Hello").await;
    c.publish(&post["id"]).await;
    let rss = text(&c, "/feed.rss", "application/rss+xml; charset=utf-8").await;
    assert!(
        rss.contains("<link>https://www.example.org/p?s=hello&amp;x=1</link>"),
        "{rss}"
    );
}
