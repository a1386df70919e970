"""The server comes up on fresh and migrated databases and refuses one from the future."""

from __future__ import annotations

import subprocess
import sys

import apsw
import pytest
from conftest import make_config, start_server

from memsvc.app import App
from memsvc.kernel.errors import StorageVersionError
from memsvc.storage.migrations import latest_version
from memsvc.v1 import memory_pb2 as pb


def test_fresh_then_already_migrated_database_both_come_up(tmp_path):
    config = make_config(tmp_path)
    first = start_server(config)
    try:
        created = first.stubs().memory.CreateMemory(pb.CreateMemoryRequest(api_key_id="k", content="survives restarts"))
    finally:
        first.stop()
    second = start_server(config)
    try:
        assert second.stubs().memory.GetMemory(pb.GetMemoryRequest(id=created.id)).content == "survives restarts"
    finally:
        second.stop()


def _stamp_future(db_path) -> None:
    conn = apsw.Connection(str(db_path))
    conn.execute("INSERT INTO schema_migrations(version, name, applied_at) VALUES (999, 'future', '2099-01-01')")
    conn.close()


def test_a_database_from_a_newer_version_is_refused(tmp_path):
    config = make_config(tmp_path)
    App.open(config).close()
    _stamp_future(config.db_path)
    with pytest.raises(StorageVersionError, match=f"999.*{latest_version()}"):
        App.open(config)


def test_cli_migrate_and_refusal(tmp_path):
    data = tmp_path / "data"
    run = lambda: subprocess.run(
        [sys.executable, "-m", "memsvc", "migrate", "--data-dir", str(data)], capture_output=True, text=True, timeout=60
    )
    first = run()
    assert first.returncode == 0 and f"schema version {latest_version()}" in first.stdout and "applied" in first.stdout
    again = run()
    assert again.returncode == 0 and "up to date" in again.stdout
    _stamp_future(data / "memsvc.db")
    refused = run()
    assert refused.returncode == 2 and "999" in refused.stderr and "newer" in refused.stderr
