"""The blog as feed readers, crawlers and caches read it: feedparser (the feed library of Python's
readers and aggregators) parses the Atom and RSS feeds without complaint, the sitemap validates
against the Sitemap protocol's XML Schema (xmlschema, with the schema of sitemaps.org kept in
fixtures/), every public read answers a conditional GET with 304, and a scheduled post is
published by the task worker at its time."""

import datetime
import pathlib
import time
import uuid
import xml.etree.ElementTree as ElementTree

import feedparser
import pytest
import requests
import xmlschema

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
SITEMAP_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


@pytest.fixture(scope="module")
def blog(base_url, admin_token):
    """Two published posts with a tag whose name and title need escaping, and a draft."""
    api = f"{base_url}/api/v1/blog"
    auth = {"Authorization": f"Bearer {admin_token}"}
    run = uuid.uuid4().hex[:8]
    tag = requests.post(
        f"{api}/tags", json={"name": f"R&D <{run}>"}, headers=auth, timeout=30
    )
    assert tag.status_code == 201, tag.text
    tag = tag.json()
    posts = []
    for title in [f"Fish & <Chips> \"quoted\" 'single' \x01 {run}", f"Second {run}"]:
        created = requests.post(
            f"{api}/posts",
            json={
                "title": title,
                "content": "Some *Markdown* & <b>raw HTML</b>",
                "tag_slugs": [tag["slug"]],
            },
            headers=auth,
            timeout=30,
        )
        assert created.status_code == 201, created.text
        published = requests.post(
            f"{api}/posts/{created.json()['id']}/publish", headers=auth, timeout=30
        )
        assert published.status_code == 200, published.text
        posts.append(published.json())
    draft = requests.post(
        f"{api}/posts", json={"title": f"Draft {run}"}, headers=auth, timeout=30
    )
    assert draft.status_code == 201
    return {"api": api, "auth": auth, "tag": tag, "posts": posts, "run": run}


def fetch(url):
    answer = requests.get(url, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer


def parse(answer):
    return feedparser.parse(
        answer.content,
        response_headers={
            "content-type": answer.headers["content-type"],
            "content-location": answer.url,
        },
    )


def shown_title(title):
    # XML 1.0 cannot carry C0 controls: the feeds leave them out.
    return "".join(c for c in title if c >= " " or c in "\t\n\r")


def by_title(feed, title):
    matches = [e for e in feed.entries if e.title == shown_title(title)]
    assert len(matches) == 1, [e.title for e in feed.entries]
    return matches[0]


@pytest.mark.parametrize("kind, version", [("atom", "atom10"), ("rss", "rss20")])
def test_feedparser_reads_the_feeds_without_error(base_url, blog, kind, version):
    answer = fetch(f"{blog['api']}/feed.{kind}")
    feed = parse(answer)
    assert not feed.bozo, feed.get("bozo_exception")
    assert feed.version == version
    titles = [e.title for e in feed.entries]
    assert shown_title(f"Draft {blog['run']}") not in titles
    for post in blog["posts"]:
        entry = by_title(feed, post["title"])
        assert entry.link == f"{base_url}/api/v1/blog/posts/{post['slug']}"
        assert entry.published_parsed is not None
        if kind == "atom":
            assert [(t.term, t.label) for t in entry.tags] == [
                (blog["tag"]["slug"], blog["tag"]["name"])
            ]
            html = entry.content[0].value
            assert entry.content[0].type == "text/html"
        else:
            assert [t.term for t in entry.tags] == [blog["tag"]["name"]]
            html = entry.summary
        assert "<em>Markdown</em>" in html
        # Raw HTML in the Markdown is shown as text, never as markup.
        assert "<b>" not in html and "&lt;b&gt;" in html
    # Newest publication first.
    assert titles.index(shown_title(blog["posts"][1]["title"])) < titles.index(
        shown_title(blog["posts"][0]["title"])
    )
    self_links = [l.href for l in feed.feed.links if l.rel == "self"]
    assert self_links == [f"{base_url}/api/v1/blog/feed.{kind}"]


@pytest.mark.parametrize("kind", ["atom", "rss"])
def test_the_tag_filter(blog, kind):
    feed = parse(fetch(f"{blog['api']}/feed.{kind}?tag={blog['tag']['slug']}"))
    assert not feed.bozo, feed.get("bozo_exception")
    assert len(feed.entries) == 2
    empty = parse(fetch(f"{blog['api']}/feed.{kind}?tag=no-such-tag-{blog['run']}"))
    assert not empty.bozo and empty.entries == []


def test_the_sitemap_is_valid_against_the_protocol_schema(base_url, blog):
    schema = xmlschema.XMLSchema(str(FIXTURES / "sitemap-0.9.xsd"))
    answer = fetch(f"{blog['api']}/sitemap.xml")
    assert answer.headers["content-type"] == "application/xml; charset=utf-8"
    schema.validate(answer.text)
    root = ElementTree.fromstring(answer.content)
    urls = {
        u.find(f"{SITEMAP_NS}loc").text: u.find(f"{SITEMAP_NS}lastmod").text
        for u in root.iter(f"{SITEMAP_NS}url")
    }
    for post in blog["posts"]:
        lastmod = urls[f"{base_url}/api/v1/blog/posts/{post['slug']}"]
        assert lastmod == post["updated_at"][:19] + "Z"
    assert not any(f"draft-{blog['run']}" in loc for loc in urls)


@pytest.mark.parametrize(
    "path",
    ["/posts", "/posts?tag={tag}", "/posts/{slug}", "/tags", "/feed.atom", "/feed.rss", "/sitemap.xml"],
)
def test_conditional_gets_answer_304(blog, path):
    url = blog["api"] + path.format(tag=blog["tag"]["slug"], slug=blog["posts"][0]["slug"])
    first = fetch(url)
    etag = first.headers["ETag"]
    assert etag.startswith('"') and not etag.startswith("W/")
    assert first.headers["Cache-Control"] == "public, max-age=0, must-revalidate"
    for sent in [etag, f"W/{etag}", f'"stale", {etag}', "*"]:
        again = requests.get(url, headers={"If-None-Match": sent}, timeout=30)
        assert again.status_code == 304, sent
        assert again.content == b""
        assert again.headers["ETag"] == etag
    stale = requests.get(url, headers={"If-None-Match": '"stale"'}, timeout=30)
    assert stale.status_code == 200 and stale.content == first.content


def test_a_scheduled_post_is_published_by_the_worker(blog):
    api, auth = blog["api"], blog["auth"]
    created = requests.post(
        f"{api}/posts", json={"title": f"Scheduled {blog['run']}"}, headers=auth, timeout=30
    ).json()
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
    scheduled = requests.post(
        f"{api}/posts/{created['id']}/publish",
        json={"at": at.isoformat()},
        headers=auth,
        timeout=30,
    )
    assert scheduled.status_code == 200, scheduled.text
    body = scheduled.json()
    assert body["status"] == "draft" and body["scheduled_at"] is not None
    assert requests.get(f"{api}/posts/{created['slug']}", timeout=30).status_code == 404
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = requests.get(f"{api}/posts/{created['slug']}", timeout=30)
        if answer.status_code == 200:
            post = answer.json()
            assert post["status"] == "published" and post["scheduled_at"] is None
            published = datetime.datetime.fromisoformat(post["published_at"].replace("Z", "+00:00"))
            assert abs((published - at).total_seconds()) < 0.001
            return
        time.sleep(0.25)
    pytest.fail("the scheduled post was not published within 30 s of its time")
