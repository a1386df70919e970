"""The operator's tools against a live `memsvc serve`: the CLI as a gRPC client (progress
output, tables, clear failures) and the Prometheus endpoint."""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import free_port

from memsvc.v1 import engine_pb2, memory_pb2

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent
TOKEN = "ops-token"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """`memsvc serve` (gRPC only) with a token and metrics on a free port, and no embedding
    source until a test enables one (auto would otherwise use the static model set-up built)."""
    data = tmp_path_factory.mktemp("ops")
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(data), "MEMSVC_API_TOKENS": TOKEN, "MEMORY_AUTO_STATIC": "false"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memsvc",
            "serve",
            "--no-gateway",
            "--grpc-port",
            "0",
            "--metrics-port",
            "0",
            "--mcp-port",
            "-1",
            "--data-dir",
            str(data),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    started = None
    deadline = time.monotonic() + 60
    while started is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if '"server.started"' in line:
            started = json.loads(line)
    assert started, "server did not start"
    # Keep draining the log: a full pipe would block the server on its next log line.
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    yield {"grpc": started["grpc_port"], "metrics": started["metrics_port"], "env": env}
    proc.terminate()
    proc.wait(30)


def cli(live, *args: str, token: str | None = TOKEN, port: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**live["env"], "MEMSVC_API_TOKENS": token or ""}
    return subprocess.run(
        [sys.executable, "-m", "memsvc", *args[:1], "--grpc-port", str(port or live["grpc"]), *args[1:]],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_memories_add_list_delete_clear(live):
    added = cli(live, "memories", "add", "--api-key-id", "ops", "--content", "I prefer tea in the morning")
    assert added.returncode == 0, added.stderr
    memory_id = re.fullmatch(r"created (\S+)\n", added.stdout).group(1)
    listed = cli(live, "memories", "list", "--api-key-id", "ops")
    assert memory_id in listed.stdout and "I prefer tea" in listed.stdout and "1 of 1" in listed.stdout
    assert cli(live, "memories", "delete", memory_id).stdout == f"deleted {memory_id}\n"
    missing = cli(live, "memories", "delete", memory_id)
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr and "Traceback" not in missing.stderr
    cli(live, "memories", "add", "--api-key-id", "ops", "--content", "one more")
    assert cli(live, "memories", "clear", "--api-key-id", "ops").stdout == "deleted 1 memories\n"


def test_status_table_and_json(live):
    table = cli(live, "status")
    assert table.returncode == 0, table.stderr
    assert re.search(r"^keyword\s+backend\s+FTS5$", table.stdout, flags=re.MULTILINE)
    assert re.search(r"^embedding\s+source\s+none$", table.stdout, flags=re.MULTILINE)
    assert re.search(r"^retrieval\s+fusion\s+gated-convex$", table.stdout, flags=re.MULTILINE)
    as_json = json.loads(cli(live, "status", "--json").stdout)
    assert as_json["keyword"]["available"] is True and as_json["vectorStore"]["backend"] == "sqlite-vec"


def test_wrong_token_and_server_down_are_clear_messages(live):
    refused = cli(live, "status", token="not-the-token")
    assert refused.returncode == 4 and "token in MEMSVC_API_TOKENS was refused" in refused.stderr
    assert "Traceback" not in refused.stderr
    down = cli(live, "status", port=free_port())
    assert down.returncode == 3 and "cannot reach memsvc" in down.stderr and "Traceback" not in down.stderr


def test_reindex_without_a_source_is_refused_with_the_reason(live):
    result = cli(live, "reindex")
    assert result.returncode == 1 and "FAILED_PRECONDITION" in result.stderr and "no embedding source" in result.stderr


def _enable_transformers(live) -> None:
    import grpc
    from google.protobuf import struct_pb2

    from memsvc.v1 import settings_pb2, settings_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{live['grpc']}") as channel:
        patch = struct_pb2.Struct()
        patch.update({"enabled": True, "transformersEnabled": True})
        settings_pb2_grpc.SettingsServiceStub(channel).UpdateMemorySettings(
            settings_pb2.UpdateMemorySettingsRequest(settings=patch), metadata=(("authorization", f"Bearer {TOKEN}"),)
        )


def test_reindex_progress_plain_lines_and_live_bar(live):
    _enable_transformers(live)
    for i in range(300):
        cli_args = ("memories", "add", "--api-key-id", "reindex", "--content", f"fact number {i} about the garden")
        if i % 100 == 0:  # a few through the CLI, the rest faster through gRPC below
            assert cli(live, *cli_args).returncode == 0
    _bulk_create(live, 297)
    plain = cli(live, "reindex", "--force")
    assert plain.returncode == 0, plain.stderr
    lines = plain.stdout.splitlines()
    assert lines[0].startswith("reindex started: ") and lines[-1].startswith("reindex done: ")
    progress = [int(m.group(1)) for m in (re.match(r"\w+\s+(\d+)/\d+", line) for line in lines[1:-1]) if m]
    assert progress and progress == sorted(progress) and "\r" not in plain.stdout

    master, slave = pty.openpty()
    env = {**live["env"], "MEMSVC_API_TOKENS": TOKEN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsvc", "reindex", "--force", "--grpc-port", str(live["grpc"])],
        stdout=slave,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(slave)
    output = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    assert proc.wait(120) == 0
    os.close(master)
    text = output.decode()
    assert "\r[" in text and re.search(r"\[#+\.*\] done", text) and "reindex done: " in text


def _bulk_create(live, count: int) -> None:
    import grpc

    from memsvc.v1 import memory_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{live['grpc']}") as channel:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        for i in range(count):
            stub.CreateMemory(
                memory_pb2.CreateMemoryRequest(api_key_id="reindex", content=f"garden fact {i}"),
                metadata=(("authorization", f"Bearer {TOKEN}"),),
            )


def _scrape(live) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{live['metrics']}/metrics", timeout=10) as response:
        return response.read().decode()


def _value(text: str, pattern: str) -> float:
    match = re.search(pattern + r" ([0-9.e+]+)$", text, flags=re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_metrics_move_with_calls(live):
    import grpc

    from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc

    before = _scrape(live)
    create = r'memsvc_rpc_total\{code="OK",method="/memsvc.v1.MemoryService/CreateMemory"\}'
    missing = r'memsvc_rpc_total\{code="NOT_FOUND",method="/memsvc.v1.MemoryService/GetMemory"\}'
    metadata = (("authorization", f"Bearer {TOKEN}"),)
    with grpc.insecure_channel(f"127.0.0.1:{live['grpc']}") as channel:
        memory = memory_pb2_grpc.MemoryServiceStub(channel)
        memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(api_key_id="metrics", content="metrics are scraped"), metadata=metadata
        )
        with pytest.raises(grpc.RpcError):
            memory.GetMemory(memory_pb2.GetMemoryRequest(id="nope"), metadata=metadata)
        engine_pb2_grpc.EngineServiceStub(channel).Retrieve(
            engine_pb2.RetrieveRequest(api_key_id="metrics", query="metrics", strategy="recent"), metadata=metadata
        )
    after = _scrape(live)
    assert _value(after, create) == _value(before, create) + 1
    assert _value(after, missing) == _value(before, missing) + 1
    latency = r'memsvc_rpc_duration_seconds_count\{method="/memsvc.v1.MemoryService/CreateMemory"\}'
    assert _value(after, latency) == _value(before, latency) + 1
    retrievals = r'memsvc_retrieval_total\{strategy_used="(exact|none)"\}'
    assert re.search(retrievals, after)
    assert _value(after, r"memsvc_db_size_bytes") > 0
    assert re.search(r'memsvc_embedding_cache\{kind="misses"\}', after)


MEMSVC = BIN / "memsvc"  # the console script a user runs
SERVE_ONLY_FLAGS = (
    "--data-dir",
    "--rest-port",
    "--rest-host",
    "--envoy-admin-port",
    "--no-gateway",
    "--metrics-port",
    "--memory-dir",
    "--project-memory-dir",
    "--log-level",
)


def memsvc_bin(live, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `memsvc` binary, with the default port pointing nowhere: a command that
    lost its --server would fail with 'cannot reach' instead of finding another server."""
    env = {**live["env"], "MEMSVC_GRPC_PORT": str(free_port())}
    return subprocess.run([str(MEMSVC), *args], capture_output=True, text=True, env=env, timeout=120)


def test_client_options_work_after_the_subcommand_and_before_it(live):
    server = f"127.0.0.1:{live['grpc']}"
    added = memsvc_bin(
        live, "memories", "add", "--api-key-id", "placement", "--content", "options go anywhere", "--server", server
    )
    assert added.returncode == 0, added.stderr
    after = memsvc_bin(live, "memories", "list", "--server", server, "--api-key-id", "placement")
    before = memsvc_bin(live, "memories", "--server", server, "list", "--api-key-id", "placement")
    port_after = memsvc_bin(live, "memories", "list", "--api-key-id", "placement", "--grpc-port", str(live["grpc"]))
    for result in (after, before, port_after):
        assert result.returncode == 0, result.stderr
        assert "options go anywhere" in result.stdout and "1 of 1" in result.stdout
    assert memsvc_bin(live, "status", "--json", "--server", server).returncode == 0
    nowhere = memsvc_bin(live, "memories", "list")  # no --server: the (unused) default port
    assert nowhere.returncode == 3 and "cannot reach memsvc" in nowhere.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("status",),
        ("reindex",),
        ("memories",),
        ("memories", "list"),
        ("memories", "add"),
        ("memories", "delete"),
        ("memories", "clear"),
    ],
)
def test_client_help_lists_only_the_client_options(live, command):
    shown = memsvc_bin(live, *command, "--help")
    assert shown.returncode == 0, shown.stderr
    assert "--server HOST:PORT" in shown.stdout and "--grpc-port PORT" in shown.stdout
    assert not [flag for flag in SERVE_ONLY_FLAGS if flag in shown.stdout]


def test_every_cli_option_has_help_text():
    from memsvc.cli import build_parser

    missing, pending = [], [("memsvc", build_parser())]
    while pending:
        name, parser = pending.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending.extend((f"{name} {sub}", p) for sub, p in action.choices.items())
            elif not (action.help and action.help.strip()):
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []
