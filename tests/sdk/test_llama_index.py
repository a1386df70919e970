"""`memsvc_client.llama_index.MemsvcMemoryBlock` in LlamaIndex's own `Memory` through a real
memsvc: messages flushed out of Memory's short-term queue (a tiny token limit forces it) are
stored as memsvc memories and come back, recalled, in the block's part of the system message,
also in another session; the asyncio path; the block's own methods; refused calls as the SDK's
typed errors. Nothing downloads: every test holds the `offline` guard (no connection off this
machine, no host name lookup), including the one that loads Memory's default tiktoken
tokenizer from the file llama-index-core ships."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator

import llama_index.core
import pytest
from conftest import ServerHandle, make_config, start_server
from llama_index.core.llms import ChatMessage
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store.sql import MessageStatus
from memsvc_client import AsyncMemsvc, InvalidArgument, Memsvc, PermissionDenied
from memsvc_client.llama_index import MemsvcMemoryBlock, message_text

from tests.sdk.servers import address

pytestmark = pytest.mark.usefixtures("offline")


def words(text: str) -> list[str]:
    """A tokenizer for the tests: one token per word, so the limits below are easy to follow."""
    return text.split()


def _memory(block: MemsvcMemoryBlock, session_id: str, **kwargs: object) -> Memory:
    # 20 tokens × 0.7: the queue keeps at most 14 words; each flush ejects ≥ 4 words.
    options: dict[str, object] = {"token_limit": 20, "token_flush_size": 4, "tokenizer_fn": words}
    options.update(kwargs)
    return Memory.from_defaults(session_id=session_id, memory_blocks=[block], **options)  # type: ignore[arg-type]


CONVERSATION = [
    ChatMessage(role="user", content="My sister Maria lives in Lisbon"),
    ChatMessage(role="assistant", content="Lisbon is lovely in spring."),
    ChatMessage(role="user", content="I am allergic to peanuts"),
    ChatMessage(role="assistant", content="Noted, no peanuts."),
    ChatMessage(role="user", content="What is the weather like today?"),
    ChatMessage(role="assistant", content="Sunny."),
]


def _system_text(messages: list[ChatMessage]) -> str:
    assert messages[0].role.value == "system", messages
    return message_text(messages[0])


def test_flushed_messages_are_stored_in_memsvc_and_recalled_into_the_system_message(memsvc: Memsvc, owner: str) -> None:
    memory = _memory(MemsvcMemoryBlock(client=memsvc), "li-chat-1")
    for message in CONVERSATION:
        memory.put(ChatMessage(role=message.role, content=message.content))
    stored = list(memsvc.memories.list())
    assert stored, "nothing was flushed"
    assert {(m.api_key_id, m.session_id, m.type) for m in stored} == {(owner, "li-chat-1", "episodic")}
    contents = [m.content for m in reversed(stored)]  # oldest first
    assert contents[:2] == ["user: My sister Maria lives in Lisbon", "assistant: Lisbon is lovely in spring."]
    assert all(m.metadata["llama_index"]["role"] in ("user", "assistant") for m in stored)
    # What Memory still holds is what it did not flush; the flushed ones are archived.
    active = [message_text(m) for m in memory.get_all(status=MessageStatus.ACTIVE)]
    assert "My sister Maria lives in Lisbon" not in active and active[-1] == "Sunny."
    assert len(active) + len(stored) == len(CONVERSATION)

    messages = memory.get(input="Where does my sister live?")
    system = _system_text(messages)
    assert "<memsvc>" in system and "- user: My sister Maria lives in Lisbon" in system
    assert [message_text(m) for m in messages[1:]] == active  # then the chat history as it is


def test_a_new_session_recalls_what_an_earlier_one_flushed_unless_session_scoped(memsvc: Memsvc) -> None:
    earlier = _memory(MemsvcMemoryBlock(client=memsvc), "li-chat-old")
    earlier.put_messages([ChatMessage(role=m.role, content=m.content) for m in CONVERSATION])
    later = _memory(MemsvcMemoryBlock(client=memsvc), "li-chat-new")
    later.put(ChatMessage(role="user", content="Can you suggest a snack? Remember my allergy to peanuts"))
    system = _system_text(later.get())
    assert "- user: I am allergic to peanuts" in system
    scoped = _memory(MemsvcMemoryBlock(client=memsvc, session_scoped=True), "li-chat-new")
    scoped.put(ChatMessage(role="user", content="Remember my allergy to peanuts"))
    assert all(m.role.value != "system" for m in scoped.get())  # nothing of this session in memsvc yet


def test_memory_s_default_tokenizer_loads_offline(memsvc: Memsvc, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)  # the cache llama-index-core ships
    monkeypatch.setattr(llama_index.core, "global_tokenizer", None)  # load it now, under the guard
    memory = Memory.from_defaults(
        session_id="li-tiktoken", token_limit=30, token_flush_size=5, memory_blocks=[MemsvcMemoryBlock(client=memsvc)]
    )
    assert len(memory.tokenizer_fn("hello world")) == 2  # cl100k_base
    for message in CONVERSATION:
        memory.put(ChatMessage(role=message.role, content=message.content))
    assert "- user: My sister Maria lives in Lisbon" in _system_text(memory.get(input="Where is my sister?"))


def test_the_asyncio_path_with_an_async_client(server: ServerHandle, owner: str, memsvc: Memsvc) -> None:
    async def scenario() -> str:
        async with AsyncMemsvc(address(server), api_key_id=owner) as client:
            memory = _memory(MemsvcMemoryBlock(client=client, name="longterm"), "li-async")
            for message in CONVERSATION:
                await memory.aput(ChatMessage(role=message.role, content=message.content))
            return _system_text(await memory.aget(input="Am I allergic to anything?"))

    system = asyncio.run(scenario())
    assert "<longterm>" in system and "- user: I am allergic to peanuts" in system
    assert memsvc.memories.page(session_id="li-async").total >= 2


def test_the_block_s_own_get_and_put(memsvc: Memsvc) -> None:
    block = MemsvcMemoryBlock(client=memsvc, roles=["user"], extract_facts=True, limit=2)

    async def scenario() -> None:
        assert await block.aget([]) == ""
        assert await block.aget([ChatMessage(role="assistant", content="Hello!")]) == ""  # no user text
        assert await block.aget([ChatMessage(role="user", content="anything about pizza?")]) == ""  # nothing stored
        await block.aput(
            [
                ChatMessage(role="system", content="You are a helpful assistant."),
                ChatMessage(role="user", content="I prefer concise answers."),
                ChatMessage(role="assistant", content="Understood."),
                ChatMessage(role="tool", content='{"result": 42}'),
                ChatMessage(role="user", content=""),
            ],
            session_id="li-direct",
        )
        recalled = await block.aget([ChatMessage(role="user", content="How long should my answers be? concise?")])
        assert recalled.splitlines()[0].startswith("- ") and "concise" in recalled

    asyncio.run(scenario())
    by_key = {m.key: m for m in memsvc.memories.list()}
    raw = by_key.pop(None)
    assert (raw.content, raw.session_id) == ("user: I prefer concise answers.", "li-direct")
    [fact] = by_key.values()  # memsvc's rule-based extraction: a keyed, durable preference
    assert fact.content == "User prefers concise answers" and fact.key and fact.key.startswith("preference:")
    assert fact.session_id == "li-direct"
    with pytest.raises(ValueError):
        MemsvcMemoryBlock(client=memsvc, limit=0)


def test_the_offline_guard_sees_an_attempt_to_reach_the_network(offline: list[object]) -> None:
    # Audit events only, raised by hand: nothing is sent anywhere.
    sys.audit("socket.connect", None, ("192.0.2.1", 443))
    sys.audit("socket.getaddrinfo", "openaipublic.example", 443, 0, 0, 0, 0)
    sys.audit("socket.connect", None, ("127.0.0.1", 50051))
    sys.audit("socket.getaddrinfo", "localhost", 50051, 0, 0, 0, 0)
    assert offline == [("192.0.2.1", 443), "openaipublic.example"]
    offline.clear()


# ---- refused calls -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    handle = start_server(make_config(tmp_path_factory.mktemp("li-auth"), api_tokens=("li-admin",)))
    with Memsvc(address(handle), token="li-admin") as admin:
        admin.settings.update(enabled=True)
    yield handle
    handle.stop()


def test_refused_calls_surface_as_the_sdk_s_typed_errors(secured: ServerHandle, connect: Callable[..., Memsvc]) -> None:
    token = secured.app.credentials.create("li-a", ["read:memory", "write:memory"], ["li-a"], False).token
    with Memsvc(address(secured), token=token, api_key_id="li-a") as client:
        theirs = _memory(MemsvcMemoryBlock(client=client, api_key_id="li-b"), "li-refused")
        with pytest.raises(PermissionDenied) as info:
            theirs.put_messages([ChatMessage(role=m.role, content=m.content) for m in CONVERSATION])  # a flush
        assert info.value.message == "credential 'li-a' may not address apiKeyId 'li-b'"
        with pytest.raises(PermissionDenied):
            theirs.get(input="Where does my sister live?")
        mine = _memory(MemsvcMemoryBlock(client=client), "li-refused")
        mine.put_messages([ChatMessage(role=m.role, content=m.content) for m in CONVERSATION])
        assert client.memories.page().total >= 2
    no_owner = connect()
    with pytest.raises(InvalidArgument) as missing:
        _memory(MemsvcMemoryBlock(client=no_owner), "li-no-owner").get(input="anything")
    assert "apiKeyId" in {v.field for v in missing.value.field_violations}
