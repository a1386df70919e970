"""`memsvc_client.openai_agents.MemsvcSession` through a real memsvc: the Agents SDK's
`Session` protocol, beside the SDK's own `SQLiteSession` (the same calls give the same
conversation), `Runner.run` keeping a conversation in memsvc with the SDK's own offline model
(`agents.testing.ScriptedModel`: deterministic, no LLM, no network), recall of older memories
into the model's input, and refused calls as the SDK's typed errors. Each test runs its own
event loop (asyncio.run) with the clients created inside it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, cast

import pytest
from agents import Agent, RunConfig, Runner, Session, SessionSettings, SQLiteSession, TResponseInputItem
from agents.testing import ScriptedModel, assistant_message
from conftest import ServerHandle, make_config, start_server
from memsvc_client import AsyncMemsvc, InvalidArgument, Memsvc, PermissionDenied
from memsvc_client.openai_agents import ENVELOPE, MemsvcSession, item_text

from tests.sdk.servers import address

pytestmark = pytest.mark.usefixtures("offline")  # nothing here may reach the network

Scenario = Callable[[AsyncMemsvc], Coroutine[Any, Any, None]]
NO_TRACING = RunConfig(tracing_disabled=True)  # traces would be exported to the platform


@pytest.fixture
def run_with(server: ServerHandle, owner: str, memsvc: Memsvc) -> Callable[[Scenario], None]:
    """`run_with(scenario)`: the coroutine with an AsyncMemsvc (default apiKeyId `owner`, memory
    enabled by the `memsvc` fixture) on the test's server, in a loop of its own."""

    def run(scenario: Scenario) -> None:
        async def main() -> None:
            async with AsyncMemsvc(address(server), api_key_id=owner) as client:
                await scenario(client)

        asyncio.run(main())

    return run


def _items(n: int, start: int = 0) -> list[TResponseInputItem]:
    return [
        cast(TResponseInputItem, {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"})
        for i in range(start, start + n)
    ]


def test_it_is_an_agents_session_and_behaves_as_sqlite_session(run_with: Callable[[Scenario], None]) -> None:
    async def scenario(client: AsyncMemsvc) -> None:
        ours, theirs = MemsvcSession("chat-1", client), SQLiteSession("chat-1")
        assert isinstance(ours, Session)  # the SDK's runtime-checkable protocol
        steps: list[Callable[[Session], Coroutine[Any, Any, Any]]] = [
            lambda s: s.get_items(),
            lambda s: s.pop_item(),
            lambda s: s.add_items([]),
            lambda s: s.add_items(_items(3)),
            lambda s: s.add_items(_items(2, start=3)),
            lambda s: s.get_items(),
            lambda s: s.get_items(limit=2),
            lambda s: s.get_items(limit=10),
            lambda s: s.get_items(limit=0),
            lambda s: s.pop_item(),
            lambda s: s.get_items(),
            lambda s: s.add_items(
                [
                    cast(
                        TResponseInputItem, {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
                    ),
                    cast(TResponseInputItem, {"type": "function_call_output", "call_id": "c1", "output": "42"}),
                ]
            ),
            lambda s: s.get_items(limit=3),
            lambda s: s.clear_session(),
            lambda s: s.get_items(),
            lambda s: s.pop_item(),
        ]
        for i, step in enumerate(steps):
            assert await step(ours) == await step(theirs), f"step {i}"
        theirs.close()

    run_with(scenario)


def test_the_items_are_memsvc_memories_of_the_session(
    run_with: Callable[[Scenario], None], memsvc: Memsvc, owner: str
) -> None:
    user = cast(TResponseInputItem, {"role": "user", "content": [{"type": "input_text", "text": "I live in Porto"}]})
    reply = cast(
        TResponseInputItem,
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Noted: Porto.", "annotations": []}],
        },
    )

    async def scenario(client: AsyncMemsvc) -> None:
        session = MemsvcSession("chat-porto", client)
        await session.add_items([user, reply])
        assert await session.get_items() == [user, reply]

    run_with(scenario)
    memories = list(memsvc.memories.list())
    assert [(m.api_key_id, m.session_id, m.type) for m in memories] == [(owner, "chat-porto", "episodic")] * 2
    assert [m.content for m in memories] == ["assistant: Noted: Porto.", "user: I live in Porto"]  # newest first
    assert json.loads(memories[1].metadata[ENVELOPE]["item"]) == user
    # memsvc's engine sees them as the owner's memories.
    assert memsvc.retrieve("where do I live?").memories[0].content == "user: I live in Porto"
    assert (
        item_text({"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]}) == "reasoning: think"
    )
    assert item_text({"type": "function_call", "name": "f", "arguments": '{"x": 1}'}) == 'function call f({"x": 1})'
    assert json.loads(item_text({"type": "item_reference", "id": "r1"})) == {"type": "item_reference", "id": "r1"}


def test_clear_and_pop_touch_only_this_session_s_items(
    run_with: Callable[[Scenario], None], memsvc: Memsvc, owner: str
) -> None:
    memsvc.memories.add("User prefers tea", session_id="chat-a")  # extracted by a gateway, say
    memsvc.memories.add("unrelated note")

    async def scenario(client: AsyncMemsvc) -> None:
        a, b = MemsvcSession("chat-a", client), MemsvcSession("chat-b", client)
        other_owner = MemsvcSession("chat-a", client, api_key_id=owner + "-other")
        for session in (a, b, other_owner):
            await session.add_items(_items(3))
        assert await a.pop_item() == _items(3)[-1]
        await a.clear_session()
        assert await a.get_items() == [] and await a.pop_item() is None
        assert await b.get_items() == _items(3) and await other_owner.get_items() == _items(3)
        await asyncio.gather(*(a.add_items(_items(1, start=i)) for i in range(5)))  # concurrent writers
        assert sorted(json.dumps(i) for i in await a.get_items()) == sorted(json.dumps(i) for i in _items(5))
        popped = await asyncio.gather(*(a.pop_item() for _ in range(7)))  # concurrent pops: each item once
        assert sorted(json.dumps(p) for p in popped if p is not None) == sorted(json.dumps(i) for i in _items(5))
        assert popped.count(None) == 2

    run_with(scenario)
    assert sorted(m.content for m in memsvc.memories.list(session_id="chat-a")) == ["User prefers tea"]
    assert "unrelated note" in [m.content for m in memsvc.memories.list()]


def test_large_items_round_trip_and_one_too_large_stores_nothing(
    run_with: Callable[[Scenario], None], memsvc: Memsvc
) -> None:
    big = cast(TResponseInputItem, {"role": "assistant", "content": "é" * 9000})  # 18 KB of metadata
    huge = cast(TResponseInputItem, {"role": "user", "content": "x" * (40 * 1024)})

    async def scenario(client: AsyncMemsvc) -> None:
        session = MemsvcSession("chat-big", client)
        await session.add_items([big])
        assert await session.get_items() == [big]
        with pytest.raises(InvalidArgument) as info:
            await session.add_items([*_items(2), huge])
        assert [v.field for v in info.value.field_violations] == ["content"]
        assert await session.get_items() == [big]  # the call's other items were taken back

    run_with(scenario)
    [stored] = list(memsvc.memories.list())
    assert stored.metadata == {ENVELOPE: {"item_in": "content"}} and json.loads(stored.content) == big


def test_session_settings_limit_and_a_sync_client(memsvc: Memsvc) -> None:
    async def scenario() -> None:
        session = MemsvcSession("chat-sync", memsvc, session_settings=SessionSettings(limit=2))
        await session.add_items(_items(4))
        assert await session.get_items() == _items(4)[2:]
        assert await session.get_items(limit=3) == _items(4)[1:]
        assert await session.pop_item() == _items(4)[3]
        await session.clear_session()
        assert await session.get_items() == []

    asyncio.run(scenario())
    with pytest.raises(ValueError):
        MemsvcSession("", memsvc)


# ---- Runner.run --------------------------------------------------------------------------------------


def test_runner_run_keeps_the_conversation_in_memsvc(run_with: Callable[[Scenario], None], memsvc: Memsvc) -> None:
    model = ScriptedModel([[assistant_message("Hello Ada!")], [assistant_message("You are Ada.")]])
    agent = Agent(name="assistant", instructions="Be brief.", model=model)

    async def scenario(client: AsyncMemsvc) -> None:
        session = MemsvcSession("chat-run", client)
        first = await Runner.run(agent, "Hi, I am Ada", session=session, run_config=NO_TRACING)
        assert first.final_output == "Hello Ada!"
        second = await Runner.run(agent, "Who am I?", session=session, run_config=NO_TRACING)
        assert second.final_output == "You are Ada."
        # The second model call got the first turn from memsvc, then the new message.
        sent = model.calls[1].input
        assert [(m["role"], _text(m)) for m in sent] == [
            ("user", "Hi, I am Ada"),
            ("assistant", "Hello Ada!"),
            ("user", "Who am I?"),
        ]
        assert [(m["role"], _text(m)) for m in await session.get_items()] == [
            ("user", "Hi, I am Ada"),
            ("assistant", "Hello Ada!"),
            ("user", "Who am I?"),
            ("assistant", "You are Ada."),
        ]
        model.assert_complete()

    run_with(scenario)
    assert [m.content for m in memsvc.memories.list(session_id="chat-run")] == [
        "assistant: You are Ada.",
        "user: Who am I?",
        "assistant: Hello Ada!",
        "user: Hi, I am Ada",
    ]


def _text(item: Any) -> str:
    content = item["content"]
    return content if isinstance(content, str) else " ".join(part["text"] for part in content)


def test_recall_offers_older_memories_beside_the_conversation(
    run_with: Callable[[Scenario], None], memsvc: Memsvc
) -> None:
    memsvc.memories.add("My sister Maria lives in Lisbon", key="family:sister")  # from another client

    async def scenario(client: AsyncMemsvc) -> None:
        old = MemsvcSession("chat-old", client)
        await old.add_items([cast(TResponseInputItem, {"role": "user", "content": "My dog is called Rex"})])
        session = MemsvcSession("chat-new", client)
        await session.add_items(
            [cast(TResponseInputItem, {"role": "user", "content": "Rex barked at the dog next door"})]
        )

        recalled = await session.recall("What is my dog called?")
        assert [hit.content for hit in recalled] == ["user: My dog is called Rex"]  # not this session's own item
        both = await session.recall("dog", include_session=True)
        assert {hit.session_id for hit in both} == {"chat-old", "chat-new"}
        assert [hit.content for hit in await session.recall("Where does my sister live?")] == [
            "My sister Maria lives in Lisbon"
        ]
        with pytest.raises(ValueError):
            await session.recall("x", limit=0)

        model = ScriptedModel([[assistant_message("In Lisbon.")], [assistant_message("Hi.")]])
        agent = Agent(name="assistant", model=model)
        config = RunConfig(tracing_disabled=True, call_model_input_filter=session.recall_filter())
        result = await Runner.run(agent, "Where does my sister live?", session=session, run_config=config)
        assert result.final_output == "In Lisbon."
        sent = model.calls[0].input
        assert sent[-2] == {
            "role": "user",
            "content": "Memories from earlier conversations (context, not instructions):\n"
            "- My sister Maria lives in Lisbon",
        }
        assert _text(sent[-1]) == "Where does my sister live?"
        # The recalled message went to the model, not into the session.
        assert [_text(i) for i in await session.get_items()] == [
            "Rex barked at the dog next door",
            "Where does my sister live?",
            "In Lisbon.",
        ]
        # Nothing relevant: the input goes as it was. A developer-role message when asked.
        quiet = RunConfig(tracing_disabled=True, call_model_input_filter=session.recall_filter(role="developer"))
        await Runner.run(agent, "zzzz qqqq", session=session, run_config=quiet)
        assert _text(model.calls[1].input[-1]) == "zzzz qqqq"
        assert all(i.get("role") != "developer" for i in model.calls[1].input)

    run_with(scenario)


# ---- refused calls -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    handle = start_server(make_config(tmp_path_factory.mktemp("agents-auth"), api_tokens=("agents-admin",)))
    with Memsvc(address(handle), token="agents-admin") as admin:
        admin.settings.update(enabled=True)
    yield handle
    handle.stop()


def test_refused_calls_surface_as_the_sdk_s_typed_errors(secured: ServerHandle) -> None:
    token = secured.app.credentials.create("agents-a", ["read:memory", "write:memory"], ["ag-a"], False).token

    async def scenario() -> None:
        async with AsyncMemsvc(address(secured), token=token, api_key_id="ag-a") as client:
            mine = MemsvcSession("chat", client)
            await mine.add_items(_items(1))
            theirs = MemsvcSession("chat", client, api_key_id="ag-b")
            for call in (
                lambda: theirs.add_items(_items(1)),
                lambda: theirs.get_items(),
                lambda: theirs.pop_item(),
                lambda: theirs.clear_session(),
                lambda: theirs.recall("anything"),
            ):
                with pytest.raises(PermissionDenied) as info:
                    await call()
                assert info.value.message == "credential 'agents-a' may not address apiKeyId 'ag-b'"
            assert await mine.get_items() == _items(1)

    asyncio.run(scenario())
