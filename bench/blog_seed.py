"""Writes the blog seed data of the benchmarks.

Usage: python3 bench/blog_seed.py json COUNT FILE   published posts with 3 of 10 tags each, as
                                                     one JSON import (`keel blog import FILE`)
       python3 bench/blog_seed.py zip COUNT FILE    Markdown files with YAML front matter in
                                                     nested folders, zipped
"""
import json
import sys
import zipfile

kind, count, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]

if kind == "json":
    tags = [f"topic-{i}" for i in range(10)]
    posts = [{
        "title": f"Post number {i}",
        "slug": f"post-{i}",
        "content": "Some **markdown** body text. " * 40,
        "excerpt": f"Excerpt {i}",
        "status": "published",
        "published_at": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z",
        "tags": [tags[i % 10], tags[(i + 3) % 10], tags[(i + 7) % 10]],
    } for i in range(count)]
    with open(path, "w") as f:
        json.dump(posts, f)
elif kind == "zip":
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(count):
            body = (f"---\ntitle: Imported post {i}\ndate: 2025-{i % 12 + 1:02d}-{i % 28 + 1:02d}\n"
                    f"tags: [alpha, beta, t{i % 50}]\n---\n\n" + ("Paragraph of text. " * 60 + "\n\n") * 3)
            z.writestr(f"content/posts/{i % 100}/post-{i}.md", body)
else:
    sys.exit(f"unknown kind {kind}: json or zip")
