"""memsvc as a LlamaIndex memory block: `MemsvcMemoryBlock`, for `llama_index.core.memory.Memory`.

    from llama_index.core.memory import Memory
    from memsvc_client import Memsvc
    from memsvc_client.llama_index import MemsvcMemoryBlock

    memory = Memory.from_defaults(
        session_id="chat-1",
        token_limit=4000,
        memory_blocks=[MemsvcMemoryBlock(client=Memsvc("127.0.0.1:50051", api_key_id="user-42"))],
    )

Install with the extra: `pip install "memsvc-client[llama-index]"`.

`Memory` keeps the latest messages itself (its FIFO queue, up to `token_limit` ×
`chat_history_token_ratio` tokens) and hands the messages it flushes out of that queue to its
blocks. This block:

- stores each flushed message whose role is in `roles` (user and assistant by default) as one
  memsvc memory, `role: text`, type `episodic`, under the Memory's `session_id` as memsvc
  sessionId, for the block's owner (`api_key_id`, or the client's default); with
  `extract_facts=True` memsvc's rule-based extraction also runs over each flushed user message
  and stores the preferences, decisions and habits it finds as keyed facts (a key makes a
  fact current instead of piling up);
- on `Memory.get()` recalls the owner's memories relevant to the latest user message
  (memsvc's retrieval, over every session unless `session_scoped`), one `- memory` line
  each, which Memory puts in its memory block template (`<memsvc>...</memsvc>` in the system
  message by default).

So what scrolled out of one conversation comes back in the next one, and memsvc serves the
same memories to the owner's other clients (its gateway's injection, the other SDKs).

`client` is a `Memsvc` (its calls run in worker threads, so `Memory`'s synchronous methods,
which run a new event loop each time, work) or an `AsyncMemsvc` created in the loop that uses
the Memory. Refused calls raise the SDK's typed errors out of `Memory.put` / `Memory.get`.

Offline: nothing here downloads. `Memory`'s default tokenizer is tiktoken's cl100k_base, whose
file llama-index-core ships (in `llama_index/core/_static/tiktoken_cache`); pass
`tokenizer_fn=` to `Memory.from_defaults` to count tokens some other way.
"""

from __future__ import annotations

import asyncio
from typing import Any

try:
    from llama_index.core.base.llms.types import ChatMessage, TextBlock
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.memory.memory import BaseMemoryBlock
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError(f"{exc}: install the SDK's extra, pip install 'memsvc-client[llama-index]'") from exc

from memsvc_client.aio import AsyncMemsvc
from memsvc_client.client import Memsvc
from memsvc_client.types import MemoryType, NewMemory, RetrieveResult, Strategy

__all__ = ["MemsvcMemoryBlock", "message_text"]

MAX_CONTENT_BYTES = 32 * 1024
MAX_BATCH = 1000
#: The metadata field marking the memories this block stored.
ENVELOPE = "llama_index"


def message_text(message: ChatMessage) -> str:
    """The text of a message (its text blocks; images, audio and tool calls have none)."""
    return " ".join(block.text for block in message.blocks if isinstance(block, TextBlock) and block.text.strip())


def _utf8_prefix(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


class MemsvcMemoryBlock(BaseMemoryBlock[str]):
    """A `Memory` block whose long-term memory is memsvc (see the module's docstring)."""

    name: str = Field(default="memsvc", description="The name of the memory block.")
    client: Memsvc | AsyncMemsvc = Field(exclude=True, description="The memsvc client.")
    api_key_id: str | None = Field(default=None, description="The owner; default: the client's apiKeyId.")
    limit: int = Field(default=5, ge=1, le=100, description="At most this many memories recalled.")
    max_tokens: int | None = Field(default=None, description="memsvc's token budget for a recall.")
    min_score: float | None = Field(default=None, description="memsvc's relevance floor (0..1).")
    strategy: Strategy | None = Field(default=None, description="memsvc's retrieval strategy.")
    session_scoped: bool = Field(default=False, description="Recall only the Memory's own session.")
    context_window: int = Field(default=1, ge=1, description="How many latest user messages form the query.")
    roles: list[str] = Field(default_factory=lambda: ["user", "assistant"], description="Roles stored.")
    extract_facts: bool = Field(default=False, description="Also extract facts from flushed user messages.")
    memory_type: MemoryType = Field(default="episodic", description="The memsvc type of stored messages.")

    async def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(self.client, AsyncMemsvc):
            return await function(*args, **kwargs)
        return await asyncio.to_thread(function, *args, **kwargs)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """The memories relevant to the latest user message(s), one `- memory` line each
        ("" when there is no user text or nothing relevant)."""
        users = [text for m in messages or [] if m.role.value == "user" and (text := message_text(m))]
        query = " ".join(users[-self.context_window :])
        if not query:
            return ""
        session_id = block_kwargs.get("session_id")
        scoped = self.session_scoped and isinstance(session_id, str)
        result: RetrieveResult = await self._call(
            self.client.retrieve,
            query,
            api_key_id=self.api_key_id,
            session_id=session_id if scoped else None,
            scope="session" if scoped else "apiKey",
            strategy=self.strategy,
            limit=self.limit,
            max_tokens=self.max_tokens,
            min_score=self.min_score,
        )
        return "\n".join(f"- {hit.content}" for hit in result.memories)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Store the messages `Memory` flushed (`additional_kwargs["session_id"]` is the
        Memory's session)."""
        drafts: list[NewMemory] = []
        facts: list[tuple[str, str | None]] = []
        for message in messages:
            role, text = message.role.value, message_text(message)
            if role not in self.roles or not text:
                continue
            session = message.additional_kwargs.get("session_id")
            session_id = session if isinstance(session, str) and session else None
            drafts.append(
                NewMemory(
                    content=_utf8_prefix(f"{role}: {text}", MAX_CONTENT_BYTES),
                    type=self.memory_type,
                    session_id=session_id,
                    metadata={ENVELOPE: {"role": role}},
                    api_key_id=self.api_key_id,
                )
            )
            if self.extract_facts and role == "user":
                facts.append((text, session_id))
        for start in range(0, len(drafts), MAX_BATCH):
            stored = await self._call(self.client.memories.add_many, drafts[start : start + MAX_BATCH])
            error = next((item.error for item in stored.items if item.error is not None), None)
            if error is not None:
                raise error
        for text, session_id in facts:
            await self._call(
                self.client.extract,
                user_message=_utf8_prefix(text, MAX_CONTENT_BYTES),
                api_key_id=self.api_key_id,
                session_id=session_id,
                wait=True,
            )
