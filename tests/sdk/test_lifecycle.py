"""A memory's lifecycle through the SDK and the real server: `memories.history` (the author of
every change, across pages, and the superseded versions), `memories.watch` (events in commit
order, resuming after a disconnect with the last token, a caught-up poll, tenancy, never
retried), `retrieve` / `inject` with `as_of`, `merged_into` of a repeated add and the
`dedup_on_write` setting; the sync client here, the async one at the end."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from conftest import ServerHandle, make_config, start_server
from memsvc_client import (
    AsyncMemsvc,
    HistoryEntry,
    HistoryIterator,
    InvalidArgument,
    MemoryEvent,
    MemoryHistory,
    Memsvc,
    NotFound,
    PermissionDenied,
    Unavailable,
    WatchStream,
)

from tests.sdk.servers import QUICK_RETRY, FlakyRelay, address
from tests.support.provider_schemas import chat_body

ADMIN = "sdk-lifecycle-admin"
# The first MEMSVC_API_TOKENS token is the credential `env:1`.
ADMIN_AUTHOR = "env:1"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    """A server that needs a token (ADMIN), so every change names its credential, and whose
    change feed polls often (the tests wait for events, not for the poll)."""
    config = make_config(tmp_path_factory.mktemp("sdk-lifecycle"), api_tokens=(ADMIN,), watch_poll_s=0.05)
    handle = start_server(config)
    with Memsvc(address(handle), token=ADMIN) as admin:
        admin.settings.update(enabled=True)
    yield handle
    handle.stop()


@pytest.fixture
def admin(secured: ServerHandle, owner: str) -> Iterator[Memsvc]:
    with Memsvc(address(secured), token=ADMIN, api_key_id=owner) as client:
        yield client


def agent(handle: ServerHandle, name: str, tenants: list[str], **kwargs: object) -> Memsvc:
    """A client with a stored credential of its own, confined to `tenants`."""
    token = handle.app.credentials.create(name, ["read:memory", "write:memory"], tenants, False).token
    return Memsvc(address(handle), token=token, api_key_id=tenants[0], **kwargs)  # type: ignore[arg-type]


def changes(stream: WatchStream, count: int) -> list[MemoryEvent]:
    """The next `count` events of `stream` that are changes (bookmarks skipped)."""
    out: list[MemoryEvent] = []
    while len(out) < count:
        event = next(stream)
        if not event.is_bookmark:
            out.append(event)
    return out


def supersede(client: Memsvc) -> tuple[str, datetime, datetime]:
    """Paris, then Berlin under one key; (the id, a time in Paris's span, a time after)."""
    memory_id = client.memories.add("User lives in Paris", key="location:home").id
    client.memories.add("User has a cat named Miso")
    in_paris = datetime.now(UTC)
    time.sleep(0.02)
    assert client.memories.add("User lives in Berlin", key="location:home").id == memory_id
    return memory_id, in_paris, datetime.now(UTC)


# ---- history -----------------------------------------------------------------------------------


def test_history_names_the_author_of_every_change_across_pages(secured: ServerHandle, owner: str) -> None:
    with agent(secured, f"{owner}-a", [owner]) as a, agent(secured, f"{owner}-b", [owner]) as b:
        memory_id = a.memories.add("User lives in Paris", key="location:home").id
        b.memories.add("User lives in Berlin", key="location:home")
        a.memories.update(memory_id, keep=False)

        entries = b.memories.history(memory_id, limit=1)  # a page (one call) per entry
        assert isinstance(entries, HistoryIterator) and entries.versions is None  # nothing fetched yet
        found = list(entries)
        assert all(isinstance(e, HistoryEntry) for e in found)
        assert [(e.event, e.author) for e in found] == [
            ("created", f"{owner}-a"),
            ("superseded", f"{owner}-b"),
            ("updated", f"{owner}-a"),
        ]
        assert found[0].changes["content"] == "User lives in Paris"
        assert found[1].changes["content"] == "User lives in Berlin"
        assert found[2].changes == {"keep": False}
        assert found[0].at <= found[1].at <= found[2].at and found[0].at.tzinfo is not None
        assert (entries.id, entries.api_key_id) == (memory_id, owner)

        history = a.memories.history(memory_id, limit=2).read()
        assert isinstance(history, MemoryHistory) and (history.id, history.api_key_id) == (memory_id, owner)
        assert [e.event for e in history] == ["created", "superseded", "updated"] and len(history) == 3
        [paris] = history.versions
        assert paris.content == "User lives in Paris" and paris.valid_from is not None
        assert paris.valid_to is not None and paris.valid_to <= found[1].at
        current = a.memories.get(memory_id)
        assert current.content == "User lives in Berlin" and current.valid_to is None
        assert current.valid_from is not None and current.valid_from >= paris.valid_to


def test_reading_on_after_iterating_keeps_every_entry(admin: Memsvc) -> None:
    memory_id = admin.memories.add("mood: calm 0", key="mood").id
    for n in range(1, 5):
        admin.memories.add(f"mood: calm {n}", key="mood")
    entries = admin.memories.history(memory_id, limit=2)
    first = next(entries)
    assert (first.event, first.author, first.changes["content"]) == ("created", ADMIN_AUTHOR, "mood: calm 0")
    history = entries.read()
    assert [e.changes["content"] for e in history.entries] == [f"mood: calm {n}" for n in range(5)]
    assert [v.content for v in history.versions] == [f"mood: calm {n}" for n in range(4)]


def test_history_of_another_tenants_or_a_missing_memory_is_not_found(secured: ServerHandle, owner: str) -> None:
    with Memsvc(address(secured), token=ADMIN) as root:
        theirs = root.memories.add("Someone else's secret", api_key_id=f"{owner}-other").id
    with agent(secured, f"{owner}-mine", [owner]) as mine:
        for memory_id in (theirs, "no-such-memory"):
            with pytest.raises(NotFound):
                list(mine.memories.history(memory_id))
        with pytest.raises(ValueError, match="1..1000"):
            mine.memories.history(theirs, limit=0)  # refused before any call


def test_a_deleted_memory_s_history_is_only_its_deletion(admin: Memsvc) -> None:
    memory_id = admin.memories.add("User's PIN is 4471").id
    admin.memories.delete(memory_id)
    history = admin.memories.history(memory_id).read()
    assert [(e.event, e.author, dict(e.changes)) for e in history] == [("deleted", ADMIN_AUTHOR, {})]
    assert history.versions == ()


# ---- watch -------------------------------------------------------------------------------------


def test_watch_gives_every_change_in_commit_order_then_closes(admin: Memsvc, owner: str) -> None:
    with admin.memories.watch(timeout=60) as stream:
        start = next(stream)
        assert start.is_bookmark and start.resume_token and start.memory is None and start.memory_id is None
        assert stream.resume_token == start.resume_token
        first = admin.memories.add("v1", key="k", metadata={"n": 1}).id
        admin.memories.add("v2", key="k")
        other = admin.memories.add("a second memory").id
        got = changes(stream, 3)
        # Read before the delete: deleting forgets a memory's history, so a creation not yet
        # read when its memory is deleted is never delivered (only the deletion is).
        admin.memories.delete(other)
        got += changes(stream, 1)
        assert [(e.kind, e.change, e.memory_id) for e in got] == [
            ("created", "created", first),
            ("updated", "superseded", first),
            ("created", "created", other),
            ("deleted", "deleted", other),
        ]
        assert {(e.api_key_id, e.author) for e in got} == {(owner, ADMIN_AUTHOR)}
        assert "content" in got[0].changed_fields and got[0].at is not None and got[0].at.tzinfo is not None
        assert got[1].memory is not None and got[1].memory.content == "v2"  # as stored when read
        assert got[3].memory is None  # gone: nothing of what it said
        assert stream.resume_token == got[-1].resume_token
    assert list(stream) == []  # closed: iterating ends


def test_closing_a_watch_ends_an_iteration_waiting_for_events(admin: Memsvc, owner: str) -> None:
    """From another thread (sync), or another task (async): the waiting read just ends."""
    stream = admin.memories.watch(timeout=60)
    assert next(stream).is_bookmark
    closer = threading.Timer(0.2, stream.close)
    closer.start()
    assert list(stream) == []
    closer.join()

    async def scenario() -> None:
        async with AsyncMemsvc(admin.target, token=ADMIN, api_key_id=owner) as client:
            feed = client.memories.watch(timeout=60)
            assert (await anext(feed)).is_bookmark
            waiting = asyncio.ensure_future(anext(feed))
            await asyncio.sleep(0.2)
            feed.cancel()
            with pytest.raises(StopAsyncIteration):
                await waiting

    asyncio.run(scenario())


def test_watch_resumes_after_a_disconnect_with_nothing_missed_or_repeated(admin: Memsvc) -> None:
    stream = admin.memories.watch(timeout=60)
    next(stream)
    seen = admin.memories.add("before the disconnect").id
    [handled] = changes(stream, 1)
    stream.close()
    # Disconnected: what happens meanwhile comes after the last handled token, once each.
    away = [admin.memories.add(f"while away {n}").id for n in range(3)]
    admin.memories.update(away[0], content="while away, changed")
    with admin.memories.watch(resume_token=handled.resume_token, timeout=60) as resumed:
        assert next(resumed).is_bookmark  # where it starts: right after `handled`
        after = admin.memories.add("after resuming").id
        rest = changes(resumed, 5)
    assert seen == handled.memory_id
    assert [(e.kind, e.memory_id) for e in rest] == [
        ("created", away[0]),
        ("created", away[1]),
        ("created", away[2]),
        ("updated", away[0]),
        ("created", after),
    ]


def test_a_caught_up_poll_ends_with_a_bookmark_to_resume_from(admin: Memsvc) -> None:
    start = list(admin.memories.watch(stop_when_caught_up=True, timeout=30))
    assert start and start[-1].is_bookmark
    made = [admin.memories.add(f"note {n}").id for n in range(3)]
    polled = list(admin.memories.watch(resume_token=start[-1].resume_token, stop_when_caught_up=True, timeout=30))
    assert [e.memory_id for e in polled if not e.is_bookmark] == made
    assert polled[-1].is_bookmark
    again = admin.memories.watch(resume_token=polled[-1].resume_token, stop_when_caught_up=True, timeout=30)
    assert [e for e in again if not e.is_bookmark] == []
    with pytest.raises(InvalidArgument):
        list(admin.memories.watch(resume_token="9.9.9.9", stop_when_caught_up=True, timeout=30))


def test_watch_is_confined_to_the_credential_s_tenants(secured: ServerHandle, owner: str) -> None:
    other = f"{owner}-other"
    with agent(secured, f"{owner}-reader", [owner]) as reader, Memsvc(address(secured), token=ADMIN) as root:
        start = list(reader.memories.watch(stop_when_caught_up=True, timeout=30))[-1].resume_token
        root.memories.add("another tenant's note", api_key_id=other)
        mine = root.memories.add("my note", api_key_id=owner).id
        # api_key_id="": every tenant the credential covers, which is only its own.
        events = list(reader.memories.watch(api_key_id="", resume_token=start, stop_when_caught_up=True, timeout=30))
        assert [(e.api_key_id, e.memory_id) for e in events if not e.is_bookmark] == [(owner, mine)]
        with pytest.raises(PermissionDenied) as info:
            next(reader.memories.watch(api_key_id=other, timeout=30))
        assert info.value.reason == "PERMISSION_DENIED"


def test_history_pages_are_retried_and_the_watch_is_not(secured: ServerHandle, owner: str) -> None:
    relay = FlakyRelay(address(secured))
    try:
        with Memsvc(relay.address, token=ADMIN, api_key_id=owner, retry=QUICK_RETRY) as client:
            memory_id = client.memories.add("retried history").id
            relay.fail_next(1)
            assert [e.event for e in client.memories.history(memory_id)] == ["created"]
            assert relay.attempts["/memsvc.v1.MemoryService/GetMemoryHistory"] == 2
            relay.fail_next(1)
            with pytest.raises(Unavailable):
                list(client.memories.watch(stop_when_caught_up=True, timeout=30))
            assert relay.attempts["/memsvc.v1.MemoryService/WatchMemories"] == 1
            # Through the relay when it lets the stream pass: the same events.
            assert list(client.memories.watch(stop_when_caught_up=True, timeout=30))[-1].is_bookmark
    finally:
        relay.stop()


# ---- facts valid in time -----------------------------------------------------------------------


def test_retrieve_as_of_answers_with_the_fact_as_it_was(admin: Memsvc) -> None:
    memory_id, in_paris, after = supersede(admin)
    query = "where does the user live"
    then = admin.retrieve(query, strategy="exact", as_of=in_paris, min_score=0)
    assert "User lives in Paris" in [m.content for m in then] and "User lives in Berlin" not in [
        m.content for m in then
    ]
    paris = next(m for m in then if m.id == memory_id)
    assert paris.valid_to is not None and paris.valid_to > in_paris
    assert paris.valid_from is not None and paris.valid_from <= in_paris
    now = admin.retrieve(query, strategy="exact", min_score=0)
    berlin = next(m for m in now if m.id == memory_id)
    assert berlin.content == "User lives in Berlin" and berlin.valid_to is None
    later = admin.retrieve(query, strategy="exact", as_of=after, min_score=0)
    assert [m.content for m in later if m.id == memory_id] == ["User lives in Berlin"]
    # A naive datetime is UTC; before anything was stored there is nothing to answer.
    assert len(admin.retrieve(query, as_of=(in_paris - timedelta(hours=1)).replace(tzinfo=None))) == 0


def test_inject_as_of_and_a_future_instant_refused(admin: Memsvc) -> None:
    _, in_paris, _ = supersede(admin)
    body = chat_body("Where does the user live? Paris or Berlin?")
    then = admin.inject(body, provider="openai", min_score=0, as_of=in_paris)
    assert then.injected, then.skipped_reason
    injected = then.request["messages"][0]["content"]  # the memory context, before the question
    assert "Paris" in injected and "Berlin" not in injected
    now = admin.inject(body, provider="openai", min_score=0).request["messages"][0]["content"]
    assert "Berlin" in now and "Paris" not in now
    with pytest.raises(InvalidArgument, match="asOf"):
        admin.retrieve("x", as_of=datetime.now(UTC) + timedelta(days=1))
    with pytest.raises(TypeError, match="as_of"):
        admin.retrieve("x", as_of="yesterday")  # type: ignore[arg-type]


# ---- duplicates merged on write ----------------------------------------------------------------


def test_a_repeated_add_is_merged_into_the_existing_memory(admin: Memsvc) -> None:
    first = admin.memories.add("User's dentist is Dr. Ortega")
    assert first.created and first.merged_into is None
    again = admin.memories.add("user's dentist is dr. ortega!")
    assert (again.id, again.created, again.merged_into) == (first.id, False, first.id)
    merge = list(admin.memories.history(first.id))[-1]
    assert (merge.event, merge.changes) == ("merged", {"mergedContent": "user's dentist is dr. ortega!"})
    batch = admin.memories.add_many(["User's dentist is Dr. Ortega.", "User's dentist is in Porto"])
    assert [(i.ok, i.merged_into) for i in batch.items] == [(True, first.id), (True, None)]
    assert batch.items[0].id == first.id and admin.memories.page().total == 2


def test_dedup_on_write_turns_merging_off(secured: ServerHandle, owner: str) -> None:
    with Memsvc(address(secured), token=ADMIN, api_key_id=owner) as admin:
        assert admin.settings.get().dedup_on_write is True  # the default
        try:
            assert admin.settings.update(dedup_on_write=False).dedup_on_write is False
            first = admin.memories.add("User was born in Lisbon")
            second = admin.memories.add("User was born in Lisbon")
            assert second.merged_into is None and second.created and second.id != first.id
        finally:
            admin.settings.update(dedup_on_write=True)


# ---- the async client --------------------------------------------------------------------------


def test_the_async_client_reads_history_follows_the_feed_and_answers_as_of(secured: ServerHandle, owner: str) -> None:
    async def scenario() -> None:
        async with AsyncMemsvc(address(secured), token=ADMIN, api_key_id=owner) as client:
            stream = client.memories.watch(timeout=60)
            start = await anext(stream)
            assert start.is_bookmark
            memory_id = (await client.memories.add("User lives in Paris", key="location:home")).id
            in_paris = datetime.now(UTC)
            await asyncio.sleep(0.02)
            await client.memories.add("User lives in Berlin", key="location:home")
            got = []
            async for event in stream:
                if not event.is_bookmark:
                    got.append(event)
                if len(got) == 2:
                    break
            stream.cancel()
            assert [e async for e in stream] == []  # cancelled: iterating ends
            assert [(e.kind, e.change) for e in got] == [("created", "created"), ("updated", "superseded")]

            # Resumed after the first event: the second comes again, once, then the caught-up bookmark.
            async with client.memories.watch(resume_token=got[0].resume_token, stop_when_caught_up=True) as rest:
                resumed = [e async for e in rest]
            assert [e.resume_token for e in resumed if not e.is_bookmark] == [got[1].resume_token]

            entries = [e async for e in client.memories.history(memory_id, limit=1)]
            assert [(e.event, e.author) for e in entries] == [("created", ADMIN_AUTHOR), ("superseded", ADMIN_AUTHOR)]
            history = await client.memories.history(memory_id).read()
            assert [v.content for v in history.versions] == ["User lives in Paris"]
            with pytest.raises(NotFound):
                await client.memories.history("no-such-memory").read()

            then = await client.retrieve("where does the user live", strategy="exact", as_of=in_paris, min_score=0)
            assert [m.content for m in then] == ["User lives in Paris"] and then.memories[0].valid_to is not None
            body = chat_body("Where does the user live? Paris or Berlin?")
            injected = await client.inject(body, provider="openai", min_score=0, as_of=in_paris)
            assert "User lives in Paris" in injected.request["messages"][0]["content"]

            again = await client.memories.add("User's dentist is Dr. Ortega")
            assert (await client.memories.add("User's dentist is Dr. Ortega")).merged_into == again.id

        async with AsyncMemsvc(address(secured), token=ADMIN) as root:
            with pytest.raises(InvalidArgument):
                async for _ in root.memories.watch(resume_token="not-a-token", stop_when_caught_up=True):
                    pass

    asyncio.run(scenario())
