"""`memsvc serve | migrate | tokens` with --database-url, as an operator runs them: two
server processes serving from a real PostgreSQL, the parent's started line naming the store
(its password masked), the commands' output, and the refusals at start (a URL that is not
PostgreSQL's, a PostgreSQL that cannot be reached, stored Qdrant local mode)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import grpc
import psycopg
import pytest
from conftest import free_port
from support.serve_process import ServeProcess

from memsvc.storage.postgres.migrations import latest_version
from memsvc.v1 import memory_pb2 as pb
from memsvc.v1 import memory_pb2_grpc

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent
PASSWORD = "pw-Kx42-never-logged"


def with_password(url: str) -> str:
    """The test server trusts loopback: the password is accepted, unused, and must be shown nowhere."""
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{PASSWORD}@", 1)


def memsvc(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "memsvc"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(data), "MEMORY_AUTO_STATIC": "false"},
    )


def test_two_processes_serve_from_postgresql_and_the_started_line_masks_the_password(tmp_path, postgres_db_url):
    process = ServeProcess(
        tmp_path / "data",
        0,
        0,
        extra_args=(
            "--processes",
            "2",
            "--no-gateway",
            "--mcp-port",
            "-1",
            "--database-url",
            with_password(postgres_db_url),
        ),
    )
    try:
        started = process.wait_for("server.started")
        assert started["store"] == "postgresql" and started["processes"] == 2
        assert started["database"].startswith("postgresql://postgres:***@127.0.0.1:")
        assert started["pgvector"][0].isdigit(), started  # pgvector's version, read from the server
        with grpc.insecure_channel(f"127.0.0.1:{started['grpc_port']}") as channel:
            stub = memory_pb2_grpc.MemoryServiceStub(channel)
            made = stub.CreateMemory(
                pb.CreateMemoryRequest(api_key_id="pg-serve", content="served by a worker"), timeout=30
            )
            assert stub.GetMemory(pb.GetMemoryRequest(id=made.id), timeout=30).content == "served by a worker"
        with psycopg.connect(postgres_db_url) as conn:
            assert conn.execute("SELECT content FROM memories WHERE id = %s", (made.id,)).fetchall() == [
                ("served by a worker",)
            ]
        assert not (tmp_path / "data" / "memsvc.db").exists()
    finally:
        process.stop()
    assert process.lines and not [line for line in process.lines if PASSWORD in line]


@pytest.mark.parametrize(
    "url, shown",
    [
        (f"mysql://root:{PASSWORD}@127.0.0.1/memsvc", "scheme 'mysql'"),
        (f"{PASSWORD}@127.0.0.1/memsvc", "no scheme"),
        (f"postgresql://postgres:{PASSWORD}@127.0.0.1:notaport/memsvc", "not a valid URL"),
    ],
)
def test_a_url_that_is_not_postgresqls_is_refused_at_start_without_showing_it(tmp_path, url, shown):
    result = memsvc(
        tmp_path,
        "serve",
        "--data-dir",
        str(tmp_path / "data"),
        "--no-gateway",
        "--mcp-port",
        "-1",
        "--grpc-port",
        "0",
        "--database-url",
        url,
    )
    assert result.returncode == 2, result.stderr
    assert shown in result.stderr and PASSWORD not in result.stderr + result.stdout
    assert not (tmp_path / "data" / "memsvc.db").exists()


def test_an_unreachable_postgresql_is_a_clear_error_without_the_password(tmp_path):
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{free_port()}/memsvc"
    result = memsvc(tmp_path, "migrate", "--data-dir", str(tmp_path / "data"), "--database-url", url)
    assert result.returncode == 1, result.stderr
    assert "the database is unavailable" in result.stderr and "Traceback" not in result.stderr
    assert PASSWORD not in result.stderr + result.stdout


def test_migrate_and_tokens_work_against_postgresql(tmp_path, postgres_db_url):
    url = with_password(postgres_db_url)
    migrated = memsvc(tmp_path, "migrate", "--data-dir", str(tmp_path / "data"), "--database-url", url)
    assert migrated.returncode == 0, migrated.stderr
    assert "postgresql://postgres:***@" in migrated.stdout and f"schema version {latest_version()}" in migrated.stdout
    assert PASSWORD not in migrated.stdout + migrated.stderr

    made = memsvc(tmp_path, "tokens", "create", "ops", "--permissions", "admin", "--json", "--database-url", url)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["id"] == "ops"
    listed = memsvc(tmp_path, "tokens", "list", "--json", "--database-url", url)
    assert [row["id"] for row in json.loads(listed.stdout)] == ["ops"]
    with psycopg.connect(postgres_db_url) as conn:
        assert conn.execute("SELECT id FROM credentials").fetchall() == [("ops",)]
    assert not (tmp_path / "data" / "memsvc.db").exists()


def test_stored_qdrant_local_mode_refuses_to_serve_from_postgresql(tmp_path, postgres_db_url):
    url = with_password(postgres_db_url)
    assert memsvc(tmp_path, "migrate", "--database-url", url).returncode == 0
    with psycopg.connect(postgres_db_url) as conn:
        conn.execute(
            "INSERT INTO settings (key, value, updated_at) VALUES ('qdrant.enabled', 'true', now()), "
            "('qdrant.localPath', '\"qdrant\"', now())"
        )
    for processes in ("1", "2"):
        result = memsvc(
            tmp_path,
            "serve",
            "--data-dir",
            str(tmp_path / "data"),
            "--no-gateway",
            "--mcp-port",
            "-1",
            "--grpc-port",
            "0",
            "--processes",
            processes,
            "--database-url",
            url,
        )
        assert result.returncode == 2, result.stderr
        assert "server or cluster" in result.stderr and "local mode" in result.stderr
