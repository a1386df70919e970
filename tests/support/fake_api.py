"""The base of the loopback stand-ins for the memory stores memsvc's backends call (Obsidian's
Local REST API, Notion's API, a generic REST memory API): a real HTTP server on 127.0.0.1
that records every request and whose faults a test switches on and off:

    api.fault = "500"       every request answers HTTP 500
    api.fault = "timeout"   every request is held until the client gives up (released at stop)
    api.down() / api.up()   the port closes (connection refused) and opens again, same port

With `tls` (a server SSLContext) it serves https. Subclasses implement `route(request) -> Reply`."""

from __future__ import annotations

import json
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Request:
    method: str
    path: str  # percent-decoded, without the query string
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


@dataclass
class Reply:
    status: int
    body: Any = None
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


class FakeApi:
    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.requests: list[Request] = []
        self.fault: str | None = None
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._port = 0
        self._httpd: ThreadingHTTPServer | None = None
        self.up()

    # ---- lifecycle and faults ----

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self._port}"

    def up(self) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), self._handler())
        self._httpd.daemon_threads = True
        if self.tls is not None:
            self._httpd.socket = self.tls.wrap_socket(self._httpd.socket, server_side=True)
        self._port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name=type(self).__name__, daemon=True).start()

    def down(self) -> None:
        """Close the port: connections are refused until `up()`."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def stop(self) -> None:
        self._release.set()
        self.down()

    def __enter__(self) -> FakeApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def calls(self, method: str | None = None, prefix: str = "") -> list[Request]:
        with self._lock:
            return [r for r in self.requests if (method is None or r.method == method) and r.path.startswith(prefix)]

    # ---- serving ----

    def route(self, request: Request) -> Reply:
        raise NotImplementedError

    def _serve(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
        if self.fault == "500":
            return Reply(500, {"error": "injected fault"})
        if self.fault == "timeout":
            self._release.wait(60)
            return Reply(504, {"error": "held"})
        with self._lock:
            return self.route(request)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                parts = urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = Request(
                    self.command,
                    unquote(parts.path),
                    {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                reply = api._serve(request)
                payload = (
                    b""
                    if reply.body is None
                    else (reply.body.encode() if isinstance(reply.body, str) else json.dumps(reply.body).encode())
                )
                try:
                    self.send_response(reply.status)
                    if payload:
                        self.send_header("Content-Type", reply.content_type)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (a timeout fault)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any  # noqa: N815 - stdlib names

            def log_message(self, *args: object) -> None:
                pass

        return Handler
