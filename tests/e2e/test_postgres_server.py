"""The PostgreSQL the shared-store backend stands on, checked for real: the server the tests
start (tests/support/postgres.py) on loopback, pgvector's HNSW cosine index with a per-owner
filter, English full-text search and its ranking, LISTEN/NOTIFY between connections, and how
a restart and a stopped server look to a client."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from support.postgres import PostgresServer, running_postgres
from support.processes import alive, descendants

from memsvc.storage.postgres.local_server import START_ATTEMPTS, LocalPostgresError


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of the test's own, for tests that stop or restart it."""
    with running_postgres() as server:
        yield server


def _connect(url: str) -> psycopg.Connection:
    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    return conn


def _cosine_order(vectors: np.ndarray, ids: list[int], query: np.ndarray, k: int) -> list[int]:
    """The ids of the k rows nearest `query` by cosine distance, computed here."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    distance = 1.0 - unit @ (query / np.linalg.norm(query))
    return [ids[i] for i in np.argsort(distance, kind="stable")[:k]]


def _load_vectors(conn: psycopg.Connection, rows: list[tuple[int, str, np.ndarray]]) -> None:
    conn.execute("CREATE TABLE items (id int PRIMARY KEY, owner text NOT NULL, embedding vector(3) NOT NULL)")
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO items VALUES (%s, %s, %s)", rows)
    conn.execute("CREATE INDEX items_embedding ON items USING hnsw (embedding vector_cosine_ops)")


def _nearest(conn: psycopg.Connection, owner: str, query: np.ndarray, k: int) -> tuple[list[int], str]:
    """The owner's k nearest ids through the HNSW index, and the plan that produced them."""
    sql = "SELECT id FROM items WHERE owner = %s ORDER BY embedding <=> %s LIMIT %s"
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")  # the index is what is under test
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + sql, (owner, query, k)))
        ids = [row[0] for row in conn.execute(sql, (owner, query, k))]
    return ids, plan


def test_pgvector_extension_is_created_with_iterative_index_scans(postgres_db_url: str) -> None:
    with _connect(postgres_db_url) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        assert tuple(int(part) for part in version.split(".")[:2]) >= (0, 8)
        assert conn.execute("SELECT '[1,2,3]'::vector(3) <=> '[2,4,6]'::vector(3)").fetchone()[0] == pytest.approx(0.0)
        with pytest.raises(psycopg.errors.DataException, match="expected 3 dimensions"):
            conn.execute("SELECT '[1,2]'::vector(3)")


def test_hnsw_cosine_index_returns_each_owners_nearest_rows_in_exact_order(postgres_db_url: str) -> None:
    rng = np.random.default_rng(7)
    owners = ["ana", "ben", "cy"]
    rows = [(i, owners[i % 3], rng.normal(size=3).astype(np.float32)) for i in range(240)]
    query = np.array([0.3, -0.5, 0.8], dtype=np.float32)
    with _connect(postgres_db_url) as conn:
        _load_vectors(conn, rows)
        conn.execute("SET hnsw.ef_search = 240")  # every row a candidate: the answer is exact
        conn.execute("SET hnsw.iterative_scan = strict_order")
        for owner in owners:
            mine = [(i, vec) for i, who, vec in rows if who == owner]
            expected = _cosine_order(np.stack([vec for _, vec in mine]), [i for i, _ in mine], query, 5)
            ids, plan = _nearest(conn, owner, query, 5)
            assert "Index Scan using items_embedding" in plan
            assert ids == expected


def test_a_rare_owners_rows_are_found_inside_the_index_scan(postgres_db_url: str) -> None:
    """2,000 rows near the query belong to one owner and 5 far ones to another: a filter
    applied after the index's top candidates would find none of the 5; the iterative scan
    goes on inside the index until the owner's rows are found."""
    rng = np.random.default_rng(11)
    crowd = [(i, "crowd", (np.array([1.0, 0, 0]) + 0.2 * rng.normal(size=3)).astype(np.float32)) for i in range(2000)]
    rare = [
        (2000 + i, "rare", (np.array([-1.0, 0, 0]) + 0.2 * rng.normal(size=3)).astype(np.float32)) for i in range(5)
    ]
    query = np.array([1.0, 0.1, 0.0], dtype=np.float32)
    with _connect(postgres_db_url) as conn:
        _load_vectors(conn, crowd + rare)
        conn.execute("SET hnsw.iterative_scan = off")
        assert _nearest(conn, "rare", query, 5)[0] == []  # the data really defeats a post-filter
        conn.execute("SET hnsw.iterative_scan = strict_order")
        ids, plan = _nearest(conn, "rare", query, 5)
        assert "Index Scan using items_embedding" in plan
        assert ids == _cosine_order(np.stack([vec for _, _, vec in rare]), [i for i, _, _ in rare], query, 5)


DOCS = {
    1: "The cats are running in the garden",
    2: "A dog sleeps all day in the garden",
    3: "Running cats chase running mice",
    4: "Notes about the weather",
}


def _search(conn: psycopg.Connection, text: str) -> list[int]:
    return [
        row[0]
        for row in conn.execute(
            "SELECT id FROM notes, websearch_to_tsquery('english', %s) q WHERE tsv @@ q"
            " ORDER BY ts_rank_cd(tsv, q) DESC, id",
            (text,),
        )
    ]


def test_english_full_text_search_stems_matches_and_ranks(postgres_db_url: str) -> None:
    with _connect(postgres_db_url) as conn:
        conn.execute(
            "CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL,"
            " tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED)"
        )
        conn.execute("CREATE INDEX notes_tsv ON notes USING gin (tsv)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO notes VALUES (%s, %s)", list(DOCS.items()))
        # Stemmed both ways ("cats" ~ "cat", "running" ~ "runs"); the denser match ranks first.
        assert _search(conn, "running cat") == [3, 1]
        assert _search(conn, "runs") == [3, 1]
        assert _search(conn, "cat -garden") == [3]  # websearch syntax: exclusion
        assert _search(conn, '"cats chase"') == [3]  # websearch syntax: phrase
        assert _search(conn, "dog or mice") == [2, 3]
        assert _search(conn, "the") == []  # stop words only: no query, no match
        rank = conn.execute(
            "SELECT ts_rank_cd(to_tsvector('english', %s), websearch_to_tsquery('english', 'cat run'))", (DOCS[3],)
        ).fetchone()[0]
        assert rank > 0


def test_listen_notify_delivers_between_two_connections(postgres_url: str) -> None:
    with (
        psycopg.connect(postgres_url, autocommit=True) as listener,
        psycopg.connect(postgres_url, autocommit=True) as sender,
    ):
        listener.execute("LISTEN memsvc_changes")
        sender.execute("SELECT pg_notify('memsvc_changes', 'owner-7')")
        received = list(listener.notifies(timeout=30, stop_after=1))
        sender_pid = sender.info.backend_pid
    assert [(n.channel, n.payload, n.pid) for n in received] == [("memsvc_changes", "owner-7", sender_pid)]


def test_restart_keeps_the_data_and_the_address(own_server: PostgresServer) -> None:
    url, before = own_server.url, own_server.pid
    old = psycopg.connect(url, autocommit=True)
    old.execute("CREATE TABLE kept (v text)")
    old.execute("INSERT INTO kept VALUES ('before the restart')")
    own_server.restart()
    assert (own_server.url, own_server.pid != before) == (url, True)
    with pytest.raises(psycopg.OperationalError):
        old.execute("SELECT 1")  # connections from before the restart are gone
    old.close()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT v FROM kept").fetchall() == [("before the restart",)]


def test_connecting_to_a_stopped_server_is_refused_at_once(own_server: PostgresServer) -> None:
    own_server.stop()
    # Refused, not timed out: nothing listens on the port, so the attempt fails at once.
    with pytest.raises(psycopg.OperationalError, match="Connection refused"):
        psycopg.connect(own_server.url, connect_timeout=30)


def test_server_listens_on_loopback_tcp_only(postgres_url: str) -> None:
    assert postgres_url.startswith("postgresql://postgres@127.0.0.1:")
    with psycopg.connect(postgres_url) as conn:
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN ('listen_addresses', 'unix_socket_directories')"
            ).fetchall()
        )
    assert settings == {"listen_addresses": "127.0.0.1", "unix_socket_directories": ""}


def test_server_is_stopped_and_removed_when_the_block_raises() -> None:
    seen: dict[str, object] = {}
    with pytest.raises(RuntimeError, match="the test failed"):
        with running_postgres() as server:
            seen.update(pid=server.pid, below=descendants(server.pid), root=server.root)
            raise RuntimeError("the test failed")
    assert seen["below"]  # the postmaster had its worker processes
    assert [pid for pid in [seen["pid"], *seen["below"]] if alive(pid)] == []
    assert not Path(seen["root"]).exists()


def test_a_port_taken_before_the_server_binds_it_is_given_up_for_a_free_one(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process can take the free port first: the new server must not mistake that
    server for itself, and starts on another port."""
    import memsvc.storage.postgres.local_server as helper

    picks = iter([postgres_server.port])
    monkeypatch.setattr(helper, "free_port", lambda free=helper.free_port: next(picks, None) or free())
    with running_postgres() as server:
        assert server.port != postgres_server.port
        with psycopg.connect(server.url) as conn:
            assert conn.execute("SHOW data_directory").fetchone()[0] == str(server.data_dir)


def _crashing_binaries(server: PostgresServer, crashes: int) -> Path:
    """A bin/ folder whose `postgres` dies of SIGSEGV on its first `crashes` runs, as the
    bundled binary has been seen to at a restart, and then runs the real one; every run
    appends a line to `runs` beside it. The server is switched to it."""
    real = server._bin
    wrapper = server.root / "crashing-bin"
    wrapper.mkdir(mode=0o777)
    wrapper.chmod(0o777)  # as root the server runs as nobody, who writes the count
    for tool in real.iterdir():
        if tool.name != "postgres":
            (wrapper / tool.name).symlink_to(tool)
    runs = wrapper / "runs"
    script = wrapper / "postgres"
    script.write_text(f"""#!/bin/sh
echo run >> {runs}
if [ "$(wc -l < {runs})" -le {crashes} ]; then kill -SEGV $$; fi
exec {real / "postgres"} "$@"
""")
    script.chmod(0o755)
    server._bin = wrapper
    return runs


def test_a_postmaster_killed_by_a_signal_while_starting_is_started_again(own_server: PostgresServer) -> None:
    own_server.stop()
    runs = _crashing_binaries(own_server, crashes=START_ATTEMPTS - 1)
    own_server.start()
    assert len(runs.read_text().splitlines()) == START_ATTEMPTS
    with psycopg.connect(own_server.url) as conn:
        assert conn.execute("SHOW data_directory").fetchone()[0] == str(own_server.data_dir)


def test_a_postmaster_that_keeps_crashing_or_exits_with_a_status_is_reported(own_server: PostgresServer) -> None:
    own_server.stop()
    runs = _crashing_binaries(own_server, crashes=START_ATTEMPTS)
    with pytest.raises(LocalPostgresError, match="exited with -11"):
        own_server.start()
    assert len(runs.read_text().splitlines()) == START_ATTEMPTS
    # A setting the server refuses is an exit with a status: reported at once, not retried.
    own_server.settings = (*own_server.settings, "no_such_setting=1")  # past its crashes: the real binary
    with pytest.raises(LocalPostgresError, match="exited with 1"):
        own_server.start()
    assert len(runs.read_text().splitlines()) == START_ATTEMPTS + 1
    assert os.path.exists(own_server.data_dir)
