"""Memory Studio in a real headless Chromium (Debian's, driven by playwright) against the real
server through the real Envoy, which also serves the page: each tab's main flows clicked
through and the server's state checked afterwards, the save-conflict flow, refused calls
showing the server's message, sign-in without a token on an open server, phone width and
keyboard use. No test may leave a console error or an uncaught page error behind.

Screenshots of every tab go to each test's tmp folder (`studio-*.png`), and also to
$MEMSVC_STUDIO_SCREENSHOTS when it names a folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import Rest, make_config, start_gateway, start_server

import memsvc.studio
from memsvc.core.memories import MAX_BATCH_ITEMS
from memsvc.core.settings.qdrant import DEFAULT_COLLECTION
from tests.support.chat_history import message as msg
from tests.support.vectors import model_server, remote_settings, wait_for

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK),
        reason="Debian chromium is not installed: run scripts/install_browser.sh (as root)",
    ),
]
playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
# The page waits on the real server (a reindex embeds every memory on two shared cores):
# assertions poll for up to this long.
expect.set_options(timeout=30_000)

# The flags that run Debian's chromium headless here; the background-networking ones keep it
# from dialling Google's hosts, which this machine's closed network refuses.
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ADMIN = "studio-admin-token"
LAPTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
TABS = ("Memories", "Playground", "Engine", "Characters")


class Studio:
    """The server, its Envoy, and REST access as the admin, for checking the server's state."""

    def __init__(self, handle, base: str, legacy: Path):
        self.handle, self.base, self.legacy = handle, base, legacy
        self.admin = Rest(base, ADMIN)

    @property
    def url(self) -> str:
        return self.base + "/studio/"

    def ok(self, method: str, path: str, body: Any = None, token: str = ADMIN) -> Any:
        status, payload = Rest(self.base, token).call(method, path, body)
        assert status == 200, (method, path, status, payload)
        return payload

    def memories(self, owner: str) -> list[dict[str, Any]]:
        return self.ok("GET", f"/api/memory?apiKeyId={owner}&limit=200")["data"]

    def create(self, owner: str, content: str, **fields: Any) -> str:
        return self.ok("POST", "/api/memory", {"apiKeyId": owner, "content": content, **fields})["id"]

    def recent(self, filename: str) -> dict[str, Any]:
        return self.ok("GET", "/api/memory/recent_file?" + urllib.parse.urlencode({"filename": filename}))

    def seed_character(self, name: str, messages: list[dict[str, Any]]) -> None:
        path = self.handle.config.runtime_memory_dir / name / "recent.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(messages, indent=2, ensure_ascii=False), encoding="utf-8")
        registry = self.handle.config.config_dir / "characters.json"
        data = json.loads(registry.read_text(encoding="utf-8")) if registry.exists() else {"猫娘": {}}
        data["猫娘"][name] = {}
        registry.parent.mkdir(parents=True, exist_ok=True)
        registry.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


@pytest.fixture(scope="module")
def studio(tmp_path_factory) -> Iterator[Studio]:
    models = model_server()
    root = tmp_path_factory.mktemp("studio")
    legacy_app = root / "old-app"
    (legacy_app / "memory" / "Relic").mkdir(parents=True)
    (legacy_app / "memory" / "Relic" / "recent.json").write_text("[]")
    handle = start_server(
        make_config(
            root,
            api_tokens=(ADMIN,),
            legacy_app_roots=(str(legacy_app),),
            recent_flush_s=3600.0,
            embedding_providers=(("local", models.base_url),),
        )
    )
    gateway = start_gateway(handle)
    try:
        yield Studio(handle, f"http://127.0.0.1:{gateway.settings.listen_port}", legacy_app / "memory")
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


class Console:
    """Everything the page reported as an error: console errors and uncaught exceptions."""

    def __init__(self, page) -> None:
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

    def refusals(self) -> list[str]:
        """The browser's own note for each refused request (status >= 400)."""
        return [e for e in self.errors if "the server responded with a status of" in e]


@pytest.fixture
def open_page(browser, tmp_path):
    """open_page(viewport) -> (page, console); the console must stay clean unless a test
    expects refusals and checks them itself."""
    contexts, consoles = [], []

    def make(viewport: dict[str, int] = LAPTOP):
        context = browser.new_context(viewport=viewport, accept_downloads=True)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(20_000)
        console = Console(page)
        consoles.append(console)
        return page, console

    yield make
    for context in contexts:
        context.close()


def assert_clean(console: Console) -> None:
    assert console.errors == [], console.errors


def sign_in(page, studio_url: str, token: str | None) -> None:
    page.goto(studio_url)
    if token is not None:
        # The page first asks, without a token, who it is: sign in once that answer is on
        # screen, so it cannot land after (and over) the signed-in one.
        expect(page.locator("#caller")).to_have_text(re.compile(r"\S"))
        page.get_by_label("Bearer token").fill(token)
        page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#caller")).to_contain_text("Signed in as")


def tab(page, name: str):
    page.get_by_role("tab", name=name).click()
    panel = page.locator(f"#panel-{name.lower()}")
    expect(panel).to_be_visible()
    return panel


def engine_tab(page):
    """The Engine tab once it has loaded: its status indicators drawn, and its forms filled
    in the same step."""
    panel = tab(page, "Engine")
    expect(panel.locator(".indicator")).to_have_count(5)
    return panel


def shot(page, tmp_path: Path, name: str, full_page: bool = True) -> None:
    """Into the test's tmp folder; also into $MEMSVC_STUDIO_SCREENSHOTS when set (how the
    pictures in docs/studio/ that README.md and docs/studio.md show are refreshed)."""
    page.screenshot(path=str(tmp_path / f"studio-{name}.png"), full_page=full_page)
    if os.environ.get("MEMSVC_STUDIO_SCREENSHOTS"):
        page.screenshot(path=str(Path(os.environ["MEMSVC_STUDIO_SCREENSHOTS"]) / f"{name}.png"), full_page=full_page)


def memory_rows(panel):
    return panel.locator("table.memories tbody tr[data-id]")


class Held:
    """The page's `method` requests to `path`, held back until the `held` block ends: each
    still reaches the real server, only later, so a test can look at the page while a save
    is in flight. Other requests pass untouched."""

    def __init__(self, page, method: str, path: str):
        self.page, self.method, self.path = page, method, path
        self.routes: list[Any] = []

    def matches(self, url: str) -> bool:
        return urllib.parse.urlsplit(url).path == self.path

    def handle(self, route) -> None:
        if route.request.method == self.method:
            self.routes.append(route)
        else:
            route.continue_()

    def wait(self, timeout_s: float = 30.0) -> None:
        """Until the page has sent the request (the browser's events are delivered while
        playwright waits, so the wait is a short page timeout, repeated)."""
        deadline = time.monotonic() + timeout_s
        while not self.routes:
            assert time.monotonic() < deadline, f"the page sent no {self.method} {self.path}"
            self.page.wait_for_timeout(20)


@contextlib.contextmanager
def held(page, method: str, path: str) -> Iterator[Held]:
    hold = Held(page, method, path)
    page.route(hold.matches, hold.handle)
    try:
        yield hold
    finally:
        for route in hold.routes:
            route.continue_()
        page.unroute(hold.matches, hold.handle)


def save_in_flight(page, scope, button, method: str, path: str, note: str) -> None:
    """Clicks `button` with its write held back: while the server has not answered, `scope`
    shows no `note` (an earlier save's) but a pending note, and the button is disabled; once
    the write is let through this save's own note appears and the button is usable again."""
    with held(page, method, path) as hold:
        button.click()
        hold.wait()
        expect(scope.get_by_text(note)).to_have_count(0)
        expect(scope.locator(".note.pending")).to_be_visible()
        expect(button).to_be_disabled()
    expect(scope.get_by_text(note)).to_be_visible()
    expect(scope.locator(".note.pending")).to_have_count(0)
    expect(button).to_be_enabled()


# ---- Memories --------------------------------------------------------------------------------


def test_memories_tab_adds_searches_filters_pages_edits_and_deletes(studio, open_page, tmp_path):
    owner = "studio-mem"
    page, console = open_page()
    sign_in(page, studio.url, ADMIN)
    panel = tab(page, "Memories")
    panel.get_by_label("Owner (apiKeyId)").fill(owner)
    for key, content, kind in (
        ("tea", "I like green tea in the morning", "factual"),
        ("editor", "I prefer dark mode in my editor", "procedural"),
        ("trip", "We went to Kyoto in spring", "episodic"),
    ):
        panel.get_by_label("Key", exact=True).fill(key)
        panel.locator("form.add").get_by_label("Type").select_option(kind)
        panel.get_by_label("Content", exact=True).fill(content)
        panel.get_by_role("button", name="Add memory").click()
        expect(memory_rows(panel).filter(has_text=content)).to_have_count(1)
        expect(panel.get_by_role("status")).to_have_text("Memory added.")
    stored = {m["key"]: m for m in studio.memories(owner)}
    assert {k: (m["content"], m["type"]) for k, m in stored.items()} == {
        "tea": ("I like green tea in the morning", "factual"),
        "editor": ("I prefer dark mode in my editor", "procedural"),
        "trip": ("We went to Kyoto in spring", "episodic"),
    }
    expect(memory_rows(panel)).to_have_count(3)
    expect(panel.locator(".card .card-value").first).to_have_text("3")

    # Live search (debounced) and the type filter narrow the list.
    panel.get_by_label("Search").fill("tea")
    expect(memory_rows(panel)).to_have_count(1)
    expect(memory_rows(panel).first).to_contain_text("green tea")
    panel.get_by_label("Search").fill("")
    panel.locator(".toolbar").get_by_label("Type").select_option("procedural")
    expect(memory_rows(panel)).to_have_count(1)
    expect(memory_rows(panel).first).to_contain_text("dark mode")
    panel.locator(".toolbar").get_by_label("Type").select_option("")
    expect(memory_rows(panel)).to_have_count(3)

    # Inline edit changes the stored memory.
    row = panel.locator(f'tr[data-id="{stored["tea"]["id"]}"]')
    row.get_by_role("button", name="Edit memory tea").click()
    row.get_by_label("Content").fill("I like oolong tea in the afternoon")
    row.get_by_role("button", name="Save").click()
    expect(panel.get_by_role("status")).to_have_text("Memory saved.")
    assert studio.ok("GET", f"/api/memory/{stored['tea']['id']}")["content"] == "I like oolong tea in the afternoon"

    # Delete asks first; cancelling keeps it, confirming removes it from the store.
    panel.get_by_role("button", name="Delete memory trip").click()
    dialog = page.locator("#confirm")
    expect(dialog).to_contain_text("We went to Kyoto in spring")
    dialog.get_by_role("button", name="Cancel").click()
    assert stored["trip"]["id"] in {m["id"] for m in studio.memories(owner)}
    panel.get_by_role("button", name="Delete memory trip").click()
    dialog.get_by_role("button", name="Confirm").click()
    expect(panel.get_by_role("status")).to_have_text("Memory deleted.")
    assert {m["key"] for m in studio.memories(owner)} == {"tea", "editor"}

    # Paging: 20 to a page.
    for i in range(21):
        studio.create(owner, f"filler memory number {i}", key=f"filler-{i:02d}")
    panel.get_by_label("Search").fill("filler")
    expect(panel.locator(".pager")).to_contain_text("Page 1 of 2 · 21 in all")
    expect(memory_rows(panel)).to_have_count(20)
    panel.get_by_role("button", name="Next ›").click()
    expect(panel.locator(".pager")).to_contain_text("Page 2 of 2")
    expect(memory_rows(panel)).to_have_count(1)
    expect(page.locator("#health")).to_have_class("health ok")
    shot(page, tmp_path, "memories")
    assert_clean(console)


RESTORED = ("apiKeyId", "sessionId", "type", "key", "content", "metadata", "keep", "occurredAt")


def _restorable(memories: list[dict[str, Any]]) -> list[tuple]:
    return sorted(tuple(json.dumps(m.get(f), sort_keys=True) for f in RESTORED) for m in memories)


def test_memories_export_import_round_trip_and_compress_old(studio, open_page, tmp_path):
    owner = "studio-export"
    studio.create(owner, "I like green tea", key="tea", type="factual", metadata={"source": "chat", "n": 3}, keep=True)
    studio.create(
        owner, "Meeting moved to Friday", type="episodic", sessionId="s-1", occurredAt="2023-12-29T16:30:00+02:00"
    )
    studio.create(owner, "Always run the tests before pushing", key="habit", type="procedural")
    before = studio.memories(owner)
    page, console = open_page()
    sign_in(page, studio.url, ADMIN)
    panel = tab(page, "Memories")
    panel.get_by_label("Owner (apiKeyId)").fill(owner)
    expect(memory_rows(panel)).to_have_count(3)
    with page.expect_download() as info:
        panel.get_by_role("button", name="Export owner as JSON").click()
    exported = tmp_path / "export.json"
    info.value.save_as(exported)
    doc = json.loads(exported.read_text())
    assert doc["apiKeyId"] == owner and _restorable(doc["memories"]) == _restorable(before)

    # Everything gone, then the file brings it back exactly.
    assert studio.ok("DELETE", f"/api/memory?apiKeyId={owner}")["deletedCount"] == 3
    panel.get_by_label("Import a JSON export").set_input_files(str(exported))
    expect(panel.get_by_role("status")).to_have_text(f"Imported 3 memories into {owner}.")
    after = studio.memories(owner)
    assert _restorable(after) == _restorable(before)
    assert {m["content"]: (m.get("keep", False), m.get("occurredAt")) for m in after} == {
        "I like green tea": (True, None),
        "Meeting moved to Friday": (False, "2023-12-29T14:30:00Z"),
        "Always run the tests before pushing": (False, None),
    }
    # The list shows the restored memories (new ids), not the listing from before the clear.
    restored_ids = sorted(m["id"] for m in after)
    wait_for(
        lambda: sorted(memory_rows(panel).evaluate_all("rs => rs.map(r => r.dataset.id)")) == restored_ids,
        what="the list to show the imported memories",
    )

    # Compress old: a dry run lists the candidates, nothing changes until confirmed.
    old = (datetime.now(UTC) - timedelta(days=60)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with studio.handle.app.database.write() as conn:
        conn.execute("UPDATE memories SET created_at = ? WHERE api_key_id = ?", (old, owner))
    panel.get_by_role("button", name="Compress old…").click()
    dialog = page.locator("#confirm")
    # The kept memory (green tea) has no age limit: it is not a candidate.
    expect(dialog).to_contain_text("Compress 2 memories")
    expect(dialog.locator("li")).to_have_count(2)
    dialog.get_by_role("button", name="Cancel").click()
    assert len(studio.memories(owner)) == 3
    panel.get_by_role("button", name="Compress old…").click()
    dialog.get_by_role("button", name="Confirm").click()
    expect(panel.get_by_role("status")).to_contain_text("Compressed 2 memories")
    by_key = {m["key"]: m for m in studio.memories(owner)}
    assert by_key.keys() - {"tea"} == {k for k in by_key if k.startswith("summary_")} and len(by_key) == 2
    assert by_key["tea"]["content"] == "I like green tea" and by_key["tea"]["keep"] is True
    [summary] = [m for k, m in by_key.items() if k != "tea"]
    assert "Friday" in summary["content"] and "green tea" not in summary["content"]
    assert_clean(console)


def test_import_restores_in_batches_and_reports_a_refused_memory_while_keeping_the_others(studio, open_page, tmp_path):
    owner = "studio-bulk"
    memories = [{"content": f"imported fact {i}", "type": "factual"} for i in range(MAX_BATCH_ITEMS + 203)]
    memories[1100] = {"content": "a fact of an unknown kind", "type": "gossip"}
    exported = tmp_path / "bulk.json"
    exported.write_text(json.dumps({"format": "memsvc.memories.v1", "apiKeyId": owner, "memories": memories}))
    page, console = open_page()
    posts: list[str] = []
    page.on("request", lambda r: posts.append(urllib.parse.urlsplit(r.url).path) if r.method == "POST" else None)
    sign_in(page, studio.url, ADMIN)
    panel = tab(page, "Memories")
    panel.get_by_label("Owner (apiKeyId)").fill(owner)

    panel.get_by_label("Import a JSON export").set_input_files(str(exported))

    expect(panel.get_by_role("status")).to_have_text(
        f"Imported {len(memories) - 1} of {len(memories)} memories into {owner}; 1 refused."
    )
    expect(panel.locator("[data-el=transfer-status] li")).to_have_text(
        "memory 1101: type: must be one of factual, episodic, procedural, semantic"
    )
    assert posts.count("/api/memory/batch") == 2 and "/api/memory" not in posts  # 1000 per call, in order
    stored = studio.ok("GET", f"/api/memory?apiKeyId={owner}&limit=1")
    assert stored["total"] == len(memories) - 1
    assert_clean(console)


def test_the_studio_import_chunk_is_the_servers_batch_limit():
    source = (Path(memsvc.studio.__file__).parent / "memories.js").read_text(encoding="utf-8")
    assert f"const IMPORT_BATCH = {MAX_BATCH_ITEMS};" in source


# ---- Playground ------------------------------------------------------------------------------


def test_playground_simulates_retrieval_with_scores_and_resolution(studio, open_page, tmp_path):
    owner = "studio-play"
    studio.ok("PUT", "/api/settings/memory", remote_settings(model_server()))
    for text in ("I prefer dark mode in my editor", "My cat is called Miso", "I usually run in the morning"):
        studio.create(owner, text)
    page, console = open_page()
    sign_in(page, studio.url, ADMIN)
    panel = tab(page, "Playground")
    panel.get_by_label("Owner (apiKeyId)").fill(owner)
    panel.get_by_label("Query").fill("which editor theme do I like")
    panel.get_by_label("Strategy").select_option("hybrid")
    panel.get_by_label("Token budget").fill("500")
    panel.get_by_role("button", name="Simulate").click()
    rows = panel.locator("table.results tbody tr[data-id]")
    expect(rows.first).to_contain_text("dark mode")
    server = studio.ok(
        "POST",
        "/api/memory/retrieve-preview",
        {"apiKeyId": owner, "query": "which editor theme do I like", "strategy": "hybrid", "maxTokens": 500},
    )
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.id)") == [m["id"] for m in server["memories"]]
    first = server["memories"][0]
    expect(rows.first).to_contain_text(f"{first['score']:.4f}")
    expect(rows.first).to_contain_text(first["tier"])
    expect(rows.first.get_by_role("img", name="vector score")).to_have_attribute(
        "aria-label", f"vector score: {first['vecScore']:.3f}"
    )
    expect(panel.locator(".budget")).to_contain_text(f"of {server['budgetMaxTokens']} tokens")
    resolution = panel.locator(".resolution")
    expect(resolution.locator('dd[data-name="Embedding source"]')).to_have_text("remote")
    expect(resolution.locator('dd[data-name="Vector store"]')).to_have_text(server["resolution"]["vectorStore"])
    expect(resolution.locator('dd[data-name="Fallback"]')).to_have_text(
        server["resolution"]["fallbackReason"] or "none"
    )
    shot(page, tmp_path, "playground")

    # Without vectors the resolution says which fallback was taken and why.
    studio.ok("PUT", "/api/settings/memory", {"embeddingSource": "auto", "customBaseUrl": "", "customModelId": ""})
    panel.get_by_role("button", name="Simulate").click()
    fallback = studio.ok(
        "POST",
        "/api/memory/retrieve-preview",
        {"apiKeyId": owner, "query": "which editor theme do I like", "strategy": "hybrid"},
    )["resolution"]["fallbackReason"]
    assert fallback
    expect(resolution.locator('dd[data-name="Fallback"]')).to_have_text(fallback)
    assert_clean(console)


def test_the_tier_badge_stays_on_one_line_at_laptop_and_phone_width(studio, open_page, tmp_path):
    owner = "studio-tier"
    studio.ok("PUT", "/api/settings/memory", remote_settings(model_server()))
    for text in ("I prefer dark mode in my editor", "My editor font is a monospace one at size fourteen"):
        studio.create(owner, text)
    for name, viewport in (("laptop", LAPTOP), ("phone", PHONE)):
        page, console = open_page(viewport)
        sign_in(page, studio.url, ADMIN)
        panel = tab(page, "Playground")
        panel.get_by_label("Owner (apiKeyId)").fill(owner)
        panel.get_by_label("Query").fill("which editor theme and font do I like")
        panel.get_by_label("Strategy").select_option("hybrid")
        panel.get_by_role("button", name="Simulate").click()
        badges = panel.locator("table.results .tier")
        expect(badges).to_have_count(2)
        # The lines a badge's text is laid out on: one, however narrow its column.
        lines = badges.evaluate_all("""els => els.map(e => {
            const r = document.createRange(); r.selectNodeContents(e);
            return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; })""")
        assert lines == [1, 1], (name, badges.all_text_contents(), lines)
        shot(page, tmp_path, f"playground-tier-{name}", full_page=False)
        assert_clean(console)


# ---- Engine ----------------------------------------------------------------------------------


def test_engine_tab_sets_the_source_reindexes_with_progress_and_configures_qdrant(studio, open_page, tmp_path):
    models = model_server()
    studio.ok(
        "PUT",
        "/api/settings/memory",
        {"enabled": False, "embeddingSource": "auto", "customBaseUrl": "", "customModelId": ""},
    )
    for text in ("I prefer tabs over spaces", "My sister lives in Oslo", "I drink coffee black"):
        studio.create("studio-engine", text)
    page, console = open_page()
    sign_in(page, studio.url, ADMIN)
    panel = engine_tab(page)
    embeddings = panel.locator('.indicator[data-name="Embeddings"]')
    expect(embeddings).to_have_class("indicator neutral")  # no source chosen: off, not a fault
    expect(panel.locator('.indicator[data-name="Keyword index"]')).to_have_class("indicator ok")

    panel.get_by_label("Memory enabled").check()
    panel.get_by_label("Embedding source").select_option("remote")
    panel.get_by_label("Remote base URL").fill(models.base_url)
    panel.get_by_label("Remote model").fill("minilm")
    panel.get_by_role("button", name="Save").first.click()
    expect(panel.get_by_text("Settings saved.")).to_be_visible()  # shown only once this save's PUT answered
    settings = studio.ok("GET", "/api/settings/memory")
    assert (settings["enabled"], settings["embeddingSource"], settings["customBaseUrl"]) == (
        True,
        "remote",
        models.base_url,
    )
    expect(embeddings).to_have_class("indicator ok")

    panel.get_by_label("Re-embed every memory").check()
    panel.get_by_role("button", name="Reindex now").click()
    expect(panel.get_by_text("Reindexed")).to_be_visible()
    status = studio.ok("GET", "/api/memory/engine-status")["vectorStore"]
    assert status["needsReindex"] == 0 and status["rowCount"] >= 3
    progress = panel.locator("progress")
    assert progress.evaluate("p => [p.value, p.max]") == [status["rowCount"], status["rowCount"]]
    expect(panel.locator('[data-el="progress-text"]')).to_contain_text(
        f"done · {status['rowCount']} of {status['rowCount']}"
    )

    # Qdrant: saved settings reach the server; a test connection to nothing shows why.
    closed_port = _closed_port()
    panel.get_by_label("Host").fill("127.0.0.1")
    panel.get_by_label("Port").fill(str(closed_port))
    panel.get_by_label("Collection").fill("studio_points")
    panel.get_by_label("API key").fill("qd-studio-secret-1234")
    qdrant_card = panel.locator("form.card", has=page.get_by_role("heading", name="Qdrant"))
    qdrant_card.get_by_role("button", name="Save").click()
    expect(qdrant_card.get_by_text("Qdrant settings saved.")).to_be_visible()
    saved = studio.ok("GET", "/api/settings/qdrant")
    assert (saved["host"], saved["port"], saved["collection"], saved["hasApiKey"]) == (
        "127.0.0.1",
        closed_port,
        "studio_points",
        True,
    )
    assert "qd-studio-secret-1234" not in page.content()
    qdrant_card.get_by_role("button", name="Test connection").click()
    health = studio.ok("GET", "/api/settings/qdrant/health")
    assert health["ok"] is False and health["error"]
    expect(qdrant_card.locator(".error")).to_contain_text("Not reachable")

    # Rerank card: switched on with its provider/model, off again.
    rerank_card = panel.locator("form.card", has=page.get_by_role("heading", name="Rerank"))
    rerank_card.get_by_label("Rerank retrieved memories").check()
    rerank_card.get_by_role("button", name="Save").click()
    expect(rerank_card.get_by_text("Rerank settings saved.")).to_be_visible()
    wait_for(lambda: studio.ok("GET", "/api/settings/memory")["rerankEnabled"] is True, what="rerank switched on")
    # Switched on without a provider/model: the status says why it cannot rerank.
    expect(panel.locator('.indicator[data-name="Rerank"]')).to_contain_text("rerankProviderModel is not set")
    shot(page, tmp_path, "engine")
    rerank_card.get_by_label("Rerank retrieved memories").uncheck()
    rerank_card.get_by_role("button", name="Save").click()
    # The first save's note went when this one started: this note is the second save's.
    expect(rerank_card.get_by_text("Rerank settings saved.")).to_be_visible()
    wait_for(lambda: studio.ok("GET", "/api/settings/memory")["rerankEnabled"] is False, what="rerank switched off")
    expect(panel.locator('.indicator[data-name="Rerank"]')).to_contain_text("rerankEnabled is false")
    assert_clean(console)


RED = "rgb(201, 42, 42)"  # --bad
GREY = "rgb(173, 181, 189)"  # --neutral


def indicator_states(panel) -> dict[str, tuple[str, str]]:
    """Each status indicator's state and its dot's colour as drawn."""
    drawn = panel.locator(".indicator").evaluate_all(
        "els => els.map(e => [e.dataset.name, e.dataset.state, getComputedStyle(e.querySelector('.dot')).backgroundColor])"
    )
    return {name: (state, colour) for name, state, colour in drawn}


def test_engine_status_shows_what_is_off_in_grey_and_red_only_for_faults(studio, open_page):
    studio.ok(
        "PUT",
        "/api/settings/memory",
        {"enabled": False, "embeddingSource": "auto", "customBaseUrl": "", "customModelId": "", "rerankEnabled": False},
    )
    studio.ok("PUT", "/api/settings/qdrant", {"enabled": False})
    page, console = open_page()
    sign_in(page, studio.url, ADMIN)
    panel = engine_tab(page)
    # Waited for, not read once: the panel draws its dots while the status request is answered,
    # and a dot being redrawn has no computed colour yet (seen once in CI as '').
    off = {
        "Keyword index": ("ok", "rgb(43, 138, 62)"),
        "Embeddings": ("neutral", GREY),
        "Vector store": ("neutral", GREY),
        "Qdrant": ("neutral", GREY),
        "Rerank": ("neutral", GREY),
    }
    wait_for(lambda: indicator_states(panel) == off, what=f"indicators drawn as {off}")
    expect(panel.locator('.indicator[data-name="Qdrant"]')).to_contain_text("Qdrant not in use")

    # Switched on and failing: red. Qdrant on a port nothing listens on; rerank with no model.
    studio.ok(
        "PUT", "/api/settings/qdrant", {"enabled": True, "host": "127.0.0.1", "port": _closed_port(), "apiKey": ""}
    )
    studio.ok("PUT", "/api/settings/memory", {"rerankEnabled": True, "rerankProviderModel": None})
    panel.get_by_role("button", name="Refresh").click()
    expect(panel.locator('.indicator[data-name="Qdrant"]')).to_have_attribute("data-state", "bad")
    expect(panel.locator('.indicator[data-name="Rerank"]')).to_have_attribute("data-state", "bad")
    wait_for(
        lambda: (states := indicator_states(panel))["Qdrant"] == ("bad", RED) and states["Rerank"] == ("bad", RED),
        what="Qdrant and Rerank drawn red",
    )
    studio.ok("PUT", "/api/settings/qdrant", {"enabled": False})
    studio.ok("PUT", "/api/settings/memory", {"rerankEnabled": False})
    assert_clean(console)


def test_the_qdrant_collection_field_shows_the_default_as_a_default_not_as_a_typed_name(studio, open_page):
    studio.ok("PUT", "/api/settings/qdrant", {"enabled": False, "collection": DEFAULT_COLLECTION})
    page, console = open_page()
    sign_in(page, studio.url, ADMIN)
    panel = engine_tab(page)
    card = panel.locator("form.card", has=page.get_by_role("heading", name="Qdrant"))
    field = card.get_by_label("Collection")
    expect(field).to_have_value("")
    expect(field).to_have_attribute("placeholder", f"default: {DEFAULT_COLLECTION}")
    expect(card).to_contain_text("leave empty for the default collection")
    # A name of one's own is saved and shown when the page loads again; emptied again, the
    # default is saved and the field loads empty.
    for typed, stored in (("my_points", "my_points"), ("", DEFAULT_COLLECTION)):
        field.fill(typed)
        card.get_by_role("button", name="Save").click()
        expect(card.get_by_text("Qdrant settings saved.")).to_be_visible()
        assert studio.ok("GET", "/api/settings/qdrant")["collection"] == stored
        page.reload()  # the tab keeps its token: signed in again, the Engine tab loads from the server
        expect(page.locator("#caller")).to_contain_text("Signed in as")
        panel = engine_tab(page)
        expect(field).to_have_value(typed)
    assert_clean(console)


def test_the_studio_default_collection_is_the_servers():
    source = (Path(memsvc.studio.__file__).parent / "engine.js").read_text(encoding="utf-8")
    assert f'const DEFAULT_COLLECTION = "{DEFAULT_COLLECTION}";' in source


def test_every_save_clears_the_last_note_the_moment_it_starts(studio, open_page):
    """A second Save once left the first one's "saved" note on screen until the server
    answered, so neither a person nor a test could tell whether the second had landed:
    each save, on every card, replaces the note with a pending one as it starts."""
    studio.seed_character("Lulu", [msg("human", "hi Lulu"), msg("ai", "hi!")])
    page, console = open_page()
    sign_in(page, studio.url, ADMIN)
    panel = engine_tab(page)
    for heading, note in (
        ("Memory and embeddings", "Settings saved."),
        ("Qdrant", "Qdrant settings saved."),
        ("Rerank", "Rerank settings saved."),
    ):
        card = panel.locator("form.card", has=page.get_by_role("heading", name=heading, exact=True))
        card.get_by_role("button", name="Save").click()
        expect(card.get_by_text(note)).to_be_visible()
        save_in_flight(
            page,
            card,
            card.get_by_role("button", name="Save"),
            "PUT",
            "/api/settings/qdrant" if heading == "Qdrant" else "/api/settings/memory",
            note,
        )

    # The Rerank card's switch, as in the flaky run: on, then off; while the second save is
    # held, the server still says on and the page does not claim otherwise.
    rerank = panel.locator("form.card", has=page.get_by_role("heading", name="Rerank"))
    rerank.get_by_label("Rerank retrieved memories").check()
    rerank.get_by_role("button", name="Save").click()
    expect(rerank.get_by_text("Rerank settings saved.")).to_be_visible()
    wait_for(lambda: studio.ok("GET", "/api/settings/memory")["rerankEnabled"] is True, what="rerank on")
    rerank.get_by_label("Rerank retrieved memories").uncheck()
    save_in_flight(
        page, rerank, rerank.get_by_role("button", name="Save"), "PUT", "/api/settings/memory", "Rerank settings saved."
    )
    assert studio.ok("GET", "/api/settings/memory")["rerankEnabled"] is False

    panel = tab(page, "Memories")
    panel.get_by_label("Owner (apiKeyId)").fill("studio-saves")
    add = panel.get_by_role("button", name="Add memory")
    panel.get_by_label("Content", exact=True).fill("the first saved memory")
    add.click()
    expect(panel.get_by_role("status")).to_have_text("Memory added.")
    panel.get_by_label("Content", exact=True).fill("the second saved memory")
    save_in_flight(page, panel, add, "POST", "/api/memory", "Memory added.")
    assert sorted(m["content"] for m in studio.memories("studio-saves")) == [
        "the first saved memory",
        "the second saved memory",
    ]

    panel = tab(page, "Characters")
    panel.get_by_role("button", name="recent_Lulu.json").click()
    editor = panel.locator('[data-el="editor"]')
    panel.get_by_label("Message 2 text").fill("hello there")
    panel.get_by_role("button", name="Save", exact=True).click()
    expect(editor.get_by_role("status")).to_have_text("Saved.")
    panel.get_by_label("Message 2 text").fill("hello again")
    save_in_flight(
        page,
        editor,
        panel.get_by_role("button", name="Save", exact=True),
        "POST",
        "/api/memory/recent_file/save",
        "Saved.",
    )
    assert json.loads(studio.recent("recent_Lulu.json")["content"])[1]["data"]["content"] == "hello again"
    assert_clean(console)


def test_a_refresh_that_answers_late_keeps_what_the_person_typed(studio, open_page):
    """The Engine tab loads its forms in the background (on sign-in, on every visit, after
    each save and reindex); an answer that arrives after the person began typing must not
    put the stored values back under their hands."""
    studio.ok("PUT", "/api/settings/memory", {"rerankProviderModel": "acme/rr-1", "customModelId": "stored-model"})
    page, console = open_page()
    with held(page, "GET", "/api/settings/memory") as hold:
        sign_in(page, studio.url, ADMIN)
        panel = tab(page, "Engine")
        hold.wait()
        panel.get_by_label("Remote model").fill("typed-model")
    # The untouched Rerank card is filled from the same answer; the edited card kept the edit.
    expect(panel.get_by_label("Rerank provider/model")).to_have_value("acme/rr-1")
    expect(panel.get_by_label("Remote model")).to_have_value("typed-model")
    # Its save fills it from the server's answer, and later refreshes fill it again.
    settings_card = panel.locator("form.card", has=page.get_by_role("heading", name="Memory and embeddings"))
    settings_card.get_by_role("button", name="Save").click()
    expect(settings_card.get_by_text("Settings saved.")).to_be_visible()
    assert studio.ok("GET", "/api/settings/memory")["customModelId"] == "typed-model"
    studio.ok("PUT", "/api/settings/memory", {"customModelId": "changed-elsewhere"})
    panel.get_by_role("button", name="Refresh").click()
    expect(panel.get_by_label("Remote model")).to_have_value("changed-elsewhere")
    studio.ok("PUT", "/api/settings/memory", {"rerankProviderModel": None, "customModelId": ""})
    assert_clean(console)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- Characters ------------------------------------------------------------------------------


def test_characters_tab_edits_renames_switches_and_purges_legacy(studio, open_page, tmp_path):
    studio.seed_character(
        "Mimi", [msg("human", "hello Mimi"), msg("ai", "hello! how was your day?"), msg("human", "long, but fine")]
    )
    page, console = open_page()
    sign_in(page, studio.url, ADMIN)
    panel = tab(page, "Characters")
    panel.get_by_role("button", name="recent_Mimi.json").click()
    panel.get_by_label("Message 3 text").fill("long, but I finished the report")
    panel.get_by_role("button", name="Add message").click()
    panel.get_by_label("Message 4 role").select_option("ai")
    panel.get_by_label("Message 4 text").fill("well done!")
    panel.get_by_role("button", name="Remove message 1").click()
    panel.get_by_role("button", name="Save", exact=True).click()
    expect(panel.get_by_role("status")).to_have_text("Saved.")
    stored = json.loads(studio.recent("recent_Mimi.json")["content"])
    assert [(m["type"], m["data"]["content"]) for m in stored] == [
        ("ai", "hello! how was your day?"),
        ("human", "long, but I finished the report"),
        ("ai", "well done!"),
    ]

    # The switches write the server's config.
    panel.get_by_label("Review (auto review of recent memory)").uncheck()
    expect(panel.get_by_text("Review (auto review of recent memory): off.")).to_be_visible()
    assert studio.ok("GET", "/api/memory/review_config")["enabled"] is False
    panel.get_by_label("Powerful Memory").uncheck()
    expect(panel.get_by_text("Powerful Memory: off.")).to_be_visible()
    assert studio.ok("GET", "/api/memory/powerful_memory_config")["enabled"] is False
    panel.get_by_label("Review (auto review of recent memory)").check()
    expect(panel.get_by_text("Review (auto review of recent memory): on.")).to_be_visible()
    assert studio.ok("GET", "/api/memory/review_config")["enabled"] is True

    # Rename, after a confirmation.
    panel.get_by_label("Rename this character to").fill("Momo")
    panel.get_by_role("button", name="Rename", exact=True).click()
    page.locator("#confirm").get_by_role("button", name="Confirm").click()
    expect(panel.get_by_text("Renamed Mimi to Momo.")).to_be_visible()
    assert "recent_Momo.json" in studio.ok("GET", "/api/memory/recent_files")["files"]
    assert "recent_Mimi.json" not in studio.ok("GET", "/api/memory/recent_files")["files"]
    assert json.loads(studio.recent("recent_Momo.json")["content"])[-1]["data"]["content"] == "well done!"
    shot(page, tmp_path, "characters")

    # Legacy scan, then a purge whose confirmation lists exactly what goes.
    panel.get_by_role("button", name="Scan").click()
    relic = str(studio.legacy / "Relic")
    panel.get_by_label("Relic/", exact=False).check()
    panel.get_by_role("button", name="Purge selected…").click()
    dialog = page.locator("#confirm")
    expect(dialog.locator("li")).to_have_text([relic])
    dialog.get_by_role("button", name="Confirm").click()
    expect(panel.get_by_text("Removed 1.")).to_be_visible()
    assert not Path(relic).exists()
    assert studio.ok("GET", "/api/memory/legacy/scan")["total_entries"] == 0
    assert_clean(console)


def test_a_save_conflict_shows_both_versions_and_loses_neither(studio, open_page, tmp_path):
    studio.seed_character("Kiki", [msg("human", "first"), msg("ai", "second")])
    page, console = open_page()
    sign_in(page, studio.url, ADMIN)
    panel = tab(page, "Characters")
    panel.get_by_role("button", name="recent_Kiki.json").click()
    panel.get_by_label("Message 2 text").fill("my edit in the studio")
    # Meanwhile the chat pipeline appends a message.
    studio.ok(
        "POST",
        "/api/memory/recent_file/append",
        {"character": "Kiki", "messages": [{"role": "human", "text": "a message from the chat"}]},
    )
    server_before = studio.recent("recent_Kiki.json")["content"]
    panel.get_by_role("button", name="Save", exact=True).click()
    conflict = panel.locator(".conflict")
    expect(conflict).to_contain_text("This file changed since you opened it")
    expect(conflict.locator(".version").nth(0)).to_contain_text("my edit in the studio")
    expect(conflict.locator(".version").nth(1)).to_contain_text("a message from the chat")
    assert studio.recent("recent_Kiki.json")["content"] == server_before  # nothing written
    shot(page, tmp_path, "characters-conflict")

    # Reload keeps the server's version (the edit is dropped on purpose).
    conflict.get_by_role("button", name="Reload the server's version").click()
    expect(panel.get_by_label("Message 3 text")).to_have_value("a message from the chat")
    expect(panel.get_by_label("Message 2 text")).to_have_value("second")

    # Edit again, conflict again, and this time overwrite knowingly.
    panel.get_by_label("Message 2 text").fill("my second edit")
    studio.ok(
        "POST",
        "/api/memory/recent_file/append",
        {"character": "Kiki", "messages": [{"role": "ai", "text": "another chat reply"}]},
    )
    panel.get_by_role("button", name="Save", exact=True).click()
    expect(conflict.locator(".version").nth(1)).to_contain_text("another chat reply")
    conflict.get_by_role("button", name="Overwrite with my edits").click()
    expect(panel.get_by_role("status")).to_have_text("Saved.")
    stored = json.loads(studio.recent("recent_Kiki.json")["content"])
    assert [m["data"]["content"] for m in stored] == ["first", "my second edit", "a message from the chat"]
    # The browser notes each refused request itself; the page reported nothing else.
    assert console.errors == console.refusals() and len(console.refusals()) == 2
    assert all("status of 409" in e for e in console.refusals())


# ---- access ----------------------------------------------------------------------------------


def test_a_read_only_tenant_token_is_offered_only_what_it_may_do_and_refusals_show_the_message(studio, open_page):
    token = studio.handle.app.credentials.create("studio-reader", ["read:memory"], ["tenant-a"], False).token
    studio.create("tenant-a", "tenant A likes jasmine tea")
    studio.create("tenant-b", "tenant B secret")
    page, console = open_page()
    sign_in(page, studio.url, token)
    expect(page.locator("#caller")).to_contain_text("studio-reader: read:memory; tenants tenant-a")
    panel = tab(page, "Memories")
    expect(panel.get_by_label("Owner (apiKeyId)")).to_have_value("tenant-a")
    expect(memory_rows(panel)).to_have_count(1)
    expect(memory_rows(panel).first).to_contain_text("jasmine tea")
    for absent in ("Add memory", "Compress old…"):
        expect(panel.get_by_role("button", name=absent)).to_have_count(0)
    expect(panel.get_by_role("button", name="Export owner as JSON")).to_be_visible()
    # No Edit or Delete on its rows: only the memory's history, and a note that it is read only.
    expect(panel.locator("td.actions").first).to_have_text(re.compile(r"^History\s*read only$"))
    expect(tab(page, "Engine")).to_contain_text("need an admin token")
    expect(tab(page, "Characters")).to_contain_text("no access to character memory")

    # Another tenant's memories: the server refuses, and the page shows its message.
    panel = tab(page, "Memories")
    panel.get_by_label("Owner (apiKeyId)").fill("tenant-b")
    alert = panel.get_by_role("alert")
    expect(alert).to_contain_text("HTTP 403")
    expect(alert).to_contain_text("may not address apiKeyId 'tenant-b'")
    expect(memory_rows(panel)).to_have_count(0)

    # A token revoked while signed in: the next call is refused with the server's message.
    studio.handle.app.credentials.revoke("studio-reader")
    panel.get_by_label("Owner (apiKeyId)").fill("tenant-a")
    expect(alert).to_contain_text("HTTP 401")
    expect(alert).to_contain_text("missing or invalid bearer token")
    # Signing in with a wrong token says so at the top.
    sign_in_refused(page, "msk_000000000000_" + "x" * 43)
    assert console.errors == console.refusals() and len(console.refusals()) == 3
    assert [e.split("status of ")[1][:3] for e in console.refusals()] == ["403", "401", "401"]


def test_the_signed_in_admin_is_named_as_the_readme_names_it(studio, open_page):
    """A MEMSVC_API_TOKENS token's credential id is env:N; on screen it is the admin token
    it is, and a stored credential keeps the name it was given."""
    page, console = open_page()
    sign_in(page, studio.url, ADMIN)
    expect(page.locator("#caller")).to_have_text("Signed in as admin (MEMSVC_API_TOKENS token 1): full access")
    ops = studio.handle.app.credentials.create("studio-ops", ["admin"], ["*"], True).token
    sign_in(page, studio.url, ops)
    expect(page.locator("#caller")).to_have_text("Signed in as studio-ops: full access")
    studio.handle.app.credentials.revoke("studio-ops")
    assert_clean(console)


def sign_in_refused(page, token: str) -> None:
    page.get_by_label("Bearer token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#global-error")).to_contain_text("HTTP 401")
    expect(page.locator("#global-error")).to_contain_text("missing or invalid bearer token")
    expect(page.locator("#caller")).to_have_text("signed out: the token was refused")


def test_every_tab_is_labelled_keyboard_reachable_and_fits_a_phone(studio, open_page, tmp_path):
    page, console = open_page(PHONE)
    sign_in(page, studio.url, ADMIN)
    page.get_by_role("tab", name="Memories").focus()
    for name in TABS[1:]:
        page.keyboard.press("ArrowRight")
        expect(page.get_by_role("tab", name=name)).to_be_focused()
        expect(page.get_by_role("tab", name=name)).to_have_attribute("aria-selected", "true")
        expect(page.locator(f"#panel-{name.lower()}")).to_be_visible()
    page.keyboard.press("Home")
    expect(page.get_by_role("tab", name="Memories")).to_have_attribute("aria-selected", "true")
    for name in TABS:
        panel = tab(page, name)
        expect(panel.locator("input, select, textarea, button").first).to_be_visible()
        unlabelled = panel.evaluate("""p => [...p.querySelectorAll('input, select, textarea')]
            .filter(c => !(c.labels && c.labels.length) && !c.getAttribute('aria-label'))
            .map(c => c.outerHTML)""")
        assert unlabelled == [], (name, unlabelled)
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth"), name
        shot(page, tmp_path, f"{name.lower()}-phone", full_page=False)
    assert_clean(console)


@pytest.fixture
def open_server(tmp_path) -> Iterator[str]:
    handle = start_server(make_config(tmp_path))
    gateway = start_gateway(handle)
    try:
        yield f"http://127.0.0.1:{gateway.settings.listen_port}"
    finally:
        gateway.stop()
        handle.stop()


def test_without_a_token_on_an_open_server_the_studio_just_works(open_server, open_page):
    page, console = open_page()
    page.goto(open_server + "/studio")  # the bare path redirects to the page
    expect(page.locator("#caller")).to_contain_text("open server (no token needed): full access")
    panel = tab(page, "Memories")
    panel.get_by_label("Owner (apiKeyId)").fill("open-owner")
    panel.get_by_label("Content", exact=True).fill("works without any token")
    panel.get_by_role("button", name="Add memory").click()
    expect(panel.get_by_role("status")).to_have_text("Memory added.")
    status, body = Rest(open_server).call("GET", "/api/memory?apiKeyId=open-owner")
    assert status == 200 and [m["content"] for m in body["data"]] == ["works without any token"]
    expect(page.locator("#health")).to_have_class("health ok")
    assert_clean(console)
