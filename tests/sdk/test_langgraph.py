"""`memsvc_client.langgraph.MemsvcStore` through a real memsvc, beside LangGraph's own
reference store: the same operations on `InMemoryStore` and on `MemsvcStore` give the same
items, namespaces and search results (LangGraph ships no store conformance suite: its
langgraph-checkpoint-conformance package covers checkpointers only, and the store tests in
langgraph-checkpoint's sdist are written against InMemoryStore; the namespace cases below are
theirs). Then what only memsvc adds: the mapping to memsvc memories, tenants and sessions,
retrieval-ranked queries, TTL, the asyncio path, a real graph using the store, and refused
calls as the SDK's typed errors."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

import pytest
from conftest import ServerHandle, Stubs, make_config, start_server
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore
from memsvc_client import AsyncMemsvc, InvalidArgument, Memsvc, PermissionDenied
from memsvc_client.langgraph import KEY_PREFIX, MemsvcStore, memory_key

from tests.sdk.servers import address
from tests.support.vectors import static_model, warm  # noqa: F401 - fixtures

pytestmark = pytest.mark.usefixtures("offline")  # nothing here may reach the network


@pytest.fixture
def store(memsvc: Memsvc) -> MemsvcStore:
    return MemsvcStore(memsvc)


def _keys(items: list[Any]) -> list[tuple[tuple[str, ...], str]]:
    return [(item.namespace, item.key) for item in items]


def _same_item(ours: Item | None, theirs: Item | None) -> None:
    """Equal but for the timestamps (each store has its own clock and rules for them)."""
    assert (ours is None) == (theirs is None), (ours, theirs)
    if ours is not None and theirs is not None:
        assert (ours.namespace, ours.key, ours.value) == (theirs.namespace, theirs.key, theirs.value)


# ---- the same behaviour as LangGraph's InMemoryStore ---------------------------------------------


def test_put_get_update_and_delete_behave_as_in_memory_store(store: MemsvcStore) -> None:
    reference = InMemoryStore()
    value = {"text": "I am vegetarian", "tags": ["diet", "food"], "n": 3, "big": 2**60, "ratio": 1.0, "none": None}
    for each in (store, reference):
        assert each.get(("users", "u1"), "diet") is None
        each.put(("users", "u1"), "diet", value)
        each.put(("users", "u1"), "name", {"text": "Ada"})
        each.put(("users", "u2"), "diet", {"text": "I eat everything"})
    for namespace, key in ((("users", "u1"), "diet"), (("users", "u1"), "name"), (("users", "u2"), "diet")):
        _same_item(store.get(namespace, key), reference.get(namespace, key))
    first = store.get(("users", "u1"), "diet")
    assert first is not None and first.value == value
    # The value comes back exactly as JSON holds it: ints stay ints, 1.0 stays a float.
    assert type(first.value["big"]) is int and type(first.value["ratio"]) is float
    assert first.created_at.tzinfo is not None and first.updated_at >= first.created_at

    time.sleep(0.01)
    for each in (store, reference):
        each.put(("users", "u1"), "diet", {"text": "I am vegan now"})  # replaced, not merged
        each.delete(("users", "u1"), "name")
        each.delete(("users", "u1"), "never-stored")  # a no-op in both
    _same_item(store.get(("users", "u1"), "diet"), reference.get(("users", "u1"), "diet"))
    updated = store.get(("users", "u1"), "diet")
    assert updated is not None and updated.value == {"text": "I am vegan now"}
    assert updated.created_at == first.created_at and updated.updated_at > first.updated_at  # updated in place
    assert store.get(("users", "u1"), "name") is None and reference.get(("users", "u1"), "name") is None
    # Keys and labels that look like each other's delimiters stay apart.
    for each in (store, reference):
        each.put(("a:b",), "c", {"v": 1})
        each.put(("a",), "b:c", {"v": 2})
        each.put(("a", 'q"uote'), 'k"ey]', {"v": 3})
    for namespace, key in ((("a:b",), "c"), (("a",), "b:c"), (("a", 'q"uote'), 'k"ey]')):
        _same_item(store.get(namespace, key), reference.get(namespace, key))


LISTED = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("users", "456", "settings"),
    ("admin", "users", "789"),
    ("users", "789", "settings"),
    ("guests", "456", "preferences"),
    ("tenant", "a_%"),
]
NAMESPACE_QUERIES: list[dict[str, Any]] = [
    {},
    {"prefix": ("a", "b")},
    {"suffix": ("f",)},
    {"prefix": ("a",), "suffix": ("f",)},
    {"prefix": ("a", "b"), "max_depth": 3},
    {"max_depth": 2},
    {"prefix": ("a", "b"), "limit": 2},
    {"prefix": ("a", "b"), "offset": 2},
    {"prefix": ("a", "*", "f")},
    {"suffix": ("*", "f")},
    {"prefix": ("nonexistent",)},
    {"prefix": ("users", "123")},
    {"prefix": ("users", "*")},
    {"suffix": ("*", "preferences")},
    {"prefix": ("*", "users"), "suffix": ("*", "settings")},
    {"prefix": ("tenant", "*"), "suffix": ("*",)},
    {"prefix": ("tenant", "a_%")},
    {"prefix": ("a", "b", "c", "d", "e")},
]


def test_list_namespaces_gives_what_in_memory_store_gives(store: MemsvcStore) -> None:
    reference = InMemoryStore()
    assert store.list_namespaces() == reference.list_namespaces() == []
    for each in (store, reference):
        for i, namespace in enumerate(LISTED):
            each.put(namespace, f"id_{i}", {"data": f"value_{i:02d}"})
        each.put(("a", "b", "c"), "second", {"data": "same namespace twice"})
    for query in NAMESPACE_QUERIES:
        assert store.list_namespaces(**query) == reference.list_namespaces(**query), query
    # Pagination over 20 sibling namespaces, as LangGraph's own test pages them.
    for each in (store, reference):
        for i in range(20):
            each.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": i})
    for offset in (0, 5, 15, 18):
        ours = store.list_namespaces(prefix=("namespace",), limit=5, offset=offset)
        assert ours == reference.list_namespaces(prefix=("namespace",), limit=5, offset=offset)
        assert ours == [("namespace", f"sub_{i:02d}") for i in range(offset, min(offset + 5, 20))]
    # A namespace is gone with its last item (InMemoryStore keeps listing the emptied one, a
    # leftover of its dict of dicts; a namespace here is only ever what its items say).
    for each in (store, reference):
        each.delete(("users", "123"), "id_6")
    assert store.list_namespaces(prefix=("users",)) == [("users", "456", "settings"), ("users", "789", "settings")]
    assert reference.list_namespaces(prefix=("users",))[0] == ("users", "123")


def test_search_without_a_query_lists_and_filters_as_in_memory_store(store: MemsvcStore) -> None:
    reference = InMemoryStore()
    for each in (store, reference):
        for namespace in (("a",), ("a", "b"), ("ab",), ("a", "c", "d")):
            for i in range(7):
                each.put(
                    namespace,
                    f"k{i}",
                    {"i": i, "even": i % 2 == 0, "color": ["red", "blue"][i % 2], "meta": {"n": i, "tag": "x"}},
                )
    filters: list[dict[str, Any] | None] = [
        None,
        {"even": True},
        {"color": "blue"},
        {"i": {"$gt": 3}},
        {"i": {"$gte": 3, "$lt": 5}},
        {"i": {"$lte": 1}},
        {"i": {"$ne": 2}, "even": True},
        {"i": {"$eq": 4}},
        {"meta": {"n": 5}},
        {"meta": {"tag": "x", "n": 6}},
        {"color": "green"},
        {"missing": None},
    ]
    for prefix in ((), ("a",), ("a", "b"), ("ab",), ("a", "c"), ("b",)):
        for flt in filters:
            ours = store.search(prefix, filter=flt, limit=100)
            theirs = reference.search(prefix, filter=flt, limit=100)
            assert sorted(_keys(ours)) == sorted(_keys(theirs)), (prefix, flt)
            assert all(item.score is None for item in ours)
    full = store.search(("a",), limit=100)
    assert {ns for ns, _ in _keys(full)} == {("a",), ("a", "b"), ("a", "c", "d")}  # not ("ab",)
    assert len(full) == 21
    assert [item.created_at for item in full] == sorted((item.created_at for item in full), reverse=True)
    paged = [key for offset in range(0, 21, 4) for key in _keys(store.search(("a",), limit=4, offset=offset))]
    assert paged == _keys(full)  # pages follow one order: newest first
    even = _keys(store.search(("a",), filter={"even": True}, limit=100))
    assert _keys(store.search(("a",), filter={"even": True}, limit=3, offset=2)) == even[2:5]
    assert store.search(("a",), limit=10, offset=100) == []
    assert len(store.search(("a",))) == 10  # LangGraph's default limit


def test_invalid_namespaces_are_refused_as_in_memory_store_and_reach_nothing(
    store: MemsvcStore, memsvc: Memsvc
) -> None:
    reference = InMemoryStore()
    calls: list[Callable[[BaseStore], Any]] = [
        lambda s: s.put((), "k", {"v": 1}),
        lambda s: s.put(("the", "thing.about"), "k", {"v": 1}),
        lambda s: s.put(("some", "fun", ""), "k", {"v": 1}),
        lambda s: s.put(("langgraph", "foo"), "k", {"v": 1}),
        lambda s: s.get(("foo.bar",), "k"),
        lambda s: s.delete(("foo\x00",), "k"),
        lambda s: s.search(("foo", "")),
        lambda s: s.list_namespaces(prefix=("a.b",)),
        lambda s: s.list_namespaces(suffix=(123,)),  # type: ignore[arg-type]
    ]
    for call in calls:
        for each in (store, reference):
            with pytest.raises(InvalidNamespaceError):
                call(each)
    # Ops given to batch() directly skip those checks; InMemoryStore takes them as they are, a
    # store that writes namespaces as text checks them (LangGraph's validate_op_namespace), so
    # ("a.b",) never lands where ("a", "b") would. The whole batch is refused before any call.
    for ops in ([PutOp(("a.b",), "k", {"v": 1})], [GetOp(("x",), "k"), PutOp(("x", ""), "k", {"v": 1})]):
        with pytest.raises(InvalidNamespaceError):
            store.batch(ops)  # type: ignore[arg-type]
    assert memsvc.memories.page().total == 0
    # "langgraph" is refused as the root label by put(), not deeper nor through batch.
    for each in (store, reference):
        each.put(("foo", "langgraph", "foo"), "bar", {"v": 1})
        each.batch([PutOp(("langgraph", "foo"), "bar", {"v": 2})])
    for namespace in (("foo", "langgraph", "foo"), ("langgraph", "foo")):
        _same_item(store.get(namespace, "bar"), reference.get(namespace, "bar"))


def test_one_batch_reads_before_it_writes_and_the_last_put_of_a_key_wins(store: MemsvcStore) -> None:
    reference = InMemoryStore()
    ops = [
        PutOp(("docs",), "a", {"text": "first"}),
        GetOp(("docs",), "a"),
        PutOp(("docs",), "b", {"text": "kept"}),
        PutOp(("docs",), "a", {"text": "second"}),
        SearchOp(("docs",)),
        ListNamespacesOp((MatchCondition("prefix", ("docs",)),)),
        PutOp(("docs",), "gone", {"text": "x"}),
        PutOp(("docs",), "gone", None),
    ]
    ours, theirs = store.batch(ops), reference.batch(ops)
    assert ours == [None, None, None, None, [], [], None, None]
    # InMemoryStore's GetOp leaves an empty ("docs",) behind for its listing to find.
    assert theirs == [None, None, None, None, [], [("docs",)], None, None]
    for key in ("a", "b", "gone"):
        _same_item(store.get(("docs",), key), reference.get(("docs",), key))
    again = [GetOp(("docs",), "a"), SearchOp(("docs",), limit=5), ListNamespacesOp(), GetOp(("docs",), "zzz")]
    ours, theirs = store.batch(again), reference.batch(again)
    _same_item(ours[0], theirs[0])  # type: ignore[arg-type]
    assert sorted(_keys(ours[1])) == sorted(_keys(theirs[1])) == [(("docs",), "a"), (("docs",), "b")]  # type: ignore[arg-type]
    assert ours[2] == theirs[2] == [("docs",)]
    assert ours[3] is theirs[3] is None


# ---- what the items are in memsvc ------------------------------------------------------------------


def test_an_item_is_one_memsvc_memory_updated_in_place_by_key(store: MemsvcStore, memsvc: Memsvc, owner: str) -> None:
    store.put(("profile",), "diet", {"text": "I am vegetarian", "since": 2019}, index=["text"])
    store.put(("profile",), "diet", {"text": "I am vegan", "since": 2023}, index=["text"])
    [memory] = list(memsvc.memories.list())
    assert memory.api_key_id == owner and memory.session_id is None
    assert memory.key == memory_key(("profile",), "diet") == 'langgraph:["profile","diet"]'
    assert memory.key.startswith(KEY_PREFIX)
    assert memory.content == "I am vegan"  # the indexed field is the text memsvc searches
    assert memory.keep and memory.type == "factual" and memory.expires_at is None
    envelope = memory.metadata["langgraph"]
    assert envelope["namespace"] == ["profile"] and envelope["key"] == "diet"
    assert json.loads(envelope["value"]) == {"text": "I am vegan", "since": 2023}
    # The whole value (default fields ["$"]) when no index is given.
    store.put(("profile",), "pet", {"name": "Rex", "kind": "dog"})
    pet = next(m for m in memsvc.memories.list() if m.key == memory_key(("profile",), "pet"))
    assert json.loads(pet.content) == {"name": "Rex", "kind": "dog"}
    # memsvc's own engine sees the items: they are this owner's memories.
    assert [hit.id for hit in memsvc.retrieve("vegan")] == [memory.id]
    body = {"messages": [{"role": "user", "content": "What should I cook, given that I am vegan?"}]}
    assert memsvc.inject(body).memory_ids == (memory.id,)
    # The owner's other memories (not written by the store) are never items.
    memsvc.memories.add("I am vegan and I love tofu")
    memsvc.memories.add('langgraph:["profile"] a memory that only looks like one', key='langgraph:["profile","x"]')
    assert _keys(store.search(("profile",), limit=50)) == [(("profile",), "pet"), (("profile",), "diet")]
    assert store.list_namespaces() == [("profile",)]
    assert [item.key for item in store.search(("profile",), query="vegan")] == ["diet"]
    assert store.get(("profile",), "x") is None


def test_store_fields_and_a_put_s_index_choose_the_searched_text(memsvc: Memsvc) -> None:
    store = MemsvcStore(memsvc, fields=["title", "tags[*]"])
    store.put(("docs",), "d1", {"title": "Gardening tips", "tags": ["tomatoes", "compost"], "body": "about cars"})
    store.put(("docs",), "d2", {"title": "Engine repair", "body": "tomatoes"}, index=["body"])
    store.put(("docs",), "d3", {"title": "Tomatoes everywhere"}, index=False)
    store.put(("docs",), "d4", {"other": "no such fields"})
    contents = {m.key: m.content for m in memsvc.memories.list()}
    assert contents[memory_key(("docs",), "d1")] == "Gardening tips\ntomatoes\ncompost"
    assert contents[memory_key(("docs",), "d2")] == "tomatoes"
    assert contents[memory_key(("docs",), "d3")] == "Tomatoes everywhere"
    assert json.loads(contents[memory_key(("docs",), "d4")]) == {"other": "no such fields"}  # the whole value
    # index=False: found by listing, never by a query.
    assert sorted(item.key for item in store.search(("docs",), query="tomatoes")) == ["d1", "d2"]
    assert "d3" in [item.key for item in store.search(("docs",), limit=10)]
    assert [item.key for item in store.search(("docs",), query="cars")] == []  # d1's body is not indexed


# ---- query search: memsvc's retrieval -------------------------------------------------------------


def test_a_query_search_ranks_by_retrieval_within_the_prefix_and_filter(store: MemsvcStore) -> None:
    store.put(("notes", "cooking"), "pie", {"text": "apple pie needs cinnamon and apples", "stars": 5})
    store.put(("notes", "cooking"), "soup", {"text": "tomato soup with basil", "stars": 3})
    store.put(("notes", "cooking"), "tart", {"text": "an apple tart", "stars": 2})
    store.put(("notes", "garden"), "tree", {"text": "the apple tree needs pruning", "stars": 4})
    for i in range(4):
        store.put(("notes", "misc"), f"other{i}", {"text": f"zzz qqq {i}"})
    results = store.search(("notes",), query="apple pie", limit=10)
    assert [item.key for item in results][0] == "pie"
    assert {item.key for item in results} == {"pie", "tart", "tree"}  # keyword retrieval: what mentions them
    scores = [item.score for item in results]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert [item.key for item in store.search(("notes", "cooking"), query="apple pie")] == ["pie", "tart"]
    assert [item.key for item in store.search(("notes",), query="apple", filter={"stars": {"$gte": 4}})] == [
        "pie",
        "tree",
    ] or [item.key for item in store.search(("notes",), query="apple", filter={"stars": {"$gte": 4}})] == [
        "tree",
        "pie",
    ]
    first_two = store.search(("notes",), query="apple", limit=2)
    assert _keys(store.search(("notes",), query="apple", limit=1, offset=1)) == _keys(first_two)[1:]
    assert store.search(("notes",), query="apple", offset=10) == []
    assert store.search(("elsewhere",), query="apple") == []


def test_with_memory_disabled_a_query_search_lists_as_a_store_without_an_index(memsvc: Memsvc) -> None:
    store = MemsvcStore(memsvc)
    store.put(("notes",), "pie", {"text": "apple pie", "stars": 5})
    store.put(("notes",), "soup", {"text": "tomato soup", "stars": 3})
    memsvc.settings.update(enabled=False)
    assert memsvc.retrieve("apple").resolution.fallback_reason == "memory is disabled"
    listed = store.search(("notes",), query="apple", filter={"stars": {"$gt": 1}})
    assert [(item.key, item.score) for item in listed] == [("soup", None), ("pie", None)]
    memsvc.settings.update(enabled=True)
    assert [item.key for item in store.search(("notes",), query="apple")] == ["pie"]


def test_a_query_search_uses_the_vector_tier_when_memsvc_has_an_embedding_source(
    boot: Callable[..., tuple[ServerHandle, Stubs]],
    static_model: Any,  # noqa: F811 - fixture
) -> None:
    handle, _ = boot(static_model=str(static_model))
    with Memsvc(address(handle), api_key_id="lg-semantic") as client:
        client.settings.update(enabled=True, embedding_source="static", static_enabled=True)
        warm(handle)
        store = MemsvcStore(client, fields=["text"], strategy="hybrid")
        store.put(("memories",), "food", {"text": "I love spaghetti carbonara and lasagna"})
        store.put(("memories",), "car", {"text": "My car needs new winter tires"})
        store.put(("memories",), "code", {"text": "I write Rust at work"})
        ranked = client.retrieve("Italian pasta dishes", strategy="hybrid")
        assert ranked.resolution.embedding_source == "static"
        results = store.search(("memories",), query="Italian pasta dishes", limit=3)
        assert results and results[0].key == "food"  # no word in common: the vectors found it
        assert results[0].score is not None and results[0].score > 0


# ---- tenants and sessions ---------------------------------------------------------------------------


def test_tenant_and_session_labels_map_namespaces_onto_memsvc_owners_and_sessions(
    connect: Callable[..., Memsvc],
) -> None:
    client = connect()  # no default owner: each namespace names its own
    client.settings.update(enabled=True)
    store = MemsvcStore(client, tenant_label=0, session_label=1)
    store.put(("lg-ada", "thread-1", "facts"), "diet", {"text": "Ada is vegetarian"})
    store.put(("lg-ada", "thread-2", "facts"), "pet", {"text": "Ada has a cat"})
    store.put(("lg-bob", "thread-1", "facts"), "diet", {"text": "Bob is vegetarian too"})
    [ada_diet, ada_pet] = sorted(client.memories.list(api_key_id="lg-ada"), key=lambda m: m.content, reverse=True)
    assert (ada_diet.api_key_id, ada_diet.session_id) == ("lg-ada", "thread-1")
    assert (ada_pet.api_key_id, ada_pet.session_id) == ("lg-ada", "thread-2")
    [bob_diet] = client.memories.list(api_key_id="lg-bob")
    assert bob_diet.key == memory_key(("lg-bob", "thread-1", "facts"), "diet")
    # Each tenant sees its own items; a session label in the prefix narrows to that session.
    assert sorted(_keys(store.search(("lg-ada",)))) == [
        (("lg-ada", "thread-1", "facts"), "diet"),
        (("lg-ada", "thread-2", "facts"), "pet"),
    ]
    assert _keys(store.search(("lg-ada", "thread-2"))) == [(("lg-ada", "thread-2", "facts"), "pet")]
    assert [i.namespace for i in store.search(("lg-ada",), query="vegetarian")] == [("lg-ada", "thread-1", "facts")]
    assert [i.namespace for i in store.search(("lg-bob", "thread-1"), query="vegetarian")] == [
        ("lg-bob", "thread-1", "facts")
    ]
    assert store.list_namespaces(prefix=("lg-ada",)) == [
        ("lg-ada", "thread-1", "facts"),
        ("lg-ada", "thread-2", "facts"),
    ]
    assert store.list_namespaces(prefix=("lg-ada", "*", "facts"), max_depth=2) == [
        ("lg-ada", "thread-1"),
        ("lg-ada", "thread-2"),
    ]
    item = store.get(("lg-bob", "thread-1", "facts"), "diet")
    assert item is not None and item.value == {"text": "Bob is vegetarian too"}
    assert store.get(("lg-ada", "thread-1", "facts"), "pet") is None
    # memsvc reads one tenant at a time: what spans tenants is refused before any call.
    for call in (
        lambda: store.search(()),
        lambda: store.list_namespaces(),
        lambda: store.list_namespaces(prefix=("*", "thread-1")),
        lambda: store.list_namespaces(suffix=("facts",)),
    ):
        with pytest.raises(InvalidNamespaceError, match="tenant_label=0"):
            call()
    with pytest.raises(ValueError, match="not both"):
        MemsvcStore(client, api_key_id="x", tenant_label=0)


# ---- TTL ---------------------------------------------------------------------------------------------


def test_ttl_minutes_become_the_memory_s_expiry_and_expired_items_are_never_returned(
    store: MemsvcStore, memsvc: Memsvc
) -> None:
    assert store.supports_ttl
    before = datetime.now(UTC)
    store.put(("cache",), "short", {"text": "gone soon"}, ttl=1.5 / 60)  # 1.5 seconds
    store.put(("cache",), "long", {"text": "here for a day"}, ttl=24 * 60)
    store.put(("cache",), "forever", {"text": "no expiry"})
    expiry = {m.key: m.expires_at for m in memsvc.memories.list()}
    short = expiry[memory_key(("cache",), "short")]
    assert short is not None and before + timedelta(seconds=1) < short < before + timedelta(seconds=5)
    long = expiry[memory_key(("cache",), "long")]
    assert long is not None and abs(long - (before + timedelta(days=1))) < timedelta(seconds=30)
    assert expiry[memory_key(("cache",), "forever")] is None
    assert store.get(("cache",), "short") is not None
    time.sleep(2.0)
    assert store.get(("cache",), "short") is None
    assert sorted(item.key for item in store.search(("cache",))) == ["forever", "long"]
    assert [item.key for item in store.search(("cache",), query="gone soon")] == []
    store.put(("expired-only",), "k", {"v": 1}, ttl=1 / 60)
    time.sleep(1.2)
    assert store.list_namespaces() == [("cache",)]
    assert memsvc.memories.page().total == 4  # expired, still stored until swept
    assert store.sweep_ttl() == 2
    assert memsvc.memories.page().total == 2
    assert store.sweep_ttl() == 0
    # A put over an expired item is a fresh item again.
    store.put(("cache",), "short", {"text": "back"}, ttl=10)
    item = store.get(("cache",), "short")
    assert item is not None and item.value == {"text": "back"}


def test_the_ttl_config_s_default_applies_to_puts_without_a_ttl(memsvc: Memsvc) -> None:
    store = MemsvcStore(memsvc, ttl_config={"default_ttl": 60.0, "refresh_on_read": True})
    store.put(("s",), "defaulted", {"v": 1})
    store.put(("s",), "explicit", {"v": 2}, ttl=None)
    expiry = {m.key: m.expires_at for m in memsvc.memories.list()}
    defaulted = expiry[memory_key(("s",), "defaulted")]
    assert defaulted is not None and timedelta(minutes=59) < defaulted - datetime.now(UTC) <= timedelta(minutes=60)
    assert expiry[memory_key(("s",), "explicit")] is None
    # A read does not move the expiry (memsvc would have to rewrite the memory for it).
    assert store.get(("s",), "defaulted", refresh_ttl=True) is not None
    assert next(m for m in memsvc.memories.list() if m.key == memory_key(("s",), "defaulted")).expires_at == defaulted


# ---- asyncio -----------------------------------------------------------------------------------------


def test_the_async_methods_run_on_the_asyncio_client(server: ServerHandle, owner: str, memsvc: Memsvc) -> None:
    async def scenario() -> None:
        async with AsyncMemsvc(address(server), api_key_id=owner) as aclient:
            store = MemsvcStore(aclient=aclient)
            reference = InMemoryStore()
            for each in (store, reference):
                await asyncio.gather(
                    each.aput(("users", "u1"), "diet", {"text": "I am vegetarian"}),
                    each.aput(("users", "u1"), "city", {"text": "I live in Porto"}, index=["text"]),
                    each.aput(("users", "u2"), "diet", {"text": "I eat fish"}),
                )
            _same_item(await store.aget(("users", "u1"), "diet"), await reference.aget(("users", "u1"), "diet"))
            assert await store.aget(("users", "u3"), "diet") is None
            assert sorted(_keys(await store.asearch(("users",)))) == sorted(_keys(await reference.asearch(("users",))))
            assert [i.key for i in await store.asearch(("users", "u1"), query="Porto")] == ["city"]
            assert await store.alist_namespaces() == await reference.alist_namespaces()
            assert await store.alist_namespaces(prefix=("users",), max_depth=1) == [("users",)]
            await store.aput(("tmp",), "t", {"v": 1}, ttl=1 / 60)
            for each in (store, reference):
                await each.adelete(("users", "u2"), "diet")
            assert await store.aget(("users", "u2"), "diet") is None
            ops = [GetOp(("users", "u1"), "city"), PutOp(("users", "u1"), "city", None), SearchOp(("users",))]
            ours, theirs = await store.abatch(ops), await reference.abatch(ops)
            _same_item(ours[0], theirs[0])  # type: ignore[arg-type]
            assert sorted(_keys(ours[2])) == sorted(_keys(theirs[2]))  # type: ignore[arg-type]
            assert await store.aget(("users", "u1"), "city") is None
            await asyncio.sleep(1.2)
            assert await store.asweep_ttl() == 1
            with pytest.raises(RuntimeError, match="synchronous client"):
                store.put(("x",), "y", {"v": 1})

    asyncio.run(scenario())
    # Without an asyncio client, the async methods run the synchronous ones in a thread.
    sync_only = MemsvcStore(memsvc)
    assert asyncio.run(sync_only.aget(("users", "u1"), "diet")) == sync_only.get(("users", "u1"), "diet")
    assert asyncio.run(sync_only.alist_namespaces()) == [("users", "u1")]


# ---- a real graph ------------------------------------------------------------------------------------


class Turn(TypedDict):
    user: str
    message: str
    recalled: list[str]


def _remember(state: Turn, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    namespace = (state["user"], "memories")
    if state["message"].startswith("remember "):
        fact = state["message"].removeprefix("remember ")
        runtime.store.put(namespace, f"fact-{len(runtime.store.search(namespace, limit=100))}", {"text": fact})
    return {}


def _recall(state: Turn, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    hits = runtime.store.search((state["user"], "memories"), query=state["message"], limit=3)
    return {"recalled": [item.value["text"] for item in hits]}


async def _arecall(state: Turn, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    hits = await runtime.store.asearch((state["user"], "memories"), query=state["message"], limit=3)
    return {"recalled": [item.value["text"] for item in hits]}


def _graph(recall: Any) -> StateGraph[Turn, None, Turn, Turn]:
    builder = StateGraph(Turn)
    builder.add_node("remember", _remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder


def test_a_langgraph_graph_keeps_its_long_term_memory_in_memsvc(
    server: ServerHandle, connect: Callable[..., Memsvc]
) -> None:
    client = connect()
    client.settings.update(enabled=True)
    graph = _graph(_recall).compile(store=MemsvcStore(client, tenant_label=0, fields=["text"]))
    for message in ("remember I am allergic to peanuts", "remember my sister lives in Lisbon"):
        graph.invoke({"user": "lg-graph-ada", "message": message, "recalled": []})
    graph.invoke({"user": "lg-graph-bob", "message": "remember I love peanuts", "recalled": []})
    out = graph.invoke({"user": "lg-graph-ada", "message": "any peanuts in this?", "recalled": []})
    assert out["recalled"] == ["I am allergic to peanuts"]
    # The same memories, as memsvc serves them to any other client of the tenant.
    assert [m.content for m in client.memories.list(api_key_id="lg-graph-ada")] == [
        "my sister lives in Lisbon",
        "I am allergic to peanuts",
    ]

    async def run_async() -> dict[str, Any]:
        async with AsyncMemsvc(address(server)) as aclient:
            store = MemsvcStore(client, aclient=aclient, tenant_label=0, fields=["text"])
            agraph = _graph(_arecall).compile(store=store)
            return await agraph.ainvoke({"user": "lg-graph-ada", "message": "where is my sister?", "recalled": []})

    assert asyncio.run(run_async())["recalled"] == ["my sister lives in Lisbon"]


# ---- refused calls -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    handle = start_server(make_config(tmp_path_factory.mktemp("lg-auth"), api_tokens=("lg-admin",)))
    with Memsvc(address(handle), token="lg-admin") as admin:
        admin.settings.update(enabled=True)
    yield handle
    handle.stop()


def test_refused_calls_surface_as_the_sdk_s_typed_errors(secured: ServerHandle, memsvc: Memsvc) -> None:
    token = secured.app.credentials.create("lg-tenant-a", ["read:memory", "write:memory"], ["lg-a"], False).token
    with Memsvc(address(secured), token=token) as client:
        store = MemsvcStore(client, tenant_label=0)
        store.put(("lg-a", "notes"), "k", {"text": "mine"})
        for call in (
            lambda: store.put(("lg-b", "notes"), "k", {"text": "theirs"}),
            lambda: store.get(("lg-b", "notes"), "k"),
            lambda: store.search(("lg-b",), query="theirs"),
            lambda: store.list_namespaces(prefix=("lg-b",)),
            lambda: store.delete(("lg-b", "notes"), "k"),
        ):
            with pytest.raises(PermissionDenied) as info:
                call()
            assert info.value.message == "credential 'lg-tenant-a' may not address apiKeyId 'lg-b'"
        # A tenant the token may not address refuses the batch's writes as a whole.
        with pytest.raises(PermissionDenied):
            store.batch([PutOp(("lg-a", "notes"), "k2", {"v": 2}), PutOp(("lg-b", "notes"), "k", {"v": 3})])
        assert [i.key for i in store.search(("lg-a",))] == ["k"]

    store = MemsvcStore(memsvc)
    with pytest.raises(InvalidArgument) as too_big:
        store.put(("docs",), "big", {"text": "x" * (17 * 1024)})
    assert [v.field for v in too_big.value.field_violations] == ["metadata"]
    assert "16384 bytes" in too_big.value.message
    with pytest.raises(InvalidArgument) as too_long:
        store.put(("docs",), "k" * 600, {"text": "long key"})
    assert [v.field for v in too_long.value.field_violations] == ["key"]
    assert memsvc.memories.page().total == 0 and store.get(("docs",), "k" * 600) is None
    # An item over a limit fails alone: the batch's other writes are stored.
    with pytest.raises(InvalidArgument):
        store.batch([PutOp(("docs",), "ok", {"v": 1}), PutOp(("docs",), "big", {"text": "x" * (17 * 1024)})])
    assert [item.key for item in store.search(("docs",))] == ["ok"]
    with pytest.raises(TypeError, match="JSON"):
        store.put(("docs",), "odd", {"when": datetime.now(UTC)})
    with Memsvc(memsvc.target) as no_owner:
        with pytest.raises(InvalidArgument) as info:
            MemsvcStore(no_owner).put(("docs",), "k", {"v": 1})
        assert "apiKeyId" in info.value.message
