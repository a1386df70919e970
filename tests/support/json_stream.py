"""Reading a server-streaming RPC through Envoy's gRPC-JSON transcoder as it arrives: the
stream is one JSON array that grows by one object per message (`[{...}`, `,{...}`, ... `]`),
sent in chunks as the messages come. `ArrayStream` yields each object as soon as it is whole,
so a test can act on the first events while the stream is still open."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any


class ArrayStream:
    """GET `path` on `host:port` and iterate the array's elements as they arrive."""

    def __init__(self, host: str, port: int, path: str, token: str | None = None, timeout_s: float = 60) -> None:
        self.conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.conn.request("GET", path, headers=headers)
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self._buffer = ""
        self._decoder = json.JSONDecoder()
        self._opened = False

    def __iter__(self) -> Iterator[Any]:
        while True:
            item = self._next_whole()
            if item is not None:
                yield item[0]
                continue
            chunk = self.response.read1(65536)
            if not chunk:
                return
            self._buffer += chunk.decode()

    def _next_whole(self) -> tuple[Any] | None:
        """The next complete element in the buffer (in a 1-tuple), or None until more arrives."""
        text = self._buffer.lstrip()
        if not self._opened:
            if not text:
                return None
            if text[0] != "[":
                raise ValueError(f"not a JSON array: {text[:200]!r}")
            self._opened, text = True, text[1:].lstrip()
        if text.startswith(","):
            text = text[1:].lstrip()
        if not text or text.startswith("]"):
            self._buffer = text
            return None
        try:
            value, end = self._decoder.raw_decode(text)
        except json.JSONDecodeError:
            return None  # the element is not whole yet
        self._buffer = text[end:]
        return (value,)

    def close(self) -> None:
        self.conn.close()
