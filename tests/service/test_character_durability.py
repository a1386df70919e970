"""AppendRecentMessages acceptance is durable: a SIGKILL right after the RPC returned loses
none of the accepted messages, and their order per character is kept.

The server is a real subprocess (`python -m memsvc serve --no-gateway`), as in
test_durability.py; the flush timer is long, so the messages are still only journaled when
the process is killed.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import test_durability
from test_durability import ServerProcess, Servers, wait_exit

from memsvc.v1 import memory_pb2 as pb
from memsvc.v1 import memory_pb2_grpc

CALL_TIMEOUT_S = 10.0


class SlowFlushServers(Servers):
    """Servers that never flush on their own during the test (timer and size trigger far
    away), so what survives the kill survives through the journal."""

    def start(self, data_dir: Path) -> ServerProcess:
        original = test_durability._server_env

        def env() -> dict[str, str]:
            return {**original(), "MEMSVC_RECENT_FLUSH_S": "3600", "MEMSVC_RECENT_FLUSH_MESSAGES": "1000000"}

        test_durability._server_env = env
        try:
            return super().start(data_dir)
        finally:
            test_durability._server_env = original


@pytest.fixture
def servers() -> Iterator[Servers]:
    s = SlowFlushServers()
    try:
        yield s
    finally:
        s.cleanup()


def _appender(
    port: int,
    character: str,
    acked: list[str],
    stop: threading.Event,
    kill_after: int,
    killed: threading.Event,
    server: ServerProcess,
) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = memory_pb2_grpc.MemoryServiceStub(channel)
    try:
        i = 0
        while not stop.is_set():
            text = f"{character} message {i} ✓ 日本語"
            try:
                stub.AppendRecentMessages(
                    pb.AppendRecentMessagesRequest(
                        character=character, messages=[pb.ChatItem(role="human" if i % 2 == 0 else "ai", text=text)]
                    ),
                    timeout=CALL_TIMEOUT_S,
                )
            except grpc.RpcError:
                return
            acked.append(text)
            i += 1
            if i == kill_after and not killed.is_set():
                # Right after this RPC returned: no flush can have happened.
                killed.set()
                server.proc.send_signal(signal.SIGKILL)
    finally:
        channel.close()


def test_sigkill_after_append_loses_no_accepted_message(servers: Servers, tmp_path: Path):
    data_dir = tmp_path / "data"
    server = servers.start(data_dir)
    characters = ["Alpha", "Beta", "小天", "Gamma"]
    acked: dict[str, list[str]] = {c: [] for c in characters}
    stop, killed = threading.Event(), threading.Event()
    threads = [
        threading.Thread(
            target=_appender, args=(server.port, c, acked[c], stop, 150 if c == "Alpha" else 10**9, killed, server)
        )
        for c in characters
    ]
    for t in threads:
        t.start()
    assert wait_exit(server, 60) == -signal.SIGKILL
    stop.set()
    for t in threads:
        t.join(CALL_TIMEOUT_S + 5)
    assert killed.is_set() and len(acked["Alpha"]) >= 150
    # Nothing was flushed before the kill: every message lives only in the journal.
    assert not any((data_dir / "memory" / c / "recent.json").exists() for c in characters)

    restarted = servers.start(data_dir)
    channel = restarted.channel()
    try:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        for character in characters:
            content = stub.GetRecentFile(
                pb.GetRecentFileRequest(filename=f"recent_{character}.json"), timeout=CALL_TIMEOUT_S
            ).content
            texts = [m["data"]["content"] for m in json.loads(content)]
            # Every acknowledged message, in order; at most the one in flight beyond them.
            assert texts[: len(acked[character])] == acked[character], character
            assert len(texts) - len(acked[character]) <= 1
    finally:
        channel.close()
    restarted.proc.send_signal(signal.SIGTERM)
    assert wait_exit(restarted, 20) == 0
    # The graceful stop flushed the recovered messages to the files.
    for character in characters:
        stored = json.loads((data_dir / "memory" / character / "recent.json").read_text(encoding="utf-8"))
        assert [m["data"]["content"] for m in stored][: len(acked[character])] == acked[character]
