"""`AsyncMemsvc`, the asyncio client (grpc.aio): the same methods as `Memsvc`, awaitable.

    async with AsyncMemsvc("127.0.0.1:50051", api_key_id="user-42") as memsvc:
        await memsvc.memories.add("I prefer dark mode in my editor")
        async for memory in memsvc.memories.list():
            print(memory.content)

Create it inside the event loop that uses it (grpc.aio channels belong to one loop). Each
method's arguments, results and errors are those of the same method of `Memsvc`, whose
docstrings say more; they are built and read by the same code (`memsvc_client._wire`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

import grpc
import grpc.aio

from memsvc_client import _wire
from memsvc_client._connection import DEFAULT_TARGET, Connection, RetryPolicy
from memsvc_client._proto.memsvc.v1 import (
    credentials_pb2_grpc,
    engine_pb2_grpc,
    memory_pb2,
    memory_pb2_grpc,
    settings_pb2,
    settings_pb2_grpc,
)
from memsvc_client.errors import from_rpc_error
from memsvc_client.types import (
    AddResult,
    BatchResult,
    ExtractResult,
    HistoryEntry,
    InjectResult,
    Memory,
    MemoryEvent,
    MemoryHistory,
    MemoryPage,
    MemorySettings,
    MemoryType,
    NewMemory,
    ReindexProgress,
    ReindexTarget,
    RetrieveResult,
    Scope,
    Strategy,
)

__all__ = ["AsyncHistoryIterator", "AsyncMemsvc", "AsyncReindexStream", "AsyncStubs", "AsyncWatchStream"]


@dataclass(frozen=True, slots=True)
class AsyncStubs:
    """The generated stubs on the client's grpc.aio channel (see `memsvc_client.Stubs`)."""

    memory: memory_pb2_grpc.MemoryServiceStub
    engine: engine_pb2_grpc.EngineServiceStub
    settings: settings_pb2_grpc.SettingsServiceStub
    credentials: credentials_pb2_grpc.CredentialServiceStub


class AsyncMemsvc:
    """An asyncio memsvc client; the arguments are those of `Memsvc`."""

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        token: str | None = None,
        api_key_id: str | None = None,
        tls: bool | grpc.ChannelCredentials = False,
        timeout: float | None = 30.0,
        retry: RetryPolicy | None = RetryPolicy(),
        options: Sequence[tuple[str, Any]] = (),
        metadata: Sequence[tuple[str, str]] = (),
    ) -> None:
        self._conn = Connection(
            target,
            token=token,
            api_key_id=api_key_id,
            tls=tls,
            timeout=timeout,
            retry=retry,
            options=options,
            metadata=metadata,
        )
        if self._conn.credentials is not None:
            self._channel = grpc.aio.secure_channel(
                target, self._conn.credentials, options=self._conn.channel_options()
            )
        else:
            self._channel = grpc.aio.insecure_channel(target, options=self._conn.channel_options())
        self.stubs = AsyncStubs(
            memory=memory_pb2_grpc.MemoryServiceStub(self._channel),
            engine=engine_pb2_grpc.EngineServiceStub(self._channel),
            settings=settings_pb2_grpc.SettingsServiceStub(self._channel),
            credentials=credentials_pb2_grpc.CredentialServiceStub(self._channel),
        )
        self.memories = AsyncMemories(self)
        self.settings = AsyncSettings(self)

    @property
    def channel(self) -> grpc.aio.Channel:
        return self._channel

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return self._conn.metadata

    @property
    def target(self) -> str:
        return self._conn.target

    async def close(self) -> None:
        """Close the channel; calls in flight are cancelled."""
        await self._channel.close()

    async def __aenter__(self) -> AsyncMemsvc:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncMemsvc({self._conn.target!r}, api_key_id={self._conn.api_key_id!r})"

    async def _call(self, method: Callable[..., Any], request: Any, timeout: float | None) -> Any:
        try:
            return await method(request, timeout=self._conn.deadline(timeout), metadata=self._conn.metadata)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from err

    def _owner(self, api_key_id: str | None) -> str:
        return self._conn.owner(api_key_id)

    async def retrieve(
        self,
        query: str,
        *,
        api_key_id: str | None = None,
        session_id: str | None = None,
        strategy: Strategy | None = None,
        scope: Scope | None = None,
        max_tokens: int | None = None,
        limit: int | None = None,
        min_score: float | None = None,
        as_of: datetime | None = None,
        timeout: float | None = None,
    ) -> RetrieveResult:
        """As `Memsvc.retrieve`: ranked memories for `query` within a token budget."""
        request = _wire.retrieve_request(
            query,
            self._owner(api_key_id),
            session_id=session_id,
            strategy=strategy,
            scope=scope,
            max_tokens=max_tokens,
            limit=limit,
            min_score=min_score,
            as_of=as_of,
        )
        return _wire.retrieve_result(await self._call(self.stubs.engine.Retrieve, request, timeout))

    async def inject(
        self,
        request: Mapping[str, Any],
        *,
        provider: str | None = None,
        model: str | None = None,
        api_key_id: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
        min_score: float | None = None,
        cache_safe: bool = False,
        system_message_must_be_first: bool = False,
        no_memory: bool = False,
        as_of: datetime | None = None,
        timeout: float | None = None,
    ) -> InjectResult:
        """As `Memsvc.inject`: the chat request body with relevant memories injected."""
        pb = _wire.inject_request(
            request,
            self._owner(api_key_id),
            provider=provider,
            model=model,
            session_id=session_id,
            limit=limit,
            min_score=min_score,
            cache_safe=cache_safe,
            system_message_must_be_first=system_message_must_be_first,
            no_memory=no_memory,
            as_of=as_of,
        )
        return _wire.inject_result(await self._call(self.stubs.engine.Inject, pb, timeout))

    async def extract(
        self,
        text: str | None = None,
        *,
        user_message: str | None = None,
        assistant_message: str | None = None,
        api_key_id: str | None = None,
        session_id: str | None = None,
        dry_run: bool = False,
        wait: bool = False,
        timeout: float | None = None,
    ) -> ExtractResult:
        """As `Memsvc.extract`: facts found in chat text, stored (unless `dry_run`)."""
        pb = _wire.extract_request(
            self._owner(api_key_id),
            text=text,
            user_message=user_message,
            assistant_message=assistant_message,
            session_id=session_id,
            dry_run=dry_run,
            wait=wait,
        )
        return _wire.extract_result(await self._call(self.stubs.engine.Extract, pb, timeout))

    def reindex(
        self,
        *,
        force: bool = False,
        limit: int | None = None,
        target: ReindexTarget | None = None,
        attach: bool = False,
        timeout: float | None = None,
    ) -> AsyncReindexStream:
        """As `Memsvc.reindex`: `async for progress in client.reindex(): ...`."""
        request = _wire.reindex_request(force, limit, target, attach)
        deadline = self._conn.deadline(timeout) if timeout is not None else None
        call = self.stubs.engine.Reindex(request, timeout=deadline, metadata=self._conn.metadata)
        return AsyncReindexStream(call)


class AsyncReindexStream(AsyncIterator[ReindexProgress]):
    """The progress messages of one reindex (see `memsvc_client.ReindexStream`)."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self.last: ReindexProgress | None = None

    def __aiter__(self) -> AsyncReindexStream:
        return self

    async def __anext__(self) -> ReindexProgress:
        try:
            message = await self._call.read()
        except grpc.RpcError as err:
            raise from_rpc_error(err) from err
        if message is grpc.aio.EOF:
            raise StopAsyncIteration
        self.last = _wire.progress(message)
        return self.last

    async def wait(self) -> ReindexProgress:
        """Read to the end; the last progress message."""
        async for _ in self:
            pass
        if self.last is None:  # pragma: no cover - the server always sends a first message
            raise RuntimeError("the reindex stream ended without a message")
        return self.last

    def cancel(self) -> None:
        """Stop listening (the job itself runs to completion on the server)."""
        self._call.cancel()

    async def __aenter__(self) -> AsyncReindexStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cancel()


class AsyncHistoryIterator(AsyncIterator[HistoryEntry]):
    """Every entry of one memory's history, oldest first, a page at a time as you iterate
    (see `memsvc_client.HistoryIterator`); `await read()` gives the whole `MemoryHistory`."""

    def __init__(self, fetch: Callable[[str], Awaitable[memory_pb2.GetMemoryHistoryResponse]]) -> None:
        self._fetch = fetch
        self._pages = _wire.HistoryPages()

    @property
    def id(self) -> str | None:
        return self._pages.id

    @property
    def api_key_id(self) -> str | None:
        return self._pages.api_key_id

    @property
    def versions(self) -> tuple[Memory, ...] | None:
        return self._pages.versions

    def __aiter__(self) -> AsyncHistoryIterator:
        return self

    async def __anext__(self) -> HistoryEntry:
        while (token := self._pages.next_token()) is not None:
            self._pages.take(await self._fetch(token))
        entry = self._pages.pop()
        if entry is None:
            raise StopAsyncIteration
        return entry

    async def read(self) -> MemoryHistory:
        """Read every page; the whole history (the entries already iterated included)."""
        async for _ in self:
            pass
        return self._pages.history()


class AsyncWatchStream(AsyncIterator[MemoryEvent]):
    """The change feed of `memories.watch` (see `memsvc_client.WatchStream`):
    `async for event in stream`; `resume_token` is the last event's token; `cancel()` (or
    leaving `async with`) ends it. Never retried or resumed behind your back."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._closed = False
        self.resume_token: str | None = None

    def __aiter__(self) -> AsyncWatchStream:
        return self

    async def __anext__(self) -> MemoryEvent:
        if self._closed:
            raise StopAsyncIteration
        try:
            message = await self._call.read()
        except grpc.RpcError as err:
            if self._closed and err.code() == grpc.StatusCode.CANCELLED:
                raise StopAsyncIteration from None
            raise from_rpc_error(err) from err
        except asyncio.CancelledError:
            # grpc.aio raises this from a call cancelled locally: ours, when closed.
            if self._closed:
                raise StopAsyncIteration from None
            raise
        if message is grpc.aio.EOF:
            raise StopAsyncIteration
        event = _wire.memory_event(message)
        self.resume_token = event.resume_token
        return event

    def cancel(self) -> None:
        """End the stream: the call is cancelled and iterating stops."""
        self._closed = True
        self._call.cancel()

    close = cancel

    async def aclose(self) -> None:
        self.cancel()

    async def __aenter__(self) -> AsyncWatchStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cancel()


class AsyncMemories:
    """`client.memories` of the async client (see `memsvc_client.client.Memories`)."""

    def __init__(self, client: AsyncMemsvc) -> None:
        self._client = client

    async def add(
        self,
        content: str,
        *,
        api_key_id: str | None = None,
        session_id: str | None = None,
        type: MemoryType | None = None,
        key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        expires_at: datetime | None = None,
        occurred_at: datetime | None = None,
        keep: bool | None = None,
        timeout: float | None = None,
    ) -> AddResult:
        """As `Memories.add`: store one memory (an upsert with a `key`)."""
        item = NewMemory(
            content,
            type=type,
            key=key,
            session_id=session_id,
            metadata=metadata,
            expires_at=expires_at,
            occurred_at=occurred_at,
            keep=keep,
        )
        request = _wire.create_request(item, self._client._owner(api_key_id))
        return _wire.added(await self._client._call(self._client.stubs.memory.CreateMemory, request, timeout))

    async def add_many(
        self,
        items: Iterable[NewMemory | str | Mapping[str, Any]],
        *,
        api_key_id: str | None = None,
        timeout: float | None = None,
    ) -> BatchResult:
        """As `Memories.add_many`: up to 1000 memories in one call; each item fails alone."""
        requests: list[memory_pb2.CreateMemoryRequest] = []
        for raw in items:
            item = _wire.new_memory(raw)
            requests.append(_wire.create_request(item, self._client._owner(item.api_key_id or api_key_id)))
        request = memory_pb2.CreateMemoriesRequest(memories=requests)
        return _wire.batch(await self._client._call(self._client.stubs.memory.CreateMemories, request, timeout))

    async def get(self, memory_id: str, *, timeout: float | None = None) -> Memory:
        """As `Memories.get`. Raises NotFound."""
        request = memory_pb2.GetMemoryRequest(id=memory_id)
        return _wire.memory(await self._client._call(self._client.stubs.memory.GetMemory, request, timeout))

    async def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        type: MemoryType | None = None,
        key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        keep: bool | None = None,
        occurred_at: datetime | None = None,
        timeout: float | None = None,
    ) -> Memory:
        """As `Memories.update`: change the given fields, return the memory as stored."""
        request = _wire.update_request(
            memory_id, content=content, type=type, key=key, metadata=metadata, keep=keep, occurred_at=occurred_at
        )
        answer = await self._client._call(self._client.stubs.memory.UpdateMemory, request, timeout)
        return _wire.memory(answer.memory)

    async def delete(self, memory_id: str, *, timeout: float | None = None) -> None:
        """As `Memories.delete`. Raises NotFound."""
        request = memory_pb2.DeleteMemoryRequest(id=memory_id)
        await self._client._call(self._client.stubs.memory.DeleteMemory, request, timeout)

    def history(
        self, memory_id: str, *, limit: int | None = None, timeout: float | None = None
    ) -> AsyncHistoryIterator:
        """As `Memories.history`: `async for entry in client.memories.history(id)`, or
        `await client.memories.history(id).read()` for the entries and the versions."""
        size = _wire.history_page_size(limit)

        async def fetch(token: str) -> memory_pb2.GetMemoryHistoryResponse:
            request = _wire.history_request(memory_id, size, token)
            page: memory_pb2.GetMemoryHistoryResponse = await self._client._call(
                self._client.stubs.memory.GetMemoryHistory, request, timeout
            )
            return page

        return AsyncHistoryIterator(fetch)

    def watch(
        self,
        *,
        api_key_id: str | None = None,
        resume_token: str | None = None,
        stop_when_caught_up: bool = False,
        timeout: float | None = None,
    ) -> AsyncWatchStream:
        """As `Memories.watch`: `async with client.memories.watch(...) as events:
        async for event in events: ...`; resume with the last handled event's token."""
        request = _wire.watch_request(self._client._owner(api_key_id), resume_token, stop_when_caught_up)
        deadline = self._client._conn.deadline(timeout) if timeout is not None else None
        call = self._client.stubs.memory.WatchMemories(request, timeout=deadline, metadata=self._client._conn.metadata)
        return AsyncWatchStream(call)

    async def clear(
        self,
        *,
        api_key_id: str | None = None,
        type: MemoryType | None = None,
        session_id: str | None = None,
        older_than: datetime | None = None,
        timeout: float | None = None,
    ) -> int:
        """As `Memories.clear`: how many memories were deleted."""
        request = _wire.clear_request(self._client._owner(api_key_id), type, session_id, older_than)
        answer = await self._client._call(self._client.stubs.memory.ClearMemories, request, timeout)
        deleted: int = answer.deleted_count
        return deleted

    async def page(
        self,
        *,
        api_key_id: str | None = None,
        type: MemoryType | None = None,
        session_id: str | None = None,
        query: str | None = None,
        offset: int = 0,
        limit: int = _wire.DEFAULT_PAGE_SIZE,
        timeout: float | None = None,
    ) -> MemoryPage:
        """As `Memories.page`: one page, newest first, with totals."""
        request = _wire.list_request(self._client._owner(api_key_id), type, session_id, query, offset, limit)
        answer = await self._client._call(self._client.stubs.memory.ListMemories, request, timeout)
        return _wire.page(answer, offset)

    def list(
        self,
        *,
        api_key_id: str | None = None,
        type: MemoryType | None = None,
        session_id: str | None = None,
        query: str | None = None,
        page_size: int = _wire.DEFAULT_PAGE_SIZE,
        timeout: float | None = None,
    ) -> AsyncIterator[Memory]:
        """As `Memories.list`: `async for memory in client.memories.list(): ...`."""
        size = _wire.page_size(page_size)
        owner = self._client._owner(api_key_id)

        async def walk() -> AsyncIterator[Memory]:
            offset, previous = 0, set[str]()
            while True:
                current = await self.page(
                    api_key_id=owner,
                    type=type,
                    session_id=session_id,
                    query=query,
                    offset=offset,
                    limit=size,
                    timeout=timeout,
                )
                for memory in current.memories:
                    if memory.id not in previous:
                        yield memory
                previous = {m.id for m in current.memories}
                offset += len(current.memories)
                if not current.memories or offset >= current.total:
                    return

        return walk()


class AsyncSettings:
    """`client.settings` of the async client (see `memsvc_client.client.Settings`)."""

    def __init__(self, client: AsyncMemsvc) -> None:
        self._client = client

    async def get(self, *, timeout: float | None = None) -> MemorySettings:
        """Every memory setting, normalized."""
        request = settings_pb2.GetMemorySettingsRequest()
        answer = await self._client._call(self._client.stubs.settings.GetMemorySettings, request, timeout)
        return _wire.memory_settings(answer)

    async def update(
        self, values: Mapping[str, Any] | None = None, /, *, timeout: float | None = None, **changes: Any
    ) -> MemorySettings:
        """As `Settings.update`: a strict partial update; every setting comes back."""
        request = _wire.settings_request({**(values or {}), **changes})
        answer = await self._client._call(self._client.stubs.settings.UpdateMemorySettings, request, timeout)
        return _wire.memory_settings(answer)
