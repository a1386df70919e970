"""The fact lifecycle through the real gRPC server, on SQLite and on PostgreSQL: a memory's
history with the credential behind every change (GetMemoryHistory), facts valid in time
(Retrieve and Inject with asOf), the change feed (WatchMemories) with resume tokens and
tenancy, and the expiry sweep.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import ServerHandle, make_config, start_server
from google.protobuf import json_format, struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from tests.support.vectors import set_memory, static_model, wait_for, warm  # noqa: F401 - fixture

C = grpc.StatusCode
ADMIN = "lifecycle-admin"


@pytest.fixture(params=["sqlite", "postgres"])
def start(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., ServerHandle]]:
    """Servers of the test's own on the parametrized store, with an admin token (so stored
    credentials name their authors): `start(**config overrides)`."""
    handles: list[ServerHandle] = []
    database = {} if request.param == "sqlite" else {"database_url": request.getfixturevalue("postgres_db_url")}

    def boot(**overrides: Any) -> ServerHandle:
        config = make_config(tmp_path / f"server{len(handles)}", api_tokens=(ADMIN,), **database, **overrides)
        handles.append(start_server(config))
        return handles[-1]

    yield boot
    for handle in handles:
        handle.stop()


def stubs_for(handle: ServerHandle, name: str, tenants: list[str], write: bool = True) -> Any:
    permissions = ["read:memory", "write:memory"] if write else ["read:memory"]
    return handle.stubs(handle.app.credentials.create(name, permissions, tenants, False).token)


def ts(moment: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(moment)
    return out


def history(stubs: Any, memory_id: str, **fields: Any) -> mpb.GetMemoryHistoryResponse:
    return stubs.memory.GetMemoryHistory(mpb.GetMemoryHistoryRequest(id=memory_id, **fields))


def struct_dict(value: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(value)


# ---- history -----------------------------------------------------------------------------


def test_history_names_every_change_and_the_credential_that_made_it(start):
    handle = start()
    agent_a, agent_b = stubs_for(handle, "agent-a", ["alice"]), stubs_for(handle, "agent-b", ["alice"])
    created = agent_a.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="alice", key="location:home", content="User lives in Paris")
    )
    agent_b.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="alice", key="location:home", content="User lives in Berlin")
    )
    agent_a.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=created.id, keep=False))
    found = history(agent_b, created.id)
    assert (found.id, found.api_key_id) == (created.id, "alice")
    assert [(e.event, e.author) for e in found.entries] == [
        ("created", "agent-a"),
        ("superseded", "agent-b"),
        ("updated", "agent-a"),
    ]
    assert struct_dict(found.entries[0].changes)["content"] == "User lives in Paris"
    assert struct_dict(found.entries[1].changes)["content"] == "User lives in Berlin"
    assert struct_dict(found.entries[2].changes) == {"keep": False}
    [version] = found.versions
    assert version.content == "User lives in Paris" and version.HasField("valid_to")
    assert version.valid_to.ToDatetime() <= found.entries[1].at.ToDatetime()


def test_history_pages_through_its_entries(start):
    handle = start()
    stubs = handle.stubs(ADMIN)
    created = stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", key="mood", content="calm 0"))
    for n in range(1, 5):
        stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", key="mood", content=f"calm {n}"))
    seen, token = [], ""
    while True:
        page = history(stubs, created.id, limit=2, page_token=token)
        seen += [struct_dict(e.changes)["content"] for e in page.entries]
        token = page.next_page_token
        if not token:
            break
    assert seen == [f"calm {n}" for n in range(5)]
    with pytest.raises(grpc.RpcError) as err:
        history(stubs, created.id, limit=0)
    assert err.value.code() == C.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as err:
        history(stubs, created.id, page_token="not-a-token")
    assert err.value.code() == C.INVALID_ARGUMENT


def test_another_tenants_history_is_not_found_like_a_missing_one(start):
    handle = start()
    alice, bob = stubs_for(handle, "alice-app", ["alice"]), stubs_for(handle, "bob-app", ["bob"])
    mine = alice.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", content="Alice's secret")).id
    for memory_id in (mine, "no-such-memory"):
        with pytest.raises(grpc.RpcError) as err:
            history(bob, memory_id)
        assert err.value.code() == C.NOT_FOUND
    assert [e.event for e in history(alice, mine).entries] == ["created"]


def test_a_deleted_memory_leaves_only_its_deletion_with_who_did_it(start):
    handle = start()
    alice = stubs_for(handle, "alice-app", ["alice"])
    memory_id = alice.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="alice", content="User's PIN is 4471, call me PLATYPUS")
    ).id
    alice.memory.DeleteMemory(mpb.DeleteMemoryRequest(id=memory_id))
    found = history(alice, memory_id)
    assert [(e.event, e.author, struct_dict(e.changes)) for e in found.entries] == [("deleted", "alice-app", {})]
    assert list(found.versions) == []
    with pytest.raises(grpc.RpcError) as err:
        alice.memory.GetMemory(mpb.GetMemoryRequest(id=memory_id))
    assert err.value.code() == C.NOT_FOUND


# ---- facts valid in time -----------------------------------------------------------------


def supersede(stubs: Any) -> tuple[str, datetime, datetime]:
    """Paris, then Berlin under one key; returns (id, a time in Paris's span, one after)."""
    created = stubs.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="alice", key="location:home", content="User lives in Paris")
    ).id
    stubs.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="alice", content="User has a cat named Miso", type="factual")
    )
    in_paris = datetime.now(UTC)
    time.sleep(0.02)
    stubs.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="alice", key="location:home", content="User lives in Berlin")
    )
    return created, in_paris, datetime.now(UTC)


def retrieve(stubs: Any, query: str, **fields: Any) -> epb.RetrieveResponse:
    return stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id="alice", query=query, max_tokens=2000, **fields))


@pytest.mark.parametrize("strategy", ["exact", "hybrid"])
def test_a_superseded_fact_is_answered_as_of_before_the_change_and_not_after(start, strategy, static_model):
    handle = start(static_model=str(static_model))
    stubs = handle.stubs(ADMIN)
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True)
    warm(handle)
    memory_id, in_paris, after = supersede(stubs)
    query = "where does the user live"
    then = retrieve(stubs, query, strategy=strategy, as_of=ts(in_paris), min_score=0)
    contents = [m.content for m in then.memories]
    assert "User lives in Paris" in contents and "User lives in Berlin" not in contents, contents
    paris = next(m for m in then.memories if m.id == memory_id)
    assert paris.HasField("valid_to") and paris.valid_to.ToDatetime(tzinfo=UTC) > in_paris
    now = retrieve(stubs, query, strategy=strategy, min_score=0)
    assert "User lives in Berlin" in [m.content for m in now.memories]
    assert "User lives in Paris" not in [m.content for m in now.memories]
    later = retrieve(stubs, query, strategy=strategy, as_of=ts(after), min_score=0)
    assert [m.content for m in later.memories if m.id == memory_id] == ["User lives in Berlin"]
    if strategy == "hybrid":
        assert then.resolution.strategy_used.startswith("hybrid"), then.resolution.fallback_reason
        assert paris.HasField("vec_score")  # the superseded version was embedded and scored


def test_nothing_stored_after_the_instant_is_answered(start):
    handle = start()
    stubs = handle.stubs(ADMIN)
    set_memory(stubs, enabled=True)
    before = datetime.now(UTC)
    time.sleep(0.01)
    stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", content="User started learning piano"))
    assert [m.content for m in retrieve(stubs, "piano").memories] == ["User started learning piano"]
    assert list(retrieve(stubs, "piano", as_of=ts(before)).memories) == []


def test_a_kept_past_answers_again_until_the_owner_changes_and_never_brings_back_a_deletion(start):
    """The owner's past at an instant is kept for the next question about that instant, and
    built anew once anything of the owner changed: a memory deleted since is forgotten in the
    past too, and a fact added since is still not in it."""
    handle = start()
    stubs = handle.stubs(ADMIN)
    set_memory(stubs, enabled=True)
    memory_id, in_paris, _ = supersede(stubs)

    def pasts() -> tuple[int, int]:
        status = stubs.engine.GetEngineStatus(epb.GetEngineStatusRequest()).working_sets
        return status.past_builds, status.past_hits

    def contents(query: str) -> list[str]:
        return [m.content for m in retrieve(stubs, query, as_of=ts(in_paris), min_score=0).memories]

    assert "User lives in Paris" in contents("where does the user live")
    assert "User has a cat named Miso" in contents("cat")
    assert pasts() == (1, 1)
    stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", content="User adopted a cat named Pip"))
    cats = contents("cat")
    assert "User has a cat named Miso" in cats and "User adopted a cat named Pip" not in cats
    assert pasts() == (2, 1)
    stubs.memory.DeleteMemory(mpb.DeleteMemoryRequest(id=memory_id))
    assert not {"User lives in Paris", "User lives in Berlin"} & set(contents("where does the user live"))
    assert "User has a cat named Miso" in contents("cat")
    assert pasts() == (3, 2)
    # Another instant is another past.
    retrieve(stubs, "cat", as_of=ts(datetime.now(UTC)))
    assert pasts() == (4, 2)


def test_inject_takes_as_of(start):
    handle = start()
    stubs = handle.stubs(ADMIN)
    set_memory(stubs, enabled=True)
    _, in_paris, _ = supersede(stubs)
    body = struct_pb2.Struct()
    body.update({"messages": [{"role": "user", "content": "Where does the user live? Paris or Berlin?"}]})

    def injected(**fields: Any) -> str:
        answer = stubs.engine.Inject(
            epb.InjectRequest(api_key_id="alice", provider="openai", request=body, min_score=0, **fields)
        )
        assert answer.injected, answer.skipped_reason
        return str(json_format.MessageToDict(answer.request)["messages"][0]["content"])

    assert "Paris" in injected(as_of=ts(in_paris)) and "Berlin" not in injected(as_of=ts(in_paris))
    assert "Berlin" in injected() and "Paris" not in injected()


def test_an_as_of_in_the_future_or_without_an_owner_is_refused(start):
    handle = start()
    stubs = handle.stubs(ADMIN)
    set_memory(stubs, enabled=True, scope="global")
    future = ts(datetime.now(UTC) + timedelta(days=1))
    for request in (
        epb.RetrieveRequest(api_key_id="alice", query="x", as_of=future),
        epb.RetrieveRequest(query="x", scope="global", as_of=ts(datetime.now(UTC))),
    ):
        with pytest.raises(grpc.RpcError) as err:
            stubs.engine.Retrieve(request)
        assert err.value.code() == C.INVALID_ARGUMENT and "asOf" in err.value.details()


# ---- the change feed ---------------------------------------------------------------------


class Follower:
    """A WatchMemories stream read on a thread of its own; `events` fills as they arrive.
    Returns once the stream has started (its first message, the bookmark of where it starts,
    arrived), so a write after it is a change the follower must get."""

    def __init__(self, stubs: Any, **request: Any) -> None:
        self.events: queue.Queue[mpb.MemoryEvent] = queue.Queue()
        self.error: grpc.RpcError | None = None
        self.call = stubs.memory.WatchMemories(mpb.WatchMemoriesRequest(**request))
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        self.started = self.events.get(timeout=20)
        assert self.started.kind == "bookmark", self.started

    def _read(self) -> None:
        try:
            for event in self.call:
                self.events.put(event)
        except grpc.RpcError as err:
            if err.code() != C.CANCELLED:
                self.error = err

    def changes(self, count: int, timeout_s: float = 20) -> list[mpb.MemoryEvent]:
        """The next `count` events that are changes (bookmarks skipped)."""
        out: list[mpb.MemoryEvent] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < count:
            event = self.events.get(timeout=max(deadline - time.monotonic(), 0.01))
            if event.kind != "bookmark":
                out.append(event)
        return out

    def stop(self) -> None:
        self.call.cancel()
        self._thread.join(10)


def caught_up(stubs: Any, **request: Any) -> list[mpb.MemoryEvent]:
    return list(stubs.memory.WatchMemories(mpb.WatchMemoriesRequest(stop_when_caught_up=True, **request), timeout=30))


def test_a_follower_gets_every_change_as_it_commits_and_resumes_after_its_token(start):
    handle = start(watch_poll_s=0.05)
    stubs = handle.stubs(ADMIN)
    follower = Follower(stubs, api_key_id="alice")
    first = stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", key="k", content="v1")).id
    stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", key="k", content="v2"))
    got = follower.changes(2)
    assert [(e.kind, e.change, e.memory_id) for e in got] == [
        ("created", "created", first),
        ("updated", "superseded", first),
    ]
    assert got[1].memory.content == "v2"  # the memory as stored when the event was read
    assert {e.author for e in got} == {"env:1"}  # the first MEMSVC_API_TOKENS token
    follower.stop()
    # Disconnected: changes made meanwhile come after the last token, once each.
    second = stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", content="while away")).id
    stubs.memory.DeleteMemory(mpb.DeleteMemoryRequest(id=second))
    third = stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", content="after")).id
    resumed = Follower(stubs, api_key_id="alice", resume_token=got[-1].resume_token)
    rest = resumed.changes(2)
    resumed.stop()
    assert [(e.kind, e.memory_id) for e in rest] == [("deleted", second), ("created", third)]
    assert rest[0].memory.id == ""  # gone: no memory, and nothing of what it said


def test_a_tenants_follower_never_sees_another_tenants_event(start):
    handle = start(watch_poll_s=0.05)
    admin = handle.stubs(ADMIN)
    alice = stubs_for(handle, "alice-app", ["alice"], write=False)
    follower = Follower(alice)  # no apiKeyId: every tenant the credential covers
    admin.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="bob", content="Bob's private note"))
    mine = admin.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", content="Alice's note")).id
    [event] = follower.changes(1)
    assert (event.api_key_id, event.memory_id) == ("alice", mine)
    follower.stop()
    events = caught_up(alice)
    assert {e.api_key_id for e in events if e.kind != "bookmark"} <= {"alice"}
    with pytest.raises(grpc.RpcError) as err:
        caught_up(alice, api_key_id="bob")
    assert err.value.code() == C.PERMISSION_DENIED


def test_a_caught_up_stream_ends_with_a_bookmark_to_resume_from(start):
    handle = start()
    stubs = handle.stubs(ADMIN)
    start_token = caught_up(stubs)[-1].resume_token
    made = [
        stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", content=f"note {n}")).id for n in range(3)
    ]
    events = caught_up(stubs, resume_token=start_token)
    assert [e.memory_id for e in events if e.kind != "bookmark"] == made
    assert events[-1].kind == "bookmark"
    assert [e for e in caught_up(stubs, resume_token=events[-1].resume_token) if e.kind != "bookmark"] == []
    with pytest.raises(grpc.RpcError) as err:
        caught_up(stubs, resume_token="9.9.9.9")
    assert err.value.code() == C.INVALID_ARGUMENT


def test_a_quiet_stream_gets_bookmarks(start):
    handle = start(watch_poll_s=0.05, watch_heartbeat_s=0.2)
    follower = Follower(handle.stubs(ADMIN))
    event = follower.events.get(timeout=20)
    follower.stop()
    assert event.kind == "bookmark" and event.resume_token == follower.started.resume_token


def test_expired_memories_are_removed_forgotten_and_announced(start):
    handle = start(expiry_sweep_s=0.1, watch_poll_s=0.05)
    stubs = handle.stubs(ADMIN)
    follower = Follower(stubs, api_key_id="alice")
    memory_id = stubs.memory.CreateMemory(
        mpb.CreateMemoryRequest(
            api_key_id="alice",
            content="Door code 2291 for today",
            expires_at=ts(datetime.now(UTC) + timedelta(seconds=1)),
        )
    ).id
    events = follower.changes(2, timeout_s=30)
    follower.stop()
    assert [(e.kind, e.memory_id) for e in events] == [("created", memory_id), ("expired", memory_id)]
    assert [(e.event, e.author) for e in history(stubs, memory_id).entries] == [("expired", "memsvc")]
    wait_for(lambda: handle.app.backend.get(memory_id) is None, what="the expired memory removed")


# ---- duplicates merged on write ----------------------------------------------------------


def add(stubs: Any, content: str, **fields: Any) -> mpb.CreateMemoryResponse:
    return stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", content=content, **fields))


def listed(stubs: Any) -> list[str]:
    page = stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="alice", limit=200))
    return sorted(m.content for m in page.data)


def test_two_near_identical_writes_leave_one_memory_and_name_it(start, static_model):
    handle = start(static_model=str(static_model))
    admin = handle.stubs(ADMIN)
    set_memory(admin, enabled=True, embeddingSource="static", staticEnabled=True)
    warm(handle)
    agent = stubs_for(handle, "agent-a", ["alice"])
    first = add(agent, "User prefers dark mode in every editor")
    again = add(agent, "The user prefers dark mode in every editor.")
    assert (again.id, again.created, again.merged_into) == (first.id, False, first.id)
    assert first.merged_into == ""
    assert listed(agent) == ["User prefers dark mode in every editor"]
    merge = history(agent, first.id).entries[-1]
    assert (merge.event, merge.author) == ("merged", "agent-a")
    assert struct_dict(merge.changes) == {"mergedContent": "The user prefers dark mode in every editor."}


def test_writes_that_say_something_else_are_all_stored(start, static_model):
    handle = start(static_model=str(static_model))
    stubs = handle.stubs(ADMIN)
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True)
    warm(handle)
    texts = [
        "User likes coffee",
        "User does not like coffee",
        "User likes coffee with oat milk in the morning",
        "User likes tea",
    ]
    results = [add(stubs, text) for text in texts]
    assert [r.merged_into for r in results] == ["", "", "", ""]
    assert listed(stubs) == sorted(texts)
    # Another type, a key, a conversation turn: never merged with the fact above.
    assert add(stubs, "User likes coffee", type="semantic").merged_into == ""
    assert add(stubs, "User likes coffee", key="preference:coffee").merged_into == ""
    turn = {"type": "episodic", "session_id": "s1"}
    assert add(stubs, "User: I like coffee", **turn).merged_into == ""
    assert add(stubs, "User: I like coffee", **turn).merged_into == ""


def test_identical_text_merges_without_embeddings_and_the_setting_turns_it_off(start):
    handle = start()
    stubs = handle.stubs(ADMIN)
    first = add(stubs, "User's dentist is Dr. Ortega")
    assert add(stubs, "user's dentist is dr. ortega!").merged_into == first.id
    set_memory(stubs, dedupOnWrite=False)
    assert add(stubs, "User's dentist is Dr. Ortega").merged_into == ""
    assert len(listed(stubs)) == 2


def test_a_batch_names_the_memory_each_duplicate_merged_into(start):
    handle = start()
    stubs = handle.stubs(ADMIN)
    existing = add(stubs, "User was born in Lisbon").id
    answer = stubs.memory.CreateMemories(
        mpb.CreateMemoriesRequest(
            memories=[
                mpb.CreateMemoryRequest(api_key_id="alice", content="User was born in Lisbon."),
                mpb.CreateMemoryRequest(api_key_id="alice", content="User was born in Porto"),
            ]
        )
    )
    assert [(r.success, r.merged_into) for r in answer.results] == [(True, existing), (True, "")]
    assert answer.results[0].id == existing


def create_all(stubs: Any, *items: dict[str, Any]) -> list[mpb.CreateMemoryResult]:
    request = mpb.CreateMemoriesRequest(memories=[mpb.CreateMemoryRequest(api_key_id="alice", **i) for i in items])
    return list(stubs.memory.CreateMemories(request).results)


@pytest.mark.parametrize("vectors", [True, False], ids=["vectors", "text-only"])
def test_a_fact_said_twice_in_one_batch_is_stored_once(start, static_model, vectors):
    handle = start(static_model=str(static_model))
    stubs = handle.stubs(ADMIN)
    if vectors:
        set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True)
        warm(handle)
    said = struct_pb2.Struct()
    said.update({"speaker": "Kevin"})
    results = create_all(
        stubs,
        {"content": "User's sister lives in Osaka"},
        {"content": "User likes green tea"},
        {"content": "The user's sister lives in Osaka."},
        {"content": "User's sister lives in Osaka", "type": "semantic"},  # another type
        {"content": "User's sister lives in Osaka", "metadata": said},  # carries a speaker
        {"content": "User likes green tea", "key": "drink"},  # a key decides by itself
    )
    assert all(r.success for r in results)
    first = results[0].id
    assert (results[2].id, results[2].created, results[2].merged_into) == (first, False, first)
    assert [r.merged_into for r in (results[1], results[3], results[4], results[5])] == ["", "", "", ""]
    assert len({results[i].id for i in (0, 1, 3, 4, 5)}) == 5
    assert listed(stubs).count("User's sister lives in Osaka") == 3
    assert "The user's sister lives in Osaka." not in listed(stubs)
    merge = history(stubs, first).entries[-1]
    assert (merge.event, struct_dict(merge.changes)) == (
        "merged",
        {"mergedContent": "The user's sister lives in Osaka."},
    )
    # A later batch repeating it merges into the memory, not into a draft of its own.
    again = create_all(stubs, {"content": "User likes green tea."}, {"content": "user likes green tea"})
    assert [r.merged_into for r in again] == [results[1].id, results[1].id]
    set_memory(stubs, dedupOnWrite=False)
    apart = create_all(stubs, {"content": "User owns a red bike"}, {"content": "User owns a red bike"})
    assert apart[0].id != apart[1].id and [r.merged_into for r in apart] == ["", ""]


def test_concurrent_writes_of_one_fact_leave_one_memory(start):
    """Concurrent creates are stored together (one group commit) or one after another; either
    way the fact is one memory, and every writer is told which."""
    handle = start()
    stubs = handle.stubs(ADMIN)
    go = threading.Barrier(8)

    def write(_: int) -> str:
        go.wait(10)
        return add(stubs, "User is allergic to peanuts").id

    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(write, range(8)))
    assert len(ids) == 1
    assert listed(stubs) == ["User is allergic to peanuts"]
    merges = [e for e in history(stubs, ids.pop()).entries if e.event == "merged"]
    assert len(merges) == 7


def test_a_follower_whose_token_is_revoked_is_cut_off(start, monkeypatch):
    """A stream is checked again while it runs: the revoked credential's follower is ended
    UNAUTHENTICATED, as its next call would be, and sees nothing written after."""
    monkeypatch.setattr("memsvc.api.interceptors.STREAM_RECHECK_S", 0.2)
    handle = start(watch_poll_s=0.05, watch_heartbeat_s=0.1)
    alice = stubs_for(handle, "alice-watch", ["alice"], write=False)
    follower = Follower(alice, api_key_id="alice")
    handle.app.credentials.revoke("alice-watch")
    follower._thread.join(20)
    assert not follower._thread.is_alive()
    assert follower.error is not None and follower.error.code() == C.UNAUTHENTICATED
    assert "revoked" in follower.error.details()


def test_a_character_rename_moves_the_history_and_names_who_asked(start, request):
    if "postgres" in request.node.name:
        pytest.skip("character memory is per node: a shared PostgreSQL store has none")
    handle = start()
    admin = handle.stubs(ADMIN)
    admin.memory.AppendRecentMessages(
        mpb.AppendRecentMessagesRequest(character="Mochi", messages=[mpb.ChatItem(role="user", text="hi")])
    )
    memory_id = admin.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="character:Mochi", content="Mochi likes tuna")
    ).id
    admin.memory.RenameCharacter(mpb.RenameCharacterRequest(old_name="Mochi", new_name="Kuro"))
    found = history(admin, memory_id)
    assert found.api_key_id == "character:Kuro"
    moved = found.entries[-1]
    assert (moved.event, moved.author, struct_dict(moved.changes)) == (
        "updated",
        "env:1",
        {"apiKeyId": "character:Kuro"},
    )


def test_a_repeat_that_carries_something_more_is_stored(start):
    """A merge drops the draft, so it is made only into a memory that holds all the draft
    carries: another speaker, another session, a longer life or another day is another memory."""
    handle = start()
    stubs = handle.stubs(ADMIN)
    text = "I play tennis every weekend"
    said = struct_pb2.Struct()
    said.update({"speaker": "Kevin"})
    first = add(stubs, text, metadata=said).id
    other = struct_pb2.Struct()
    other.update({"speaker": "Paola"})
    soon = ts(datetime.now(UTC) + timedelta(hours=1))
    for fields in (
        {"metadata": other},
        {"metadata": said, "session_id": "s2"},
        {"metadata": said, "keep": True},
        {"metadata": said, "occurred_at": ts(datetime(2026, 1, 5, tzinfo=UTC))},
    ):
        assert add(stubs, text, **fields).merged_into == "", fields
    assert add(stubs, text).merged_into == first  # no metadata of its own: the first holds it all
    assert add(stubs, text, metadata=said).merged_into == first
    short_lived = add(stubs, "User parks on level 3", expires_at=soon).id
    lasting = add(stubs, "User parks on level 3")  # would expire with the other
    assert lasting.merged_into == ""
    # A draft that expires as soon may go into either: each outlives it.
    assert add(stubs, "User parks on level 3", expires_at=soon).merged_into in (short_lived, lasting.id)
