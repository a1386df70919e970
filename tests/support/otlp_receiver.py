"""An OTLP/HTTP trace receiver on loopback: a real HTTP server that decodes each POSTed
`ExportTraceServiceRequest` with the OpenTelemetry protos (opentelemetry-proto) and keeps
the spans, for the tracing tests and bench/tracing_bench.py.

`OtlpReceiver().start()` listens on a free port; `url` is the base a server is given as
OTEL_EXPORTER_OTLP_ENDPOINT (traces arrive at <url>/v1/traces), `wait_for(predicate)` polls
the spans received until the predicate holds (or the deadline passes)."""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

TRACES_PATH = "/v1/traces"


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as it arrived: ids in hex, attributes as Python values, its resource's
    service.name, the path and headers of the request that carried it."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    status_code: int
    start_ns: int
    end_ns: int
    path: str
    headers: dict[str, str] = field(repr=False)


class OtlpReceiver:
    def __init__(self, status: int = 200) -> None:
        self.status = status
        self._spans: list[ReceivedSpan] = []
        self._requests = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> int:
        with self._lock:
            return self._requests

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def clear(self) -> None:
        with self._lock:
            self._spans.clear()
            self._requests = 0

    def wait_for(self, predicate: Callable[[list[ReceivedSpan]], bool], timeout_s: float = 30.0) -> list[ReceivedSpan]:
        """The spans received once `predicate(spans)` holds; AssertionError with what did
        arrive when it does not within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            spans = self.spans()
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                shown = [(s.service, s.name, s.trace_id[:8]) for s in spans]
                raise AssertionError(f"spans received within {timeout_s:.0f} s do not match: {shown}")
            time.sleep(0.05)

    def _receive(self, path: str, headers: dict[str, str], body: bytes) -> None:
        encoding = headers.get("content-encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        received = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
            service = str(resource.get("service.name", ""))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            service=service,
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            attributes={kv.key: _value(kv.value) for kv in span.attributes},
                            status_code=span.status.code,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            path=path,
                            headers=headers,
                        )
                    )
        with self._lock:
            self._requests += 1
            self._spans.extend(received)

    def start(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _body(self) -> bytes:
                """The request body, sent with a length or chunked (Envoy's exporter)."""
                if self.headers.get("transfer-encoding", "").lower() != "chunked":
                    return self.rfile.read(int(self.headers.get("content-length") or 0))
                chunks = []
                while size := int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                return b"".join(chunks)

            def do_POST(self) -> None:
                body = self._body()
                headers = {k.lower(): v for k, v in self.headers.items()}
                if self.path == TRACES_PATH and receiver.status == 200:
                    receiver._receive(self.path, headers, body)
                payload = ExportTraceServiceResponse().SerializeToString()
                self.send_response(receiver.status)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---- reading what arrived ------------------------------------------------------------------


def named(spans: list[ReceivedSpan], name: str, service: str | None = None) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name and (service is None or s.service == service)]


def in_trace(spans: list[ReceivedSpan], trace_id: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.trace_id == trace_id]


def children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in spans if s.trace_id == parent.trace_id and s.parent_span_id == parent.span_id]


def descendants(spans: list[ReceivedSpan], root: ReceivedSpan) -> list[ReceivedSpan]:
    """Every span below `root` in its trace."""
    out: list[ReceivedSpan] = []
    frontier = [root]
    while frontier:
        below = children(spans, frontier.pop())
        out += below
        frontier += below
    return out
