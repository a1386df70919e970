"""A loopback HTTP(S) server that answers every GET and POST with 200 and a fixed JSON body
(`answer`, `{}` by default) and records what it was sent: the stand-in for an endpoint whose
answers do not matter, only whether (and how) it was called — a proxy that must not be used,
a Qdrant readiness route, a pinned address — or for one that answers something hostile.

    with Recorder() as server:        # Recorder(tls=ssl_context) for https
        server.port, server.paths, server.hosts
        server.answer = b'{"data": ...}'
"""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Recorder:
    def __init__(self, tls: ssl.SSLContext | None = None):
        self.paths: list[str] = []
        self.hosts: list[str | None] = []
        self.answer = b"{}"
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: one connection serves several requests

            def _answer(self) -> None:
                recorder.paths.append(self.path)
                recorder.hosts.append(self.headers.get("Host"))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = recorder.answer
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer  # noqa: N815 - stdlib names

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        if tls is not None:
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="http-recorder", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
