"""The Memory Studio's Memories tab following the change feed (WatchMemories through Envoy, one
JSON array growing as events arrive), in a real headless Chromium against the real server and
Envoy: memories created, updated and deleted by another client show in the open tab without a
reload or a new listing; an inline edit in progress keeps what was typed; a created memory that
belongs on an earlier page is offered as "N new — show"; after Envoy is restarted under the
open stream, the tab resumes from its last token and shows what was written meanwhile once
each; leaving the tab or changing the owner closes the stream; the history dialog names every
change, its author and the superseded versions with their validity. The page's incremental
parser of the streamed array is checked at every chunk boundary.
"""

from __future__ import annotations

import os
import re
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import Rest, make_config, start_gateway, start_server
from test_studio import (
    CHROMIUM,
    CHROMIUM_ARGS,
    LAPTOP,
    Console,
    assert_clean,
    memory_rows,
    playwright_api,
    sign_in,
    tab,
)

from memsvc.v1 import memory_pb2 as mpb

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK),
        reason="Debian chromium is not installed: run scripts/install_browser.sh (as root)",
    ),
]
expect = playwright_api.expect
ADMIN = "studio-feed-admin"
WATCH = "/api/memory/watch"


class Server:
    """The server and its Envoy (restartable on the same port), and REST calls to them."""

    def __init__(self, handle: Any, gateway: Any) -> None:
        self.handle, self.gateway = handle, gateway
        self.base = f"http://127.0.0.1:{gateway.settings.listen_port}"

    @property
    def url(self) -> str:
        return self.base + "/studio/"

    def ok(self, method: str, path: str, body: Any = None, token: str = ADMIN) -> Any:
        status, payload = Rest(self.base, token).call(method, path, body)
        assert status == 200, (method, path, status, payload)
        return payload

    def create(self, owner: str, content: str, token: str = ADMIN, **fields: Any) -> str:
        return str(self.ok("POST", "/api/memory", {"apiKeyId": owner, "content": content, **fields}, token)["id"])

    def writer(self, name: str, tenants: list[str]) -> str:
        """A stored credential of another client that may read and write these tenants."""
        return str(self.handle.app.credentials.create(name, ["read:memory", "write:memory"], tenants, False).token)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("studio-feed")
    # Changes are looked for every 50 ms and a quiet stream gets a bookmark every second.
    handle = start_server(make_config(root, api_tokens=(ADMIN,), watch_poll_s=0.05, watch_heartbeat_s=1.0))
    gateway = start_gateway(handle)
    try:
        yield Server(handle, gateway)
    finally:
        gateway.stop()
        handle.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Traffic:
    """The page's requests to the memory routes: listings (GET /api/memory with the tab's
    page size), the watch requests, and requests that failed (aborted or cut)."""

    listings: list[dict[str, str]] = field(default_factory=list)
    watches: list[dict[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    def seen(self, request: Any) -> None:
        parts = urllib.parse.urlsplit(request.url)
        query = dict(urllib.parse.parse_qsl(parts.query))
        if parts.path == "/api/memory" and request.method == "GET" and query.get("limit") == "20":
            self.listings.append(query)
        elif parts.path == WATCH:
            self.watches.append(query)

    def lost(self, request: Any) -> None:
        if urllib.parse.urlsplit(request.url).path == WATCH:
            self.failed.append((request.url, request.failure or ""))

    def listed(self, owner: str) -> int:
        return sum(1 for q in self.listings if q.get("apiKeyId") == owner)


@pytest.fixture
def open_page(browser):
    """open_page() -> (page, console, traffic)."""
    contexts = []

    def make():
        context = browser.new_context(viewport=LAPTOP)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(20_000)
        traffic = Traffic()
        page.on("request", traffic.seen)
        page.on("requestfailed", traffic.lost)
        return page, Console(page), traffic

    yield make
    for context in contexts:
        context.close()


def until(page: Any, predicate: Any, what: str, timeout_s: float = 30.0) -> None:
    """Until `predicate()` holds. The page's request events reach this process only while
    playwright waits, so the wait is a short page timeout, repeated."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        page.wait_for_timeout(20)


def feed(panel: Any) -> Any:
    return panel.locator('[data-el="feed"]')


def following(page: Any, traffic: Traffic, owner: str) -> tuple[Any, Any]:
    """The Memories tab listing `owner` and following its changes: its watch sent (the feed
    that was open before closed first) and started."""
    panel = tab(page, "Memories")
    opened = len(traffic.watches)
    panel.get_by_label("Owner (apiKeyId)").fill(owner)
    until(page, lambda: any(q.get("apiKeyId") == owner for q in traffic.watches[opened:]), f"{owner}'s watch")
    expect(feed(panel)).to_have_attribute("data-state", "following")
    return panel, feed(panel)


def total_card(panel: Any) -> Any:
    return panel.locator(".card", has_text="Total entries").locator(".card-value")


def row_of(panel: Any, memory_id: str) -> Any:
    return panel.locator(f'tr[data-id="{memory_id}"]')


def rows_ids(panel: Any) -> list[str]:
    return list(memory_rows(panel).evaluate_all("rs => rs.map(r => r.dataset.id)"))


# ---- the parser --------------------------------------------------------------------------


PARSER_CHECK = """async () => {
  const { ArraySplitter } = await import('/studio/api.js');
  const elements = [
    { kind: 'bookmark', resumeToken: '1.0' },
    { s: 'brackets ] [ } { inside', q: 'an escaped \\\\" quote, then } and ]', b: 'a backslash \\\\\\\\ at the end \\\\\\\\' },
    { nested: { a: [1, { b: '}' }], c: {} }, empty: {}, list: [] },
    { unicode: 'とうきょう 🐈 \\u00e9\\u2028', slash: '\\\\/' },
    {},
  ];
  const text = ' [' + elements.map((e) => JSON.stringify(e)).join(' ,\\n') + ']\\n';
  const want = JSON.stringify(JSON.parse(text));
  const failures = [];
  const run = (pieces) => {
    const got = [];
    const splitter = new ArraySplitter((m) => got.push(m));
    for (const piece of pieces) splitter.feed(piece);
    if (JSON.stringify(got) !== want) failures.push(pieces);
  };
  for (let i = 0; i <= text.length; i += 1) run([text.slice(0, i), text.slice(i)]);
  for (let i = 0; i < text.length; i += 7) {
    for (let j = i; j <= text.length; j += 5) run([text.slice(0, i), text.slice(i, j), text.slice(j)]);
  }
  run([...text]);
  return { failures: failures.slice(0, 3), length: text.length };
}"""


def test_the_streamed_array_is_split_into_its_elements_at_any_chunk_boundary(server, open_page):
    page, console, _ = open_page()
    page.goto(server.url)
    result = page.evaluate(PARSER_CHECK)
    assert result["length"] > 200 and result["failures"] == [], result
    assert_clean(console)


# ---- following ---------------------------------------------------------------------------


def test_changes_made_by_another_client_show_in_the_open_tab_without_a_reload(server, open_page):
    owner = "feed-live"
    other = server.writer("feed-live-writer", [owner, "feed-elsewhere"])
    first = server.create(owner, "I keep a journal")
    page, console, traffic = open_page()
    sign_in(page, server.url, ADMIN)

    # No owner named: the admin's list shows, and follows, every tenant.
    panel = tab(page, "Memories")
    expect(feed(panel)).to_have_attribute("data-state", "following")
    elsewhere = server.create("feed-elsewhere", "a memory of another tenant", token=other)
    expect(row_of(panel, elsewhere)).to_have_count(1)

    panel, state = following(page, traffic, owner)
    expect(memory_rows(panel)).to_have_count(1)
    # Listed once, and once more from where the feed started; after that only the feed.
    until(page, lambda: traffic.listed(owner) == 2, "the owner listed twice")
    expect(state).to_have_text("following changes")

    created = server.create(owner, "I moved to Lisbon in May", token=other, key="home")
    expect(row_of(panel, created)).to_contain_text("I moved to Lisbon in May")
    assert rows_ids(panel) == [created, first]  # newest first, where the server lists it
    expect(total_card(panel)).to_have_text("2")
    expect(panel.locator(".pager")).to_contain_text("Page 1 of 1 · 2 in all")

    server.ok("PUT", f"/api/memory/{created}", {"content": "I moved to Porto in May"}, token=other)
    expect(row_of(panel, created)).to_contain_text("I moved to Porto in May")

    server.ok("DELETE", f"/api/memory/{first}", token=other)
    expect(row_of(panel, first)).to_have_count(0)
    expect(total_card(panel)).to_have_text("1")
    # A memory of another owner is not this list's.
    server.create("feed-elsewhere", "not for this list", token=other)

    # The studio's own add comes back through the feed, once.
    panel.get_by_label("Content", exact=True).fill("I water the plants on Sundays")
    panel.get_by_role("button", name="Add memory").click()
    expect(panel.get_by_role("status")).to_have_text("Memory added.")
    expect(memory_rows(panel).filter(has_text="I water the plants")).to_have_count(1)
    expect(total_card(panel)).to_have_text("2")  # counted after the change was applied
    expect(memory_rows(panel)).to_have_count(2)
    assert traffic.listed(owner) == 2, traffic.listings
    # The other owner's memory, written before the add whose row is shown, is not in this list.
    expect(panel.get_by_text("not for this list")).to_have_count(0)
    assert_clean(console)


def test_an_edit_in_progress_keeps_what_was_typed_when_the_memory_changes_elsewhere(server, open_page):
    owner = "feed-edit"
    other = server.writer("feed-edit-writer", [owner])
    tea = server.create(owner, "I drink green tea", key="tea")
    page, console, traffic = open_page()
    sign_in(page, server.url, ADMIN)
    panel, _ = following(page, traffic, owner)
    row = row_of(panel, tea)
    row.get_by_role("button", name="Edit memory tea").click()
    row.get_by_label("Content").fill("I drink oolong")

    server.ok("PUT", f"/api/memory/{tea}", {"content": "I drink black tea"}, token=other)
    expect(row.locator(".edit-note")).to_contain_text("it now says “I drink black tea”")
    expect(row.get_by_label("Content")).to_have_value("I drink oolong")
    # A new memory arriving meanwhile does not disturb the editor either.
    server.create(owner, "I cycle to work", token=other)
    expect(memory_rows(panel)).to_have_count(2)
    expect(row.get_by_label("Content")).to_have_value("I drink oolong")
    expect(row.get_by_label("Content")).to_be_focused()
    row.get_by_role("button", name="Cancel").click()
    expect(row).to_contain_text("I drink black tea")

    # Saved: the row shows the server's answer, and the feed's echo changes nothing.
    row.get_by_role("button", name="Edit memory tea").click()
    row.get_by_label("Content").fill("I drink oolong")
    row.get_by_role("button", name="Save").click()
    expect(panel.get_by_role("status")).to_have_text("Memory saved.")
    expect(row).to_contain_text("I drink oolong")
    assert server.ok("GET", f"/api/memory/{tea}")["content"] == "I drink oolong"

    # Deleted elsewhere while edited: what was typed stays, and it cannot be saved.
    row.get_by_role("button", name="Edit memory tea").click()
    row.get_by_label("Content").fill("I drink matcha")
    server.ok("DELETE", f"/api/memory/{tea}", token=other)
    expect(row.locator(".edit-note")).to_contain_text("This memory was deleted meanwhile by feed-edit-writer")
    expect(row.get_by_role("button", name="Save")).to_be_disabled()
    expect(row.get_by_label("Content")).to_have_value("I drink matcha")
    row.get_by_role("button", name="Cancel").click()
    expect(row_of(panel, tea)).to_have_count(0)
    expect(memory_rows(panel)).to_have_count(1)
    assert_clean(console)


def test_a_new_memory_on_a_later_page_is_offered_instead_of_shifting_the_page(server, open_page):
    owner = "feed-pages"
    for i in range(23):
        server.create(owner, f"paged memory number {i}")
    page, console, traffic = open_page()
    sign_in(page, server.url, ADMIN)
    panel, _ = following(page, traffic, owner)
    expect(memory_rows(panel)).to_have_count(20)

    # Page 1 keeps its size: the new memory on top, the last row moves on to page 2.
    top = server.create(owner, "the newest memory of all")
    expect(memory_rows(panel).first).to_have_attribute("data-id", top)
    expect(memory_rows(panel)).to_have_count(20)
    expect(panel.locator(".pager")).to_contain_text("Page 1 of 2 · 24 in all")

    panel.get_by_role("button", name="Next ›").click()
    expect(panel.locator(".pager")).to_contain_text("Page 2 of 2")
    expect(memory_rows(panel)).to_have_count(4)
    shown = rows_ids(panel)
    later = server.create(owner, "written while page 2 was shown")
    fresh = panel.get_by_role("button", name="1 new memory — show")
    expect(fresh).to_be_visible()
    expect(panel.locator(".pager")).to_contain_text("25 in all")
    assert rows_ids(panel) == shown  # the page did not move under the reader
    fresh.click()
    expect(panel.locator(".pager")).to_contain_text("Page 1 of 2")
    expect(memory_rows(panel).first).to_have_attribute("data-id", later)
    expect(fresh).to_be_hidden()
    assert_clean(console)


def test_leaving_the_tab_or_changing_the_owner_closes_the_stream(server, open_page):
    page, console, traffic = open_page()
    sign_in(page, server.url, ADMIN)
    following(page, traffic, "feed-close-a")
    tab(page, "Playground")
    until(page, lambda: any("feed-close-a" in url for url, _ in traffic.failed), "the stream closed")
    made = server.create("feed-close-a", "written while the tab was left")
    # Back: listed afresh, and following again.
    opened = len(traffic.watches)
    panel = tab(page, "Memories")
    expect(row_of(panel, made)).to_have_count(1)
    until(page, lambda: len(traffic.watches) > opened, "the stream opened again")
    expect(feed(panel)).to_have_attribute("data-state", "following")

    opened = len(traffic.watches)
    panel.get_by_label("Owner (apiKeyId)").fill("feed-close-b")
    expect(feed(panel)).to_have_attribute("data-state", "following")
    until(page, lambda: len(traffic.watches) > opened, "the new owner's stream")
    assert traffic.watches[-1]["apiKeyId"] == "feed-close-b"
    until(page, lambda: sum("feed-close-a" in url for url, _ in traffic.failed) == 2, "the old owner's stream closed")
    assert all("ERR_ABORTED" in failure for _, failure in traffic.failed), traffic.failed
    assert_clean(console)


def test_after_the_stream_is_cut_the_tab_resumes_and_shows_what_was_missed_once_each(server, open_page):
    owner = "feed-cut"
    before = server.create(owner, "written before the cut")
    page, console, traffic = open_page()
    sign_in(page, server.url, ADMIN)
    panel, state = following(page, traffic, owner)
    expect(row_of(panel, before)).to_have_count(1)
    seen = server.create(owner, "seen through the feed")
    expect(row_of(panel, seen)).to_have_count(1)
    listed = traffic.listed(owner)

    server.gateway.stop()  # the stream is cut; REST is gone until Envoy is back
    expect(state).to_have_attribute("data-state", "reconnecting")
    stubs = server.handle.stubs(ADMIN)  # another client, over gRPC meanwhile
    missed = [
        stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id=owner, content=f"written while cut {n}")).id
        for n in range(3)
    ]
    stubs.memory.DeleteMemory(mpb.DeleteMemoryRequest(id=before))
    server.gateway.start()

    expect(state).to_have_attribute("data-state", "following")
    for memory_id in missed:
        expect(row_of(panel, memory_id)).to_have_count(1)
    expect(row_of(panel, before)).to_have_count(0)
    expect(total_card(panel)).to_have_text("4")
    assert sorted(rows_ids(panel)) == sorted([seen, *missed])  # each once, nothing else
    # It resumed from its last token rather than listing again.
    assert traffic.listed(owner) == listed
    resumed = [q for q in traffic.watches if q.get("apiKeyId") == owner and q.get("resumeToken")]
    assert resumed, traffic.watches
    # The browser's own notes of the refused connections while Envoy was down, nothing else.
    assert all(re.search(r"net::ERR_\w+", e) for e in console.errors), console.errors


# ---- history -----------------------------------------------------------------------------


def when(ts: str) -> str:
    return ts.replace("T", " ")[:19]


def test_the_history_view_shows_every_change_with_its_author_and_the_superseded_versions(server, open_page, tmp_path):
    owner = "feed-history"
    other = server.writer("feed-history-writer", [owner])
    city = server.create(owner, "I live in Oslo", token=other, key="city")
    server.create(owner, "I live in Bergen", key="city")  # the admin supersedes it
    server.ok("PUT", f"/api/memory/{city}", {"content": "I live in Bergen, by the harbour"})
    stored = server.ok("GET", f"/api/memory/{city}/history")
    [version] = stored["versions"]

    page, console, traffic = open_page()
    sign_in(page, server.url, ADMIN)
    panel, _ = following(page, traffic, owner)
    row_of(panel, city).get_by_role("button", name="History of memory city").click()
    dialog = page.locator("#history")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("heading", name="History of memory city")).to_be_visible()
    entries = dialog.locator("table.history-entries tbody tr")
    expect(entries).to_have_count(3)
    admin = "admin (MEMSVC_API_TOKENS token 1)"
    assert entries.locator("td:nth-child(2)").all_inner_texts() == ["created", "superseded", "updated"]
    assert entries.locator("td.author").all_inner_texts() == ["feed-history-writer", admin, admin]
    assert entries.locator("td.when").all_inner_texts() == [when(e["at"]) for e in stored["entries"]]
    expect(entries.nth(0)).to_contain_text("I live in Oslo")
    expect(entries.nth(1)).to_contain_text("I live in Bergen")
    expect(entries.nth(2)).to_contain_text("I live in Bergen, by the harbour")
    versions = dialog.locator("table.history-versions tbody tr")
    expect(versions).to_have_count(1)
    expect(versions.first).to_have_text(
        re.compile(rf"I live in Oslo\s*{re.escape(when(version['validFrom']))}\s*{re.escape(when(version['validTo']))}")
    )
    expect(dialog.locator(".now")).to_contain_text("Now: I live in Bergen, by the harbour")
    page.screenshot(path=str(tmp_path / "studio-history.png"), full_page=True)

    expect(entries.nth(1)).to_contain_text(f"validFrom{when(stored['entries'][1]['changes']['validFrom'])}")
    # A change made while the dialog is open shows in it.
    server.ok("PUT", f"/api/memory/{city}", {"content": "I live in Trondheim"}, token=other)
    expect(entries).to_have_count(4)
    expect(entries.nth(3).locator("td.author")).to_have_text("feed-history-writer")
    expect(entries.nth(3)).to_contain_text("I live in Trondheim")
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    expect(row_of(panel, city)).to_contain_text("I live in Trondheim")
    assert_clean(console)
