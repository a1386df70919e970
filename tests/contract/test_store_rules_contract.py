"""The rules the two stores once kept differently, now one rule each, run on SQLite and on a
real PostgreSQL (issue 26): a test here fails as soon as either store diverges.

- NUL: text holding a NUL character (\\x00) is refused on both with the ValidationError the
  API answers INVALID_ARGUMENT, naming the field, and nothing is stored or changed
  (PostgreSQL's text and jsonb cannot hold one; SQLite could, and no longer does).
- Nested writes: a write() inside a write() of the same thread joins it as a savepoint on
  both: same connection, its failure undoes only its own statements, and what it wrote is
  committed with (and only with) the outer transaction.
- The scope rule is written once (memsvc.storage.dialect.scope_clause); both syntaxes give
  the same answer for the same scope.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import grpc
import pytest

from memsvc.api.errors import status_for
from memsvc.kernel.errors import ConflictError, ValidationError
from memsvc.kernel.models import MemoryFilter, MemoryPatch, NewMemory, SearchScope, UpsertResult, utcnow
from memsvc.storage.database import Database
from memsvc.storage.dialect import POSTGRES_SQL, SQLITE_SQL, scope_clause
from memsvc.storage.sqlite_backend import SqliteMemoryBackend


def _sqlite(request: pytest.FixtureRequest) -> tuple[Any, Any, Callable[[], Any]]:
    db = request.getfixturevalue("sqlite_database")
    return db, SqliteMemoryBackend(db), lambda: Database(db.path)


def _postgres(request: pytest.FixtureRequest) -> tuple[Any, Any, Callable[[], Any]]:
    from memsvc.storage.postgres.memory_backend import PgMemoryBackend

    db = request.getfixturevalue("pg_database")
    return db, PgMemoryBackend(db), lambda: type(db)(db.url)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest):
    """(database, its memory backend, a second handle on the same store)."""
    db, backend, reopen = (_sqlite if request.param == "sqlite" else _postgres)(request)
    backend.initialize()
    other = reopen()
    yield db, backend, other
    other.close()


def _new(content: str, **kw: Any) -> NewMemory:
    return NewMemory(api_key_id=kw.pop("owner", "alice"), content=content, **kw)


def _contents(backend) -> list[str]:
    return sorted(m.content for m in backend.list(MemoryFilter(), 100, 0).data)


def _refused(call: Callable[[], object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        call()
    assert status_for(caught.value).code == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in caught.value.violations] == [field]
    assert "NUL" in str(caught.value.violations[0].description)


# ---- NUL ------------------------------------------------------------------------------------

NUL_DRAFTS = {
    "content": _new("nul \x00 inside"),
    "key": _new("fine", key="k\x00"),
    "session_id": _new("fine", session_id="s\x00"),
    "api_key_id": _new("fine", owner="al\x00ice"),
    "metadata": _new("fine", metadata={"note": {"deep": ["nul \x00 inside"]}}),
}


@pytest.mark.parametrize("field", sorted(NUL_DRAFTS))
def test_a_nul_character_in_a_draft_is_refused_and_stores_nothing(store, field):
    _, backend, _ = store
    draft = NUL_DRAFTS[field]
    _refused(lambda: backend.create(draft), field)
    _refused(lambda: backend.create_many([_new("not stored either"), draft]), field)
    outcomes = backend.create_each([_new("stored"), draft, _new("stored too")])
    assert isinstance(outcomes[0], UpsertResult) and isinstance(outcomes[2], UpsertResult)
    assert isinstance(outcomes[1], ValidationError)
    assert status_for(outcomes[1]).code == grpc.StatusCode.INVALID_ARGUMENT
    assert _contents(backend) == ["stored", "stored too"]


def test_a_nul_character_in_a_summary_stores_nothing_and_deletes_nothing(store):
    _, backend, _ = store
    kept = backend.create(_new("an original")).id
    _refused(lambda: backend.replace_with_summary([kept], _new("sum\x00mary")), "content")
    assert _contents(backend) == ["an original"]


@pytest.mark.parametrize(
    "patch,field",
    [
        (MemoryPatch(content="nul \x00"), "content"),
        (MemoryPatch(key="k\x00"), "key"),
        (MemoryPatch(metadata={"a\x00": 1}), "metadata"),
    ],
    ids=["content", "key", "metadata"],
)
def test_a_nul_character_in_an_update_is_refused_and_changes_nothing(store, patch, field):
    _, backend, _ = store
    created = backend.create(_new("as it was", key="k1", metadata={"a": 1}))
    _refused(lambda: backend.update(created.id, patch), field)
    after = backend.get(created.id)
    assert (after.content, after.key, after.metadata) == ("as it was", "k1", {"a": 1})


def test_a_nul_character_in_a_rewrite_or_a_filter_is_refused_and_changes_nothing(store):
    _, backend, _ = store
    created = backend.create(_new("as it was"))
    _refused(lambda: backend.rewrite_contents({created.id: "new \x00"}), "content")
    assert backend.get(created.id).content == "as it was"
    _refused(lambda: backend.list(MemoryFilter(q="as\x00"), 10, 0), "q")
    _refused(lambda: backend.clear(MemoryFilter(q="as\x00")), "q")
    assert _contents(backend) == ["as it was"]


# ---- nested writes --------------------------------------------------------------------------


def _insert(conn, db, key: str) -> None:
    sql = "INSERT INTO settings (key, value) VALUES (?, '1')"
    conn.execute(sql if isinstance(db, Database) else sql.replace("?", "%s"), (key,))


def _keys(db) -> set[str]:
    with db.read() as conn:
        return {r[0] for r in conn.execute("SELECT key FROM settings").fetchall()}


def test_a_write_nested_in_a_write_joins_it_and_commits_with_it(store):
    db, _, other = store
    with db.write() as conn:
        _insert(conn, db, "outer")
        with db.write() as inner:
            assert inner is conn
            _insert(inner, db, "inner")
        assert _keys(other) == set()  # nothing is committed before the outer block ends
    assert _keys(other) == {"outer", "inner"}


def test_a_failed_nested_write_is_undone_alone_and_the_outer_goes_on(store):
    db, _, other = store
    with db.write() as conn:
        _insert(conn, db, "outer")
        with pytest.raises(ValueError):
            with db.write() as inner:
                _insert(inner, db, "undone")
                raise ValueError("undo the inner part only")
        with db.write() as inner:
            _insert(inner, db, "kept")
    assert _keys(other) == {"outer", "kept"}


def test_a_failed_outer_write_undoes_what_a_nested_one_wrote(store):
    db, _, other = store
    with pytest.raises(ValueError):
        with db.write() as conn:
            with db.write() as inner:
                _insert(inner, db, "nested")
            _insert(conn, db, "outer")
            raise ValueError("undo everything")
    assert _keys(other) == set()


def test_a_backend_write_nested_in_a_write_joins_it(store):
    db, backend, _ = store
    with pytest.raises(ValueError):
        with db.write():
            backend.create(_new("inside an outer write"))
            raise ValueError("the outer write fails")
    assert _contents(backend) == []
    with db.write():
        backend.create(_new("inside an outer write"))
    assert _contents(backend) == ["inside an outer write"]


# ---- one rule, both syntaxes -------------------------------------------------------------------


def test_a_duplicate_key_update_is_the_same_conflict_on_both(store):
    _, backend, _ = store
    backend.create(_new("one", key="taken"))
    other = backend.create(_new("two", key="free"))
    with pytest.raises(ConflictError) as caught:
        backend.update(other.id, MemoryPatch(key="taken", content="changed"))
    assert caught.value.reason == "DUPLICATE_KEY" and caught.value.metadata == {"key": "taken"}
    assert backend.get(other.id).content == "two"


def test_the_scope_rule_is_one_clause_in_two_syntaxes():
    scope = SearchScope(
        api_key_id="alice", now=utcnow(), created_after=utcnow() - timedelta(days=3), session_only=True, session_id=None
    )
    (lite, lite_params), (pg, pg_params) = scope_clause(SQLITE_SQL, scope), scope_clause(POSTGRES_SQL, scope)
    assert lite.count("?") == pg.count("%s") == len(lite_params) == len(pg_params) == 4
    assert lite_params[1:3] == pg_params[1:3] == ["alice", None]
    assert "%s" not in lite and "?" not in pg
