"""A browser's own EventSource following the AI stream (the GET form of /ai/chat/stream) in
headless Chromium, on a small page the test serves on the server's origin (Playwright answers
the page's URL itself, so the stream is same-origin and needs no CORS).

An EventSource reconnects on its own whenever a stream ends, the normal end after `complete`
included, and sends the last event id it saw as Last-Event-ID; Keel answers that reconnect 204,
which makes the browser stop (readyState CLOSED) without asking the model again. The provider
simulator's journal shows how many times the model was asked.

Needs Debian's chromium (/usr/bin/chromium, or the CHROMIUM setting): Playwright drives it and
downloads no browser of its own.
"""

import json
import os
import re
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Longer than the reconnection time Keel sends (retry: 1000) and than a browser's default (about
# three seconds): a browser that was going to ask again would have done so.
QUIET_SECONDS = 4
PAGE = "/__eventsource_test__"
DOCS_PAGE = "/__eventsource_docs_example__"

# The page under test: `follow(url)` opens an EventSource and notes every event it gets, without
# ever closing it (the server alone has to stop the reconnects). One "error" listener gets both
# kinds of error: Keel's named `error` event (a MessageEvent with data) and the browser's own
# connection errors (a plain Event, no data).
FOLLOWER = """<!doctype html>
<html><head><meta charset="utf-8"><title>Keel stream</title></head><body>
<script>
window.seen = [];
window.follow = (url) => {
  const source = new EventSource(url);
  window.source = source;
  const note = (kind, e) => seen.push({
    kind, type: e.type, id: e.lastEventId ?? null, data: e.data ?? null, state: source.readyState,
  });
  source.addEventListener("open", (e) => note("open", e));
  for (const name of ["connect", "chunk", "final", "complete"]) {
    source.addEventListener(name, (e) => note("keel", e));
  }
  source.addEventListener("error", (e) => note(e.data ? "keel" : "connection", e));
};
</script>
</body></html>
"""


def docs_example() -> str:
    """The EventSource example of docs/ai.md (its first js block), as written there."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "ai.md"
    blocks = re.findall(r"```js\n(.*?)```", docs.read_text(encoding="utf-8"), re.DOTALL)
    assert blocks, "docs/ai.md has an EventSource example"
    return blocks[0]


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield browser
        browser.close()


class Tab:
    """A page of the server's origin whose body the test serves, with the statuses of the
    answers the browser got from the stream route."""

    def __init__(self, browser, base_url: str, path: str, html: str):
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.responses = []
        self.page.on("response", self._response)
        self.page.route(
            base_url + path,
            lambda route: route.fulfill(
                status=200, content_type="text/html; charset=utf-8", body=html
            ),
        )
        self.page.goto(base_url + path)

    def _response(self, response):
        if "/ai/chat/stream" in response.url:
            self.responses.append(response)

    @property
    def statuses(self) -> list:
        return [r.status for r in self.responses]

    def wait(self, condition: str, seconds: float = 30):
        self.page.wait_for_function(condition, timeout=seconds * 1000)

    def close(self):
        self.context.close()


@pytest.fixture
def tab(browser, base_url):
    opened = []

    def open_tab(path: str = PAGE, html: str = FOLLOWER) -> Tab:
        opened.append(Tab(browser, base_url, path, html))
        return opened[-1]

    yield open_tab
    for t in opened:
        t.close()


class Journal:
    """The model calls provider-sim received (the server runs with AI_PROVIDER=anthropic)."""

    def __init__(self, sim_url: str):
        self.url = f"{sim_url}/_sim/journal"
        self.start = len(self._all())

    def _all(self) -> list:
        answer = requests.get(self.url, params={"provider": "anthropic"}, timeout=30)
        answer.raise_for_status()
        return answer.json()

    def calls(self, text: str) -> int:
        """Model calls since this journal was opened whose request holds `text`."""
        return sum(1 for entry in self._all()[self.start :] if text in entry["body"])


@pytest.fixture
def fault(sim_url):
    """Queues a failure of the next model call; clears what is left afterwards."""

    def queue(spec: dict):
        answer = requests.post(f"{sim_url}/_sim/faults/anthropic", json=spec, timeout=30)
        answer.raise_for_status()

    yield queue
    requests.delete(f"{sim_url}/_sim/faults", timeout=30)


def conversations(base_url: str, user: str) -> list:
    answer = requests.get(f"{base_url}/ai/conversations", params={"user_id": user}, timeout=30)
    answer.raise_for_status()
    return answer.json()


def follow(tab: Tab, message: str, user: str) -> list:
    """Opens the stream in the page and returns what the page saw once the EventSource is
    CLOSED (that is, after the server's 204) and a quiet spell has passed."""
    tab.page.evaluate(
        "url => follow(url)",
        f"/ai/chat/stream?message={quote(message)}&user_id={quote(user)}",
    )
    tab.wait("() => seen.some(e => e.type === 'complete' || (e.type === 'error' && e.data))")
    ids = [e["id"] for e in tab.page.evaluate("seen") if e["kind"] == "keel"]
    assert all(ids), f"every event carries an id: {ids}"
    try:
        tab.wait("() => source.readyState === EventSource.CLOSED", seconds=15)
    except PlaywrightTimeoutError:
        pytest.fail(f"the EventSource kept reconnecting; the stream route answered {tab.statuses}")
    time.sleep(QUIET_SECONDS)
    return tab.page.evaluate("seen")


def assert_numbered(events: list) -> str:
    """The ids are `<message_id>:<n>`, n counting the events from 0; returns the message id."""
    message_id = events[0]["id"].split(":")[0]
    assert [e["id"] for e in events] == [f"{message_id}:{n}" for n in range(len(events))]
    return message_id


def assert_stopped_after_one_reconnect(seen: list, tab: Tab):
    """After the stream's end: the browser lost the connection (a connection error while
    CONNECTING), reconnected once (with the last id: Keel answers 204 only to a Last-Event-ID)
    and, answered 204, stopped (a connection error, CLOSED)."""
    errors = [e for e in seen if e["kind"] == "connection"]
    assert [(e["data"], e["state"]) for e in errors] == [(None, 0), (None, 2)], seen
    assert [e["kind"] for e in seen].count("open") == 1, seen
    assert tab.statuses == [200, 204], tab.statuses


def test_a_reply_arrives_in_order_with_ids_and_is_not_asked_again(tab, base_url, sim_url):
    marker = uuid.uuid4().hex
    user, message = f"browser-{marker}", f"tell me about keels {marker}"
    journal = Journal(sim_url)
    page = tab()
    seen = follow(page, message, user)

    events = [e for e in seen if e["kind"] == "keel"]
    names = [e["type"] for e in events]
    assert names[0] == "connect" and names[-2:] == ["final", "complete"], names
    assert set(names[1:-2]) == {"chunk"}, names
    message_id = assert_numbered(events)
    data = [json.loads(e["data"]) for e in events]
    assert data[0] == {"status": "connected", "message": "Stream started"}
    assert "".join(d["content"] for d in data[1:-2]) == message
    final = data[-2]
    assert (final["content"], final["message_id"], final["is_final"]) == (
        message,
        message_id,
        True,
    )
    # `complete` also names who answered, as `final` does.
    assert data[-1] == {
        "status": "completed",
        "message": "Stream completed",
        "provider": final["provider"],
        "model": final["model"],
    }
    # Keel's events all came before the end of the connection.
    assert [e["kind"] for e in seen[: len(events) + 1]] == ["open"] + ["keel"] * len(events)

    assert_stopped_after_one_reconnect(seen, page)
    # The model was asked once, and one exchange was stored.
    assert journal.calls(marker) == 1
    stored = conversations(base_url, user)
    assert [c["message_count"] for c in stored] == [2], stored


def test_a_keel_error_is_told_apart_from_a_connection_error_and_not_asked_again(
    tab, base_url, sim_url, fault
):
    marker = uuid.uuid4().hex
    user, message = f"browser-{marker}", f"this one fails {marker}"
    journal = Journal(sim_url)
    fault({"status": 529})
    page = tab()
    seen = follow(page, message, user)

    events = [e for e in seen if e["kind"] == "keel"]
    assert [e["type"] for e in events] == ["connect", "error"], seen
    assert_numbered(events)
    error = json.loads(events[1]["data"])
    assert set(error) == {"error", "detail"}, error
    assert error["error"] == "AI provider error", error
    assert error["detail"].startswith("AI provider error: "), error
    # The page saw Keel's error while the stream was open, then the browser's own errors.
    assert events[1]["state"] == 1, events

    assert_stopped_after_one_reconnect(seen, page)
    assert journal.calls(marker) == 1
    assert conversations(base_url, user) == []


@pytest.mark.parametrize("fails", [False, True], ids=["reply", "keel-error"])
def test_the_documented_client_closes_on_complete_and_on_a_keel_error(
    tab, base_url, sim_url, fault, fails
):
    journal = Journal(sim_url)
    if fails:
        fault({"status": 529})
    html = (
        '<!doctype html><html><head><meta charset="utf-8"></head><body>'
        f'<pre id="reply"></pre><script>{docs_example()}</script></body></html>'
    )
    page = tab(DOCS_PAGE, html)
    page.wait("() => source.readyState === EventSource.CLOSED")
    time.sleep(QUIET_SECONDS)
    reply = page.page.text_content("#reply")
    if fails:
        assert reply.startswith("AI provider error: "), reply
    else:
        assert reply == "Hello", reply
    # The page closed the source itself: no reconnect at all, the model asked once.
    assert page.statuses == [200], page.statuses
    assert journal.calls("Hello") == 1
