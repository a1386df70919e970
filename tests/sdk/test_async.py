"""`AsyncMemsvc` (grpc.aio) through the real server: every method, the paging async iterator,
reindex's progress stream, typed errors, retries and deadlines. Each test runs its own event
loop (asyncio.run) and creates the client inside it, as grpc.aio wants."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from conftest import ServerHandle, Stubs
from memsvc_client import (
    Aborted,
    AsyncMemsvc,
    AsyncReindexStream,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NewMemory,
    NotFound,
    Unauthenticated,
    Unavailable,
)

from tests.sdk.servers import QUICK_RETRY, FlakyRelay, address
from tests.support.provider_schemas import VALIDATORS, anthropic_body
from tests.support.vectors import models, remote_settings, static_model, warm  # noqa: F401 - fixtures

Scenario = Callable[[AsyncMemsvc], Coroutine[Any, Any, None]]


@pytest.fixture
def run_with(server: ServerHandle, owner: str) -> Callable[..., None]:
    """`run_with(scenario, **client_kwargs)`: the coroutine with a fresh AsyncMemsvc on the
    test's server (memory enabled, default apiKeyId `owner`), in a loop of its own."""

    def run(scenario: Scenario, target: str | None = None, **kwargs: Any) -> None:
        async def main() -> None:
            kwargs.setdefault("api_key_id", owner)
            async with AsyncMemsvc(target or address(server), **kwargs) as client:
                await client.settings.update(enabled=True)
                await scenario(client)

        asyncio.run(main())

    return run


def test_crud_round_trip(run_with: Callable[..., None], owner: str) -> None:
    async def scenario(client: AsyncMemsvc) -> None:
        when = datetime(2024, 2, 3, 4, 5, 6, tzinfo=UTC)
        added = await client.memories.add("I like green tea", key="drink:tea", metadata={"n": 2}, occurred_at=when)
        assert added.created
        again = await client.memories.add("I like jasmine tea", key="drink:tea")
        assert not again.created and again.id == added.id
        memory = await client.memories.get(added.id)
        assert (memory.content, memory.api_key_id, memory.metadata, memory.occurred_at) == (
            "I like jasmine tea",
            owner,
            {"n": 2},
            when,
        )
        updated = await client.memories.update(added.id, content="I like oolong", keep=True)
        assert updated.content == "I like oolong" and updated.keep and updated == await client.memories.get(added.id)
        await client.memories.delete(added.id)
        with pytest.raises(NotFound) as info:
            await client.memories.get(added.id)
        assert info.value.reason == "NOT_FOUND"

    run_with(scenario)


def test_add_many_page_list_and_clear(run_with: Callable[..., None]) -> None:
    async def scenario(client: AsyncMemsvc) -> None:
        batch = await client.memories.add_many([f"async memory {i}" for i in range(12)] + [NewMemory("")])
        assert (batch.stored_count, batch.failed_count) == (12, 1)
        assert isinstance(batch.items[-1].error, InvalidArgument)
        page = await client.memories.page(limit=5, offset=5)
        assert page.total == 12 and [m.content for m in page.memories][0] == "async memory 6"
        listed = [m.content async for m in client.memories.list(page_size=5)]  # three pages
        assert listed == [f"async memory {i}" for i in reversed(range(12))]
        assert await client.memories.clear() == 12
        assert [m async for m in client.memories.list()] == []

    run_with(scenario)


def test_retrieve_inject_extract_and_settings(run_with: Callable[..., None]) -> None:
    async def scenario(client: AsyncMemsvc) -> None:
        db_id = (await client.memories.add("I will use PostgreSQL for this project")).id
        question = "Which database will I use for this project?"
        result = await client.retrieve(question)
        assert result.memories[0].id == db_id and result.resolution.backend == "sqlite"
        injected = await client.inject(anthropic_body(question), provider="anthropic")
        assert injected.injected and injected.format == "anthropic" and injected.memory_ids == (db_id,)
        assert VALIDATORS["anthropic"](injected.request) == []
        extracted = await client.extract(user_message="I prefer concise answers.", wait=True)
        assert extracted.stored >= 1 and extracted.facts[0].category == "preference"
        settings = await client.settings.update(max_tokens=1200)
        assert settings.max_tokens == 1200 and (await client.settings.get()) == settings
        with pytest.raises(InvalidArgument) as info:
            await client.settings.update(strategy="bogus")
        assert [v.field for v in info.value.field_violations] == ["strategy"]

    run_with(scenario)


def test_a_call_without_the_needed_token_is_unauthenticated(
    boot: Callable[..., tuple[ServerHandle, Stubs]],
) -> None:
    handle, _ = boot(api_tokens=("async-admin",))

    async def main() -> None:
        async with AsyncMemsvc(address(handle), api_key_id="a") as anonymous:
            with pytest.raises(Unauthenticated) as info:
                await anonymous.memories.page()
            assert info.value.message == "missing or invalid bearer token"
        async with AsyncMemsvc(address(handle), api_key_id="a", token="async-admin") as admin:
            assert (await admin.memories.page()).total == 0

    asyncio.run(main())


def test_reindex_streams_progress_to_done(
    boot: Callable[..., tuple[ServerHandle, Stubs]],
    static_model: Any,  # noqa: F811 - fixture
) -> None:
    handle, _ = boot(static_model=str(static_model))

    async def main() -> None:
        async with AsyncMemsvc(address(handle), api_key_id="async-reindex") as client:
            with pytest.raises(FailedPrecondition):  # no embedding source yet
                await client.reindex().wait()
            await client.settings.update(enabled=True)
            await client.memories.add_many([f"async bulk {i}" for i in range(300)])
            await client.settings.update(embedding_source="static", static_enabled=True)
            await asyncio.get_running_loop().run_in_executor(None, warm, handle)
            stream = client.reindex()
            assert isinstance(stream, AsyncReindexStream)
            messages = [m async for m in stream]
            assert messages[0].started and messages[0].pending == 300
            assert [m.processed for m in messages] == sorted(m.processed for m in messages)
            assert messages[-1].state == "done" and messages[-1].processed == 300 and len(messages) >= 3

    asyncio.run(main())


@pytest.fixture
def relay(server: ServerHandle) -> Iterator[FlakyRelay]:
    front = FlakyRelay(address(server))
    yield front
    front.stop()


def test_reads_are_retried_and_writes_are_not(run_with: Callable[..., None], relay: FlakyRelay) -> None:
    async def scenario(client: AsyncMemsvc) -> None:
        added = await client.memories.add("async retried")
        relay.fail_next(2)
        assert (await client.memories.get(added.id)).content == "async retried"
        assert relay.attempts["/memsvc.v1.MemoryService/GetMemory"] == 3
        relay.fail_next(1)
        with pytest.raises(Unavailable):
            await client.memories.add("sent once")
        assert relay.attempts["/memsvc.v1.MemoryService/CreateMemory"] == 1
        assert [m.content async for m in client.memories.list()] == ["async retried"]

    run_with(scenario, target=relay.address, retry=QUICK_RETRY)


def test_deadlines_and_the_one_reindex_rule(server: ServerHandle, models: Any, owner: str) -> None:
    async def main() -> None:
        async with AsyncMemsvc(address(server), api_key_id=owner, timeout=0.5) as client:
            await client.settings.update(enabled=True)
            await client.memories.add_many([f"async fact {i}" for i in range(3)])
            await client.settings.update(remote_settings(models))
            models.mode, models.delay_s = "slow", 60.0  # released by the fixture's reset
            with pytest.raises(DeadlineExceeded):
                await client.memories.add("held by the embedder")
            running = client.reindex()
            opening = await anext(running)
            assert opening.started and opening.pending == 3
            with pytest.raises(Aborted) as info:
                await client.reindex().wait()
            assert info.value.reason == "REINDEX_RUNNING"
            running.cancel()  # stops listening, not the job
            models.reset()  # the embedder answers: the job and the held write finish
            final = await client.reindex(attach=True).wait()
            assert final.state == "done" and final.processed == 3
            async with asyncio.timeout(30):  # the held write lands once embedded
                while len([m async for m in client.memories.list(timeout=30)]) < 4:
                    await asyncio.sleep(0.05)

    asyncio.run(main())
