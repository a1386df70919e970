"""Web pages against a tokenless server (the quick start), in a real headless Chromium: a
page on another loopback origin submits a `<form enctype=text/plain>` shaped as JSON and
sends a `no-cors` fetch, and a DNS-rebinding page (its own name resolving to 127.0.0.1)
reads and writes same-origin. The real server behind the real Envoy stores nothing and
reveals nothing; checked through the API afterwards.

The same pages against an Envoy told to accept the attacking page's origin
(MEMSVC_ALLOWED_ORIGINS) are still refused, for their content type: each defence holds on its
own.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from html import escape
from typing import Any

import pytest
from conftest import Rest, free_port, make_config, start_server
from test_studio import CHROMIUM, CHROMIUM_ARGS, playwright_api

from memsvc.gateway.launcher import Gateway

pytestmark = pytest.mark.e2e

OWNER = "csrf-victim"
SECRET = "the victim's private memory"
REBIND_NAME = "rebind.test"


class Attacker:
    """A web server on another loopback port serving the attacking pages for `target`."""

    def __init__(self, port: int):
        self.port = port
        self.pages: dict[str, str] = {}
        attacker = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                page = attacker.pages.get(self.path.split("?")[0])
                data = (page or "not found").encode()
                self.send_response(200 if page else 404)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def form_page(target: str, content: str) -> str:
    """The classic text/plain CSRF: one field whose name and value join (`name=value`) into a
    JSON body of known fields only (the `=` lands inside free-form metadata)."""
    name = json.dumps({"apiKeyId": OWNER, "content": content, "metadata": {"a": ""}})[:-3]
    return (
        f'<form id="f" method="POST" enctype="text/plain" action="{escape(target)}/api/memory">'
        f'<input name="{escape(name)}" value="{escape(chr(34) + "}}")}"></form>'
    )


def purge_page(target: str) -> str:
    return f'<form id="f" method="POST" enctype="text/plain" action="{escape(target)}/api/memory/legacy/purge"></form>'


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("browser-csrf")
    legacy = root / "old-app"
    (legacy / "memory" / "Relic").mkdir(parents=True)
    (legacy / "memory" / "Relic" / "recent.json").write_text("[]")
    server = start_server(make_config(root, legacy_app_roots=(str(legacy),)))
    attacker = Attacker(free_port())
    strict = Gateway.for_config(replace(server.config, rest_port=free_port()), grpc_port=server.port)
    # A second Envoy needs its own admin socket, hence its own folder.
    lenient = Gateway.for_config(
        replace(server.config, rest_port=free_port(), data_dir=root / "lenient", allowed_origins=(attacker.origin,)),
        grpc_port=server.port,
    )
    gateways: dict[str, int] = {}
    try:
        gateways = {"strict": strict.start(), "lenient": lenient.start()}
        api = Rest(f"http://127.0.0.1:{gateways['strict']}")
        status, _ = api.call("POST", "/api/memory", {"apiKeyId": OWNER, "content": SECRET})
        assert status == 200
        yield {"server": server, "attacker": attacker, "ports": gateways, "api": api, "legacy": legacy}
    finally:
        attacker.stop()
        lenient.stop()
        strict.stop()
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as pw:
        # REBIND_NAME resolves to loopback, as the attacker's DNS answers once the page loaded.
        chromium = pw.chromium.launch(
            executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, f"--host-resolver-rules=MAP {REBIND_NAME} 127.0.0.1"]
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    try:
        yield context.new_page()
    finally:
        context.close()


def contents(stack) -> list[str]:
    status, body = stack["api"].call("GET", f"/api/memory?apiKeyId={OWNER}&limit=200")
    assert status == 200, body
    return [m["content"] for m in body["data"]]


def submit(page, stack, html: str, api_path: str) -> int:
    """Load `html` from the attacker's origin, submit its form, return the API's status."""
    stack["attacker"].pages["/form"] = html
    page.goto(stack["attacker"].origin + "/form")
    with page.expect_response(lambda r: api_path in r.url) as reply:
        page.evaluate("document.getElementById('f').submit()")
    return reply.value.status


def no_cors_fetch(page, stack, target: str, content: str) -> int:
    stack["attacker"].pages["/fetch"] = "<p>hello</p>"
    page.goto(stack["attacker"].origin + "/fetch")
    body = json.dumps({"apiKeyId": OWNER, "content": content})
    with page.expect_response(lambda r: "/api/memory" in r.url) as reply:
        page.evaluate(
            "([url, body]) => fetch(url, {method: 'POST', mode: 'no-cors', body}).then(() => 'sent', () => 'failed')",
            [target + "/api/memory", body],
        )
    return reply.value.status


@pytest.mark.parametrize("gateway,status", [("strict", 403), ("lenient", 415)])
def test_a_text_plain_form_from_another_origin_stores_nothing(page, stack, gateway, status):
    target = f"http://127.0.0.1:{stack['ports'][gateway]}"
    assert submit(page, stack, form_page(target, f"planted by a form via {gateway}"), "/api/memory") == status
    assert contents(stack) == [SECRET]


@pytest.mark.parametrize("gateway,status", [("strict", 403), ("lenient", 415)])
def test_an_empty_form_does_not_purge_legacy_files(page, stack, gateway, status):
    target = f"http://127.0.0.1:{stack['ports'][gateway]}"
    assert submit(page, stack, purge_page(target), "/api/memory/legacy/purge") == status
    assert (stack["legacy"] / "memory" / "Relic" / "recent.json").exists()


@pytest.mark.parametrize("gateway,status", [("strict", 403), ("lenient", 415)])
def test_a_no_cors_fetch_from_another_origin_stores_nothing(page, stack, gateway, status):
    target = f"http://127.0.0.1:{stack['ports'][gateway]}"
    assert no_cors_fetch(page, stack, target, f"planted by fetch via {gateway}") == status
    assert contents(stack) == [SECRET]


def test_a_dns_rebinding_page_reads_and_writes_nothing(page, stack):
    """The page's own name now resolves to 127.0.0.1: its calls are same-origin for the
    browser (no preflight, the response readable), and only the Host tells them apart."""
    port = stack["ports"]["strict"]
    page.goto(f"http://{REBIND_NAME}:{port}/studio/")
    replies = page.evaluate(
        """async (owner) => {
        const read = await fetch(`/api/memory?apiKeyId=${owner}`);
        const write = await fetch('/api/memory', {method: 'POST', headers: {'content-type': 'application/json'},
                                                  body: JSON.stringify({apiKeyId: owner, content: 'planted'})});
        return [read.status, await read.text(), write.status];
    }""",
        OWNER,
    )
    assert replies[0] == 403 and SECRET not in replies[1], replies
    assert replies[2] == 403, replies
    assert contents(stack) == [SECRET]
