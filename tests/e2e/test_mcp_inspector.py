"""memsvc's MCP server driven by a client nobody here wrote: the MCP Inspector's CLI
(@modelcontextprotocol/inspector, pinned with Node 22 in tests/mcp_inspector, installed by
`npm ci` there; ./scripts/test.sh does), over stdio (`memsvc mcp`) and over streamable HTTP
through the real Envoy (/mcp on the REST port), at the current revision and through the
initialize handshake. Every request carries W3C trace context in its `_meta` (the
Inspector's --metadata), which must reach memsvc as gRPC metadata (seen on a recording hop
in front of the real server)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import make_config, start_server
from support.grpc_recorder import RecordingHop

from tests.e2e.test_mcp_http import TOKEN, Stack
from tests.support.mcp_session import BIN, TOOL_ORDER, TRACEPARENT, TRACESTATE, check_trace_forwarded, memory_uri
from tests.support.vectors import set_memory

pytestmark = pytest.mark.e2e
INSPECTOR = Path(__file__).resolve().parents[1] / "mcp_inspector"
NODE_BIN = INSPECTOR / "node_modules" / ".bin"


def inspector(target: tuple[list[str], list[str]], *method: str, era: str, home: Path) -> dict:
    """The result of one Inspector CLI invocation (`--format json`) on `target` (its options,
    and what follows them), with the trace context in every request's `_meta`."""
    assert (NODE_BIN / "mcp-inspector").exists(), "run `npm ci` in tests/mcp_inspector (./scripts/test.sh does)"
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ['PATH']}", "HOME": str(home)}
    trace = ["--metadata", f"traceparent={TRACEPARENT}", f"tracestate={TRACESTATE}"]
    command = [str(NODE_BIN / "node"), str(NODE_BIN / "mcp-inspector"), "--cli", "--format", "json"]
    done = subprocess.run(
        [*command, "--protocol-era", era, *target[0], *method, *trace, *target[1]],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"{method} ({era}) failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)["result"]


@pytest.fixture(params=["stdio", "http"])
def target(request, tmp_path):
    """(the Inspector's arguments that reach memsvc's MCP server, the recording hop its RPCs
    pass): options, and the command line of a stdio server after `--`."""
    if request.param == "http":
        stack = Stack(tmp_path, hop=True)
        set_memory(stack.server.stubs(TOKEN), enabled=True)
        options = ["--server-url", stack.url, "--transport", "http", "--header", f"Authorization: Bearer {TOKEN}"]
        yield (options, []), stack.hop
        stack.stop()
        return
    server = start_server(make_config(tmp_path, api_tokens=(TOKEN,)))
    set_memory(server.stubs(TOKEN), enabled=True)
    hop = RecordingHop(f"127.0.0.1:{server.port}")
    memsvc_mcp = [str(BIN / "memsvc"), "mcp", "--grpc-port", str(hop.port)]
    yield (["-e", f"MEMSVC_TOKEN={TOKEN}"], ["--", *memsvc_mcp]), hop
    hop.stop()
    server.stop()


def check_everything(target: tuple[list[str], list[str]], era: str, home: Path) -> None:
    """tools/list (in order), tools/call, resources/list, resources/read, prompts/list and
    prompts/get, each as the Inspector reports it."""
    tenant = f"tenant-inspector-{era}"

    def run(*method: str) -> dict:
        return inspector(target, *method, era=era, home=home)

    assert [tool["name"] for tool in run("--method", "tools/list")["tools"]] == TOOL_ORDER
    called = run(
        "--method", "tools/call", "--tool-name", "memory_add", "--tool-arg", f"apiKeyId={tenant}",
        "content=The user's heron feeder hangs by the pond", "type=factual",
    )  # fmt: skip
    assert called.get("isError") is not True, called
    memory_id = json.loads(called["content"][0]["text"])["id"]
    listed = run("--method", "resources/list")["resources"]
    assert memory_uri(memory_id) in [resource["uri"] for resource in listed]
    (content,) = run("--method", "resources/read", "--uri", memory_uri(memory_id))["contents"]
    assert content["mimeType"] == "application/json" and json.loads(content["text"])["apiKeyId"] == tenant
    (prompt,) = run("--method", "prompts/list")["prompts"]
    assert prompt["name"] == "recall" and [a["name"] for a in prompt["arguments"]] == ["query", "apiKeyId"]
    got = run("--method", "prompts/get", "--prompt-name", "recall", "--prompt-args", "query=heron feeder",
              f"apiKeyId={tenant}")  # fmt: skip
    context, query = (message["content"]["text"] for message in got["messages"])
    assert f'<memory id="{memory_id}"' in context and query == "heron feeder"
    assert {message["role"] for message in got["messages"]} == {"user"}
    # A 2026-07-28 result carries the server's identity in `_meta`; a handshake-era one does not.
    assert ("io.modelcontextprotocol/serverInfo" in got.get("_meta", {})) == (era == "modern"), got.get("_meta")


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_the_inspector_cli_uses_tools_resources_and_the_prompt(target, era, tmp_path):
    arguments, hop = target
    hop.clear()
    check_everything(arguments, era, tmp_path)
    check_trace_forwarded(hop.calls)
