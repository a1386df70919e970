"""What served a request is named as it is, on both stores, through the real gRPC server:
Retrieve's resolution names the store whose data answered (`sqlite` or `postgres`) and the
vector index that searched (`sqlite-vec` or `pgvector`), the engine status's built-in backend
has the store's type under the settings name `local`, and the earlier names (`sqlite`,
`sqlite-vec`) still select the built-in store and its index on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ServerHandle, make_config, start_server
from support.vectors import create, reindex, set_memory, static_model, status, warm  # noqa: F401

from memsvc.v1 import engine_pb2 as epb

NAMES = {"sqlite": ("sqlite", "sqlite-vec"), "postgres": ("postgres", "pgvector")}


@pytest.fixture(params=sorted(NAMES))
def store(request: pytest.FixtureRequest, tmp_path: Path, static_model: Path) -> Iterator[tuple[str, ServerHandle]]:
    overrides = {"static_model": str(static_model)}
    if request.param == "postgres":
        overrides |= {"database_url": request.getfixturevalue("postgres_db_url"), "database_pool_size": 4}
    handle = start_server(make_config(tmp_path, **overrides))
    yield request.param, handle
    handle.stop()


def _retrieve(handle: ServerHandle, strategy: str) -> epb.RetrieveResponse:
    return handle.stubs().engine.Retrieve(
        epb.RetrieveRequest(api_key_id="names", query="what is my cat's name", strategy=strategy), timeout=30
    )


def test_retrieve_and_engine_status_name_the_store_that_served(store: tuple[str, ServerHandle]) -> None:
    kind, handle = store
    backend, vector_store = NAMES[kind]
    stubs = handle.stubs()
    set_memory(stubs, enabled=True)
    cat = create(stubs, "names", "My cat is called Miso")
    create(stubs, "names", "I usually run in the morning")

    keyword = _retrieve(handle, "hybrid")  # no embedding source yet: keywords alone
    assert keyword.memories[0].id == cat
    assert (keyword.resolution.backend, keyword.resolution.vector_store) == (backend, "none")

    set_memory(stubs, embeddingSource="static", staticEnabled=True)
    warm(handle)
    assert reindex(stubs)[-1].state == "done"
    for strategy in ("hybrid", "semantic"):
        found = _retrieve(handle, strategy)
        assert found.memories[0].id == cat and not found.resolution.fallback_reason
        assert (found.resolution.backend, found.resolution.vector_store) == (backend, vector_store)
    st = status(stubs)
    assert st.vector_store.backend == vector_store
    assert [(b.name, b.type, b.role) for b in st.backends] == [("local", backend, "primary")]


def test_the_earlier_names_still_select_the_built_in_store_and_its_index(store: tuple[str, ServerHandle]) -> None:
    """Clients wrote `sqlite`, `sqlite-vec` before the store could be PostgreSQL: on either
    store they are accepted, select the built-in store and its own vector index, and are
    read back as `local`."""
    kind, handle = store
    backend, vector_store = NAMES[kind]
    stubs = handle.stubs()
    saved = set_memory(stubs, enabled=True, primaryBackend="sqlite", fallbackBackends=[], vectorStore="sqlite-vec")
    assert (saved.primary_backend, saved.vector_store) == ("local", "local")
    assert set_memory(stubs, vectorStore="pgvector").vector_store == "local"
    made = create(stubs, "names", "My cat is called Miso")
    set_memory(stubs, embeddingSource="static", staticEnabled=True)
    warm(handle)
    progress = reindex(stubs, target="sqlite-vec")
    assert progress[-1].state == "done"
    assert status(stubs).reindex.target == "local"
    found = _retrieve(handle, "semantic")
    assert [m.id for m in found.memories][:1] == [made]
    assert (found.resolution.backend, found.resolution.vector_store) == (backend, vector_store)
