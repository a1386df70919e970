"""PgMemoryBackend on a real PostgreSQL: what only this store has to prove beyond the shared
memory store contract. The keyword query is built from words, never parsed from the user's
text (tsquery's operators are only text); two replicas upserting one key leave one row;
frequencies are the owner's; a value PostgreSQL cannot store is bad input; a server that
goes away is UNAVAILABLE and the same backend works again once it is back; and a write by
another replica (another PgDatabase) moves this one's change counter."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import grpc
import pytest
from support.postgres import PostgresServer, running_postgres

from memsvc.api.errors import status_for
from memsvc.kernel.errors import UnavailableError, ValidationError
from memsvc.kernel.models import MemoryFilter, NewMemory, SearchScope, UpsertResult, utcnow
from memsvc.storage.postgres.database import PgDatabase
from memsvc.storage.postgres.memory_backend import PgMemoryBackend


@pytest.fixture
def open_backend(postgres_db_url: str) -> Iterator[Callable[..., PgMemoryBackend]]:
    """`open_backend(**options)`: a backend over its own PgDatabase on the test's database,
    one per replica the test stands for (all shut down afterwards)."""
    opened: list[PgMemoryBackend] = []

    def open_(**options) -> PgMemoryBackend:
        backend = PgMemoryBackend(PgDatabase(postgres_db_url, **options))
        backend.initialize()
        opened.append(backend)
        return backend

    yield open_
    for backend in opened:
        backend.shutdown()


@pytest.fixture
def backend(open_backend) -> PgMemoryBackend:
    return open_backend()


def _new(content: str, owner: str = "alice", **kw) -> NewMemory:
    return NewMemory(api_key_id=owner, content=content, **kw)


def _scope(owner: str | None = "alice") -> SearchScope:
    return SearchScope(api_key_id=owner, now=utcnow())


def _found(backend: PgMemoryBackend, query: str, owner: str | None = "alice") -> set[str]:
    return {h.memory.content for h in backend.search_keyword(_scope(owner), query, 10)}


# ---- the keyword query -------------------------------------------------------------------


@pytest.fixture
def words(backend: PgMemoryBackend) -> PgMemoryBackend:
    for content in ("the lantern glows", "a zebra runs", "the catalog of parts", "I write C++ at work"):
        backend.create(_new(content))
    return backend


@pytest.mark.parametrize("owner", ["alice", None], ids=["owner", "global"])
@pytest.mark.parametrize(
    ("query", "want"),
    [
        ("!lantern", {"the lantern glows"}),  # not a negation
        ("lantern & zebra", {"the lantern glows", "a zebra runs"}),  # not an AND: one word is enough
        ("lantern | zebra", {"the lantern glows", "a zebra runs"}),
        ("lantern <-> zebra", {"the lantern glows", "a zebra runs"}),  # not a phrase
        ("catal:*", set()),  # not a prefix search
        ("catalog:*", {"the catalog of parts"}),
        ("(lantern", {"the lantern glows"}),
        ("lantern)", {"the lantern glows"}),
        ("'lantern'", {"the lantern glows"}),
        ("lantern's", {"the lantern glows"}),
        ('"lantern', {"the lantern glows"}),
        ("lantern:A", {"the lantern glows"}),  # not a weight
        ("C++ work", {"I write C++ at work"}),
        ("\\lantern", {"the lantern glows"}),
    ],
)
def test_tsquery_operators_in_the_text_are_only_text(words, owner, query, want):
    assert _found(words, query, owner) == want


@pytest.mark.parametrize(
    "query",
    [
        "C++",
        '"',
        "'",
        ":*",
        "&",
        "|",
        "!",
        "(",
        ")",
        "<->",
        "!!",
        "&|!(",
        "''''",
        "'; DROP TABLE memories; --",
        "over under",
        "a:* & !b",
    ],
)
def test_a_query_of_operators_alone_finds_nothing_and_fails_nothing(words, query):
    for owner in ("alice", None):
        assert words.search_keyword(_scope(owner), query, 10) == []
    assert words.list(MemoryFilter(), 10, 0).total == 4


# ---- ranking -----------------------------------------------------------------------------


def test_an_owners_search_weighs_words_by_that_owners_memories(backend):
    """zanzibar is rare among alice's memories and common among everyone's: her search
    puts it first, a search across owners puts the rarer sunny first."""
    for i in range(6):
        backend.create(_new(f"sunny weather on day {i}"))
    backend.create(_new("a trip to zanzibar"))
    backend.create_many([_new(f"zanzibar note {i}", owner="bob") for i in range(40)])
    mine = backend.search_keyword(_scope("alice"), "sunny zanzibar", 10)
    assert mine[0].memory.content == "a trip to zanzibar"
    everyone = backend.search_keyword(_scope(None), "sunny zanzibar", 50)
    assert everyone[0].memory.content.startswith("sunny")
    assert [h.score for h in everyone] == sorted((h.score for h in everyone), reverse=True)


# ---- values PostgreSQL cannot hold ---------------------------------------------------------


@pytest.mark.parametrize(
    "draft",
    [_new("nul \x00 inside"), _new("fine", key="k\x00"), _new("fine", metadata={"note": "nul \x00 inside"})],
    ids=["content", "key", "metadata"],
)
def test_a_nul_character_is_bad_input_and_stores_nothing(backend, draft):
    with pytest.raises(ValidationError) as caught:
        backend.create(draft)
    assert status_for(caught.value).code == grpc.StatusCode.INVALID_ARGUMENT
    outcomes = backend.create_each([_new("stored"), draft])
    assert isinstance(outcomes[0], UpsertResult) and isinstance(outcomes[1], ValidationError)
    assert [m.content for m in backend.list(MemoryFilter(), 10, 0).data] == ["stored"]


# ---- replicas ------------------------------------------------------------------------------


def test_two_replicas_upserting_one_key_at_once_leave_one_row(open_backend):
    replicas = [open_backend(), open_backend()]
    rounds = 40
    barrier = threading.Barrier(len(replicas))
    results: list[list[UpsertResult]] = [[] for _ in replicas]
    failures: list[BaseException] = []

    def upsert(i: int) -> None:
        try:
            barrier.wait()
            for n in range(rounds):
                results[i].append(replicas[i].create(_new(f"replica {i} round {n}", key="city", metadata={f"r{i}": n})))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=upsert, args=(i,)) for i in range(len(replicas))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures and not any(t.is_alive() for t in threads)
    every = [r for rs in results for r in rs]
    assert len({r.id for r in every}) == 1 and sum(r.created for r in every) == 1
    page = replicas[0].list(MemoryFilter(api_key_id="alice"), 10, 0)
    assert page.total == 1
    assert page.data[0].metadata == {"r0": rounds - 1, "r1": rounds - 1}  # every merge landed


def test_a_create_through_another_replica_moves_the_change_counter(open_backend):
    mine, theirs = open_backend(), open_backend()
    before = mine.db.data_version()
    created = theirs.create(_new("written elsewhere"))
    assert mine.db.data_version() != before
    assert mine.get(created.id).content == "written elsewhere"
    moved = mine.db.data_version()
    theirs.create(_new("written elsewhere", key="k"))
    theirs.touch([created.id])
    assert mine.db.data_version() != moved


# ---- the server going away -----------------------------------------------------------------


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    """A server of this module's own: stopping it must not fail other tests' databases."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def own_backend(own_server: PostgresServer) -> Iterator[PgMemoryBackend]:
    name = f"test_{uuid.uuid4().hex[:12]}"
    backend = PgMemoryBackend(PgDatabase(own_server.create_database(name), min_size=2, timeout_s=2))
    backend.initialize()
    yield backend
    backend.shutdown()
    if own_server.proc.poll() is not None:
        own_server.start()
    own_server.drop_database(name)


def _every_call(backend: PgMemoryBackend, memory_id: str) -> dict[str, Callable[[], object]]:
    return {
        "create": lambda: backend.create(_new("while down")),
        "get": lambda: backend.get(memory_id),
        "list": lambda: backend.list(MemoryFilter(), 10, 0),
        "search_keyword": lambda: backend.search_keyword(_scope(), "lantern", 10),
        "touch": lambda: backend.touch([memory_id]),
    }


def _once_back(call: Callable[[], UpsertResult], within_s: float = 60.0) -> UpsertResult:
    """`call()` repeated while it is UNAVAILABLE: the pool reconnects on its own, after a
    back-off that grows with how long the server was away (bounded by PgDatabase)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return call()
        except UnavailableError:
            if time.monotonic() > deadline:
                raise


def test_a_server_that_goes_away_mid_write_is_unavailable_and_the_backend_recovers(own_server, own_backend):
    first = own_backend.create(_new("the lantern before"))
    assert own_backend.search_keyword(_scope(), "lantern", 10)

    def stop_the_server(conn, rows) -> None:
        own_server.stop()  # the transaction is open; its commit can no longer happen

    with pytest.raises(UnavailableError):
        own_backend.create_many([_new("the lantern lost")], stop_the_server)
    for name, call in _every_call(own_backend, first.id).items():
        with pytest.raises(UnavailableError) as caught:
            call()
        assert status_for(caught.value).code == grpc.StatusCode.UNAVAILABLE, name
    assert own_backend.health()["ok"] is False and own_backend.keyword_probe()[0] is False
    own_server.start()
    after = _once_back(lambda: own_backend.create(_new("the lantern after")))  # no restart of memsvc
    assert {h.memory.id for h in own_backend.search_keyword(_scope(), "lantern", 10)} == {first.id, after.id}
    assert own_backend.health()["ok"] is True


def test_after_a_restart_the_first_calls_succeed(own_server, own_backend):
    kept = own_backend.create(_new("the lantern"))
    own_server.restart()  # every pooled connection is now dead
    assert own_backend.get(kept.id).content == "the lantern"
    assert own_backend.search_keyword(_scope(), "lantern", 10)[0].memory.id == kept.id
    assert own_backend.create(_new("another")).created
