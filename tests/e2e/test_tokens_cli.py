"""`memsvc tokens` through the real binary, and what separate `memsvc serve` processes on
the same database (and the workers of one) make of it: the first credential turns
authentication on, a new token works at once, a revocation (from the CLI or over gRPC by
another process) holds from the next request, everywhere, although each process keeps the
credentials it verified in memory."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from support.serve_process import ServeProcess
from support.serve_workers import channel_per_process

from memsvc.v1 import credentials_pb2, credentials_pb2_grpc, memory_pb2, memory_pb2_grpc

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent


def tokens(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "memsvc"), "tokens", *args, "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(data)},
    )


def created(data: Path, *args: str) -> dict:
    result = tokens(data, "create", *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def code_on(channel: grpc.Channel, token: str | None, api_key_id: str = "A") -> grpc.StatusCode:
    """How a ListMemories with `token` (None: no header) ends through `channel`."""
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    try:
        memory_pb2_grpc.MemoryServiceStub(channel).ListMemories(
            memory_pb2.ListMemoriesRequest(api_key_id=api_key_id), metadata=metadata, timeout=10
        )
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


class Server:
    """`memsvc serve --no-gateway` on a free port; its log drained so it never blocks."""

    def __init__(self, data: Path):
        self.proc = subprocess.Popen(
            [
                str(BIN / "memsvc"),
                "serve",
                "--no-gateway",
                "--grpc-port",
                "0",
                "--metrics-port",
                "-1",
                "--mcp-port",
                "-1",
                "--data-dir",
                str(data),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(data)},
        )
        started = None
        deadline = time.monotonic() + 60
        while started is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            if '"server.started"' in line:
                started = json.loads(line)
        assert started, "server did not start"
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        self.started = started
        self.channel = grpc.insecure_channel(f"127.0.0.1:{started['grpc_port']}")

    def code(self, token: str | None, api_key_id: str = "A") -> grpc.StatusCode:
        return code_on(self.channel, token, api_key_id)

    def stop(self) -> None:
        self.channel.close()
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture
def two_servers(tmp_path):
    data = tmp_path / "data"
    servers = [Server(data), Server(data)]
    yield data, servers
    for server in servers:
        server.stop()


def test_create_list_revoke_through_the_binary(tmp_path):
    data = tmp_path / "data"
    made = created(data, "agent-a", "--permissions", "read:memory,write:memory", "--tenants", "A,B")
    assert made["id"] == "agent-a" and made["tenants"] == ["A", "B"] and made["characters"] is False
    assert made["token"].startswith("msk_") and len(made["token"].split("_", 2)[2]) >= 43
    human = tokens(data, "create", "ops", "--permissions", "admin")
    assert human.returncode == 0 and "token (shown once, store it now): msk_" in human.stdout
    listing = tokens(data, "list")
    assert listing.returncode == 0
    assert "agent-a" in listing.stdout and "read:memory,write:memory" in listing.stdout and "msk_" not in listing.stdout
    rows = json.loads(tokens(data, "list", "--json").stdout)
    assert [(r["id"], r["tenants"], r["revoked_at"]) for r in rows] == [
        ("agent-a", ["A", "B"], None),
        ("ops", ["*"], None),
    ]
    secret = made["token"].split("_", 2)[2].encode()
    assert not any(secret in p.read_bytes() for p in data.iterdir() if p.name.startswith("memsvc.db")), (
        "the secret must never be stored, only its hash"
    )
    revoked = tokens(data, "revoke", "agent-a")
    assert revoked.returncode == 0 and revoked.stdout.startswith("revoked agent-a at ")
    assert json.loads(tokens(data, "list", "--json").stdout)[0]["revoked_at"]


@pytest.mark.parametrize(
    "args, code, message",
    [
        (("create", "x y", "--permissions", "root", "--tenants", "A"), 2, "id: must be"),
        (("create", "z", "--permissions", "read:memory"), 2, "tenants: name at least one apiKeyId"),
        (("create", "z", "--permissions", "read:memory", "--tenants", "*,A"), 2, "already means every apiKeyId"),
        (("revoke", "nobody"), 1, "credential 'nobody' not found"),
    ],
)
def test_bad_requests_are_clear_errors_that_change_nothing(tmp_path, args, code, message):
    data = tmp_path / "data"
    result = tokens(data, *args)
    assert result.returncode == code and message in result.stderr and "Traceback" not in result.stderr
    assert json.loads(tokens(data, "list", "--json").stdout) == []


def test_a_duplicate_id_is_refused(tmp_path):
    data = tmp_path / "data"
    created(data, "dup", "--permissions", "read:memory", "--tenants", "A")
    again = tokens(data, "create", "dup", "--permissions", "admin")
    assert again.returncode == 1 and "already exists" in again.stderr
    assert [r["permissions"] for r in json.loads(tokens(data, "list", "--json").stdout)] == [["read:memory"]]


def test_a_server_started_with_only_stored_credentials_says_it_requires_tokens(tmp_path):
    data = tmp_path / "data"
    open_server = Server(data)
    try:
        assert open_server.started["auth"] == "none (loopback only)"
    finally:
        open_server.stop()
    created(data, "agent", "--permissions", "read:memory", "--tenants", "A")
    secured = Server(data)
    try:
        assert secured.started["auth"] == "bearer"
        assert secured.code(None) == grpc.StatusCode.UNAUTHENTICATED
    finally:
        secured.stop()


def test_every_process_sees_the_first_credential_and_each_revocation_at_its_next_request(two_servers):
    data, (one, two) = two_servers
    assert one.code(None) == two.code(None) == grpc.StatusCode.OK  # no credential yet: open (loopback)
    agent = created(data, "agent", "--permissions", "read:memory", "--tenants", "A")["token"]
    assert one.code(None) == two.code(None) == grpc.StatusCode.UNAUTHENTICATED
    assert one.code(agent) == two.code(agent) == grpc.StatusCode.OK
    assert one.code(agent, "B") == two.code(agent, "B") == grpc.StatusCode.PERMISSION_DENIED
    assert tokens(data, "revoke", "agent").returncode == 0
    assert one.code(agent) == two.code(agent) == grpc.StatusCode.UNAUTHENTICATED


def test_a_revocation_over_grpc_in_one_process_holds_in_the_other(two_servers):
    data, (one, two) = two_servers
    admin = created(data, "admin", "--permissions", "admin")["token"]
    agent = created(data, "agent", "--permissions", "read:memory", "--tenants", "A")["token"]
    assert two.code(agent) == grpc.StatusCode.OK
    stub = credentials_pb2_grpc.CredentialServiceStub(one.channel)
    stub.RevokeCredential(
        credentials_pb2.RevokeCredentialRequest(id="agent"),
        metadata=(("authorization", f"Bearer {admin}"),),
        timeout=10,
    )
    assert two.code(agent) == grpc.StatusCode.UNAUTHENTICATED
    assert two.code(admin) == grpc.StatusCode.OK


@pytest.fixture
def two_workers(tmp_path):
    """(data dir, a channel to each worker) of one `memsvc serve --processes 2`."""
    data = tmp_path / "data"
    process = ServeProcess(data, 0, 0, extra_args=("--processes", "2", "--no-gateway", "--mcp-port", "-1"))
    opened: list[grpc.Channel] = []
    try:
        port = process.wait_for("server.started")["grpc_port"]
        yield data, list(channel_per_process(process, port, 2, opened).values())
    finally:
        for channel in opened:
            channel.close()
        process.stop()


def test_every_worker_takes_a_new_token_at_once_and_refuses_it_from_the_request_after_its_revocation(two_workers):
    data, workers = two_workers
    ok, refused = [grpc.StatusCode.OK] * 2, [grpc.StatusCode.UNAUTHENTICATED] * 2
    assert [code_on(w, None) for w in workers] == ok  # no credential yet: open (loopback)
    agent = created(data, "agent", "--permissions", "read:memory", "--tenants", "A")["token"]
    assert [code_on(w, None) for w in workers] == refused
    for _ in range(3):  # the first verifies from the store, the others from each worker's cache
        assert [code_on(w, agent) for w in workers] == ok
    assert tokens(data, "revoke", "agent").returncode == 0
    assert [code_on(w, agent) for w in workers] == refused

    admin = created(data, "admin", "--permissions", "admin")["token"]
    second = created(data, "agent-2", "--permissions", "read:memory", "--tenants", "A")["token"]
    assert [code_on(w, second) for w in workers] == ok
    credentials_pb2_grpc.CredentialServiceStub(workers[0]).RevokeCredential(
        credentials_pb2.RevokeCredentialRequest(id="agent-2"),
        metadata=(("authorization", f"Bearer {admin}"),),
        timeout=10,
    )
    assert code_on(workers[1], second) == grpc.StatusCode.UNAUTHENTICATED
    assert [code_on(w, admin) for w in workers] == ok
