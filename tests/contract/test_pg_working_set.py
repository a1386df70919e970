"""PostgreSQL replicas rank an owner's keyword search from their working sets
(memsvc.working_set fed by memsvc.storage.postgres.working_set_port), kept current through
the per-owner change log of migration 0002: a write, update or delete through one replica
(one PgMemoryBackend over its own pool) is in the next search through another; concurrent
writers of one owner never leave a set that disagrees with the snapshot it answers in; a
TRUNCATE, which logs no rows, makes every set rebuild."""

from __future__ import annotations

import random
import threading

import pytest

# One PgMemoryBackend over a pool of its own per call: one more memsvc replica.
from contract.test_pg_memory_backend import open_backend as replica  # noqa: F401 - a fixture
from memsvc.kernel.models import MemoryPatch, NewMemory, SearchScope, utcnow
from memsvc.storage.postgres.database import PgDatabase
from memsvc.storage.postgres.memory_backend import PgMemoryBackend
from memsvc.storage.postgres.rows import SELECT, row_to_memory

OWNER = "alice"
# Words the porter stemmer leaves alone and keeps apart, so "holds the word" is a plain test.
WORDS = ["lantern", "zebra", "copper", "meadow", "violin", "harbor"]


def _scope(owner: str = OWNER) -> SearchScope:
    return SearchScope(api_key_id=owner, now=utcnow())


def _from_set(backend: PgMemoryBackend, word: str, owner: str = OWNER) -> list[str] | None:
    """The contents the working set answers with (None: it left the search to the store)."""
    with backend.db.read() as conn:
        hits = backend.working_sets.search_keyword(conn, _scope(owner), word, 1000)
    return None if hits is None else sorted(h.memory.content for h in hits)


def test_a_write_update_and_delete_through_one_replica_is_in_the_next_search_of_another(replica):
    writer, reader = replica(), replica()
    first = writer.create(NewMemory(api_key_id=OWNER, content="the lantern glows")).memory
    assert _from_set(reader, "lantern") == ["the lantern glows"]
    assert reader.working_sets.stats.builds == 1

    second = writer.create(NewMemory(api_key_id=OWNER, content="a zebra runs")).memory
    assert _from_set(reader, "zebra") == ["a zebra runs"]
    writer.update(first.id, MemoryPatch(content="copper wire"))
    assert _from_set(reader, "lantern") == []
    assert _from_set(reader, "copper") == ["copper wire"]
    writer.delete(second.id)
    assert _from_set(reader, "zebra") == []
    writer.create_many(
        [NewMemory(api_key_id=OWNER, content=f"meadow {i}") for i in range(3)]
        + [NewMemory(api_key_id="bob", content="meadow of bob")]
    )
    assert _from_set(reader, "meadow") == ["meadow 0", "meadow 1", "meadow 2"]
    assert _from_set(reader, "meadow", owner="bob") == ["meadow of bob"]
    # Followed through the log, never rebuilt; and the backend's own search is the set's.
    assert reader.working_sets.stats.builds == 2 and reader.working_sets.stats.updates >= 4
    before = reader.working_sets.stats.updates
    writer.touch([first.id])  # the access counters are a change too: a hit carries them
    hits = reader.search_keyword(_scope(), "copper", 10)
    assert [(h.memory.content, h.memory.access_count) for h in hits] == [("copper wire", 1)]
    assert reader.working_sets.stats.updates == before + 1 and reader.working_sets.stats.store_searches == 0


def _expected(rows: list, word: str) -> list[str]:
    return sorted(m.content for m in rows if word in m.content.split())


def test_concurrent_writers_of_one_owner_never_leave_a_stale_set(replica):
    """Two replicas write one owner (creates, batches, updates, deletes) while a third
    searches: every answer the third's set gives equals the owner's rows in the snapshot it
    answered in, and after the writers stop its answers equal the store's rows."""
    writers, reader = [replica(), replica()], replica()
    rounds = 60
    failures: list[BaseException] = []
    done = threading.Event()

    def write(i: int) -> None:
        rnd = random.Random(i)
        backend, mine = writers[i], []
        try:
            for n in range(rounds):
                text = lambda: f"w{i} r{n} " + " ".join(rnd.sample(WORDS, 2))  # noqa: E731
                action = rnd.random()
                if action < 0.15 and mine:
                    backend.delete(mine.pop(rnd.randrange(len(mine))))
                elif action < 0.45 and mine:
                    backend.update(rnd.choice(mine), MemoryPatch(content=text()))
                elif action < 0.6:
                    mine += [
                        r.id
                        for r in backend.create_many([NewMemory(api_key_id=OWNER, content=text()) for _ in range(3)])
                    ]
                else:
                    mine.append(backend.create(NewMemory(api_key_id=OWNER, content=text())).id)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)

    answered = 0

    def search() -> None:
        nonlocal answered
        rnd = random.Random(99)
        try:
            while not done.is_set():
                word = rnd.choice(WORDS)
                with reader.db.read() as conn:
                    hits = reader.working_sets.search_keyword(conn, _scope(), word, 1000)
                    rows = [
                        row_to_memory(r) for r in conn.execute(SELECT + " WHERE api_key_id = %s", (OWNER,)).fetchall()
                    ]
                if hits is not None:
                    answered += 1
                    assert sorted(h.memory.content for h in hits) == _expected(rows, word)
        except BaseException as exc:
            failures.append(exc)

    searcher = threading.Thread(target=search)
    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writers))]
    searcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    done.set()
    searcher.join(timeout=60)
    assert not failures, failures
    assert not any(t.is_alive() for t in [*threads, searcher])
    assert answered > 0 and reader.working_sets.stats.updates > 0

    rows = [row_to_memory(r) for r in _owner_rows(reader)]
    cold = replica()  # a replica that builds the set from one snapshot now: the same scores
    for word in WORDS:
        assert _from_set(reader, word) == _expected(rows, word)
        warm = {h.memory.id: h.score for h in reader.search_keyword(_scope(), word, 1000)}
        built = {h.memory.id: h.score for h in cold.search_keyword(_scope(), word, 1000)}
        assert warm.keys() == built.keys()
        assert all(warm[k] == pytest.approx(built[k], rel=1e-9) for k in warm)


def _owner_rows(backend: PgMemoryBackend) -> list:
    with backend.db.read() as conn:
        return conn.execute(SELECT + " WHERE api_key_id = %s", (OWNER,)).fetchall()


def test_a_truncate_makes_every_set_rebuild(replica):
    writer, reader = replica(), replica()
    writer.create_many([NewMemory(api_key_id=OWNER, content=f"lantern {i}") for i in range(3)])
    assert _from_set(reader, "lantern") == ["lantern 0", "lantern 1", "lantern 2"]
    with writer.db.write() as conn:
        conn.execute("TRUNCATE memories")
    writer.create(NewMemory(api_key_id=OWNER, content="lantern after"))
    assert _from_set(reader, "lantern") == ["lantern after"]
    assert reader.working_sets.stats.builds == 2


def test_a_budget_of_zero_searches_by_full_text(replica, postgres_db_url):
    backend = PgMemoryBackend(PgDatabase(postgres_db_url), working_set_bytes=0)
    try:
        backend.initialize()
        backend.create(NewMemory(api_key_id=OWNER, content="the lantern glows"))
        assert [h.memory.content for h in backend.search_keyword(_scope(), "lantern", 10)] == ["the lantern glows"]
        assert backend.working_sets.status()["owners"] == 0
    finally:
        backend.shutdown()
