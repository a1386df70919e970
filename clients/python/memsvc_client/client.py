"""`Memsvc`, the synchronous client: one gRPC channel, the domain's methods on it.

    from memsvc_client import Memsvc

    with Memsvc("127.0.0.1:50051", api_key_id="user-42") as memsvc:
        memsvc.memories.add("I prefer dark mode in my editor")
        for hit in memsvc.retrieve("what theme do I like?"):
            print(hit.content)

Every call has a deadline (the client's `timeout`, or the call's own), sends the bearer token
when one is given, and raises a `memsvc_client.errors.MemsvcError` subclass when it fails.
The channel retries idempotent calls on UNAVAILABLE (`RetryPolicy`); writes are sent once.
A client is safe to share between threads (gRPC channels are); close it when done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

import grpc

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

__all__ = ["HistoryIterator", "Memsvc", "ReindexStream", "Stubs", "WatchStream"]


@dataclass(frozen=True, slots=True)
class Stubs:
    """The generated stubs on the client's channel, for RPCs this SDK does not wrap (character
    memory, Qdrant settings, credentials). Pass `metadata=client.metadata` to send the token."""

    memory: memory_pb2_grpc.MemoryServiceStub
    engine: engine_pb2_grpc.EngineServiceStub
    settings: settings_pb2_grpc.SettingsServiceStub
    credentials: credentials_pb2_grpc.CredentialServiceStub


class Memsvc:
    """A synchronous memsvc client.

    Args:
        target: the server's gRPC address, `host:port`.
        token: a bearer token (MEMSVC_API_TOKENS or a stored credential), sent as
            `authorization: Bearer <token>`; None on a server without authentication.
        api_key_id: the default owner (tenant) of memories, used by every call that does not
            name its own `api_key_id`.
        tls: False for plaintext (memsvc's loopback default), True for TLS with the system's
            root certificates, or `grpc.ssl_channel_credentials(...)` for your own.
        timeout: the default deadline of each call in seconds (None: no deadline). Each method
            takes `timeout=` to override it for one call.
        retry: how idempotent calls are retried on UNAVAILABLE; None turns retries off.
        options: extra gRPC channel options (they win over the SDK's).
        metadata: extra metadata sent with every call, e.g. `[("x-request-id", ...)]`.
    """

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
            self._channel = grpc.secure_channel(target, self._conn.credentials, options=self._conn.channel_options())
        else:
            self._channel = grpc.insecure_channel(target, options=self._conn.channel_options())
        self.stubs = Stubs(
            memory=memory_pb2_grpc.MemoryServiceStub(self._channel),
            engine=engine_pb2_grpc.EngineServiceStub(self._channel),
            settings=settings_pb2_grpc.SettingsServiceStub(self._channel),
            credentials=credentials_pb2_grpc.CredentialServiceStub(self._channel),
        )
        self.memories = Memories(self)
        self.settings = Settings(self)

    # ---- the connection ------------------------------------------------------------------------

    @property
    def channel(self) -> grpc.Channel:
        """The underlying channel (connectivity, or calls of your own)."""
        return self._channel

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """What every call sends: the bearer token and the `metadata` given."""
        return self._conn.metadata

    @property
    def target(self) -> str:
        return self._conn.target

    def close(self) -> None:
        """Close the channel; calls in flight are cancelled."""
        self._channel.close()

    def __enter__(self) -> Memsvc:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Memsvc({self._conn.target!r}, api_key_id={self._conn.api_key_id!r})"

    def _call(self, method: Callable[..., Any], request: Any, timeout: float | None) -> Any:
        try:
            return method(request, timeout=self._conn.deadline(timeout), metadata=self._conn.metadata)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from err

    def _owner(self, api_key_id: str | None) -> str:
        return self._conn.owner(api_key_id)

    # ---- the engine ----------------------------------------------------------------------------

    def retrieve(
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
        """The memories relevant to `query`, ranked, within a token budget (the hot path of
        an app that adds memory to a prompt itself; `inject` does the adding too).

        Args:
            query: the text to find memories for (the user's message); "" returns the most
                recent ones.
            strategy: exact | recent | semantic | hybrid; default: the server's settings.
            scope: apiKey (the owner's memories) | session (that session's only) | global.
            max_tokens: the budget, 1..16000; default: the server's settings.
            limit: at most this many memories, 1..100.
            min_score: relevance floor 0..1 (0 turns it off); default: the server's floor.
            as_of: answer with the memories as they were at this instant (a naive datetime is
                UTC): a fact a keyed add superseded later comes back as it was, with
                `valid_to` set; nothing stored after it. Not in the future; needs an apiKeyId.

        Raises:
            InvalidArgument: no apiKeyId, an unknown strategy, a budget out of range, an
                `as_of` in the future.
            PermissionDenied: a token confined to other tenants, or scope global without admin.
            FailedPrecondition: `as_of` on a server whose primary backend keeps no history.
        """
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
        return _wire.retrieve_result(self._call(self.stubs.engine.Retrieve, request, timeout))

    def inject(
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
        """A chat request body with the owner's relevant memories injected, ready to send to
        the provider: OpenAI chat completions (`{"messages"}`), OpenAI Responses
        (`{"instructions", "input"}`), Anthropic Messages (`{"system", "messages"}`) or Gemini
        generateContent (`{"systemInstruction", "contents"}`). The query is the last user turn.

        Args:
            request: the body as you would send it; it is not changed.
            provider: openai | anthropic | gemini (google, vertex) | ...: decides the format
                when the body fits it, and the role (some providers take memory only as a
                user turn); default: the body's shape decides.
            model: the model name (some models take memory only as a user turn).
            cache_safe: keep the prompt-cache prefix: put the memory just before (or into)
                the last user turn instead of first.
            system_message_must_be_first: merge into the body's own first system message.
            no_memory: skip injection for this call (the body comes back as is).
            as_of: inject the memories as they were at this instant (as `retrieve`'s).

        Returns:
            `InjectResult.request` is the body to send; `injected` False with `skipped_reason`
            when nothing was added (memory disabled, nothing relevant, no apiKeyId, ...).
        """
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
        return _wire.inject_result(self._call(self.stubs.engine.Inject, pb, timeout))

    def extract(
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
        """Find facts (preferences, decisions, patterns) in chat text by the server's rules and
        store them as memories.

        Give `text`, or a turn as `user_message` (and `assistant_message`). By default the
        server stores in the background and answers at once (`accepted`); `wait=True` answers
        after storing (`stored` rows); `dry_run=True` only reports the facts.
        """
        pb = _wire.extract_request(
            self._owner(api_key_id),
            text=text,
            user_message=user_message,
            assistant_message=assistant_message,
            session_id=session_id,
            dry_run=dry_run,
            wait=wait,
        )
        return _wire.extract_result(self._call(self.stubs.engine.Extract, pb, timeout))

    def reindex(
        self,
        *,
        force: bool = False,
        limit: int | None = None,
        target: ReindexTarget | None = None,
        attach: bool = False,
        timeout: float | None = None,
    ) -> ReindexStream:
        """Re-embed the memories that need it (after a change of embedding model), or copy
        every memory into Qdrant (`target="qdrant"`), streaming progress.

            for progress in memsvc.reindex():
                print(progress.processed, "/", progress.processed + progress.pending)

        One reindex runs per database: a second is refused with `Aborted` (reason
        REINDEX_RUNNING) unless `attach=True`, which follows the running job instead. Closing
        the stream stops listening, never the job.

        Args:
            force: mark every memory for re-embedding first.
            limit: at most this many memories in this run (None: every pending one).
            timeout: a deadline for the whole stream; default none (a reindex of a large
                store runs for minutes), unlike every other call.

        Raises (while iterating): FailedPrecondition (no embedding source or vector tier),
        Aborted (another reindex is running), InvalidArgument (target, limit).
        """
        request = _wire.reindex_request(force, limit, target, attach)
        deadline = self._conn.deadline(timeout) if timeout is not None else None
        try:
            call = self.stubs.engine.Reindex(request, timeout=deadline, metadata=self._conn.metadata)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from err
        return ReindexStream(call)


class ReindexStream(Iterator[ReindexProgress]):
    """The progress messages of one reindex, ending with the one whose `state` is done,
    failed or cancelled. Iterating raises the typed error of a refused reindex."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self.last: ReindexProgress | None = None

    def __iter__(self) -> ReindexStream:
        return self

    def __next__(self) -> ReindexProgress:
        try:
            message = next(self._call)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from err
        self.last = _wire.progress(message)
        return self.last

    def wait(self) -> ReindexProgress:
        """Read to the end; the last progress message (its `state` says how the job ended)."""
        for _ in self:
            pass
        if self.last is None:  # pragma: no cover - the server always sends a first message
            raise RuntimeError("the reindex stream ended without a message")
        return self.last

    def cancel(self) -> None:
        """Stop listening (the job itself runs to completion on the server)."""
        self._call.cancel()

    def __enter__(self) -> ReindexStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cancel()


class HistoryIterator(Iterator[HistoryEntry]):
    """Every entry of one memory's history, oldest first, fetched a page (GetMemoryHistory
    call) at a time as you iterate; `read()` gives the whole `MemoryHistory` with the
    superseded versions. `id`, `api_key_id` and `versions` are None until the first page
    arrived. Iterating raises the typed error of a refused call (NotFound, ...)."""

    def __init__(self, fetch: Callable[[str], memory_pb2.GetMemoryHistoryResponse]) -> None:
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

    def __iter__(self) -> HistoryIterator:
        return self

    def __next__(self) -> HistoryEntry:
        while (token := self._pages.next_token()) is not None:
            self._pages.take(self._fetch(token))
        entry = self._pages.pop()
        if entry is None:
            raise StopIteration
        return entry

    def read(self) -> MemoryHistory:
        """Read every page; the whole history (the entries already iterated included)."""
        for _ in self:
            pass
        return self._pages.history()


class WatchStream(Iterator[MemoryEvent]):
    """The change feed of `memories.watch`: `MemoryEvent`s in commit order, the first a
    bookmark with the position it starts after. It ends only when you close it (or at the
    end of a `stop_when_caught_up` poll, or when the connection breaks: the SDK never
    reconnects it behind your back, since only you know which events you have processed).

    `resume_token` is the token of the last event received (bookmarks included): after a
    disconnect, `watch(resume_token=...)` with the token of the last event you processed
    continues right after it, nothing missed and nothing twice. Iterating raises the typed
    error of a refused or broken stream (PermissionDenied, InvalidArgument for a token this
    server did not issue, Unavailable, ...).
    """

    def __init__(self, call: Any) -> None:
        self._call = call
        self._closed = False
        self.resume_token: str | None = None

    def __iter__(self) -> WatchStream:
        return self

    def __next__(self) -> MemoryEvent:
        if self._closed:
            raise StopIteration
        try:
            message = next(self._call)
        except grpc.RpcError as err:
            if self._closed and err.code() == grpc.StatusCode.CANCELLED:
                raise StopIteration from None
            raise from_rpc_error(err) from err
        event = _wire.memory_event(message)
        self.resume_token = event.resume_token
        return event

    def close(self) -> None:
        """End the stream: the call is cancelled and iterating stops."""
        self._closed = True
        self._call.cancel()

    cancel = close

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Memories:
    """`client.memories`: the stored memories of one owner (apiKeyId) at a time."""

    def __init__(self, client: Memsvc) -> None:
        self._client = client

    def add(
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
        """Store one memory. With a `key`, an existing memory of the same (apiKeyId, key) is
        updated in place instead (content, session, type and expiry replaced, metadata
        merged), and `created` is False: a key makes a fact current instead of piling up.

        Args:
            content: the fact, at most 32 KiB.
            type: factual (default) | episodic | procedural | semantic.
            key: e.g. "diet:vegetarian"; a durable prefix (name:, diet:, family:, pet:,
                language:, profession:, location:, preference:) keeps it from retention.
            metadata: a JSON object, at most 16 KiB serialized.
            expires_at: when it stops being retrievable (must be in the future).
            occurred_at: when the thing happened (an imported chat turn's time).
            keep: True keeps it with no age limit; None lets the server decide by key.

        Raises:
            InvalidArgument: with `field_violations` naming each bad field; nothing is stored.
        """
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
        return _wire.added(self._client._call(self._client.stubs.memory.CreateMemory, request, timeout))

    def add_many(
        self,
        items: Iterable[NewMemory | str | Mapping[str, Any]],
        *,
        api_key_id: str | None = None,
        timeout: float | None = None,
    ) -> BatchResult:
        """Store up to 1000 memories in one call and one transaction (imports; a gateway that
        extracted several facts). Each item is a `NewMemory`, a content string or a mapping of
        NewMemory's fields; its own `api_key_id` wins over the call's.

        An invalid item fails alone (its `BatchItem.error` is what `add` would have raised)
        while the valid ones are stored. The whole call fails (nothing stored) only for no
        items or more than 1000 (InvalidArgument), an apiKeyId the token may not write
        (PermissionDenied), or a full disk (ResourceExhausted).
        """
        requests: list[memory_pb2.CreateMemoryRequest] = []
        for raw in items:
            item = _wire.new_memory(raw)
            requests.append(_wire.create_request(item, self._client._owner(item.api_key_id or api_key_id)))
        request = memory_pb2.CreateMemoriesRequest(memories=requests)
        return _wire.batch(self._client._call(self._client.stubs.memory.CreateMemories, request, timeout))

    def get(self, memory_id: str, *, timeout: float | None = None) -> Memory:
        """One memory by id. Raises NotFound (also for another tenant's memory)."""
        request = memory_pb2.GetMemoryRequest(id=memory_id)
        return _wire.memory(self._client._call(self._client.stubs.memory.GetMemory, request, timeout))

    def update(
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
        """Change the given fields of one memory (None leaves a field as it is) and return it
        as stored. A changed `content` is embedded again; `keep` alone is not.

        Raises: NotFound; InvalidArgument (nothing is changed).
        """
        request = _wire.update_request(
            memory_id, content=content, type=type, key=key, metadata=metadata, keep=keep, occurred_at=occurred_at
        )
        answer = self._client._call(self._client.stubs.memory.UpdateMemory, request, timeout)
        return _wire.memory(answer.memory)

    def delete(self, memory_id: str, *, timeout: float | None = None) -> None:
        """Delete one memory and its vectors. Raises NotFound."""
        request = memory_pb2.DeleteMemoryRequest(id=memory_id)
        self._client._call(self._client.stubs.memory.DeleteMemory, request, timeout)

    def history(self, memory_id: str, *, limit: int | None = None, timeout: float | None = None) -> HistoryIterator:
        """Every change to one memory, oldest first, with the credential that made it:

            for entry in memsvc.memories.history(memory_id):
                print(entry.at, entry.event, entry.author, entry.changes)
            versions = memsvc.memories.history(memory_id).read().versions

        Iterating fetches a page at a time (`limit` entries per call, 1..1000; default the
        server's 100; `timeout` is per page); `read()` returns the whole `MemoryHistory`:
        `entries` and `versions`, the facts the memory's key superseded, each with
        `valid_from` / `valid_to`. A deleted or expired memory's history is only that entry.

        Raises (while iterating): NotFound (no such memory or history, or another tenant's),
        FailedPrecondition (the server's primary backend keeps no history).
        """
        size = _wire.history_page_size(limit)

        def fetch(token: str) -> memory_pb2.GetMemoryHistoryResponse:
            request = _wire.history_request(memory_id, size, token)
            page: memory_pb2.GetMemoryHistoryResponse = self._client._call(
                self._client.stubs.memory.GetMemoryHistory, request, timeout
            )
            return page

        return HistoryIterator(fetch)

    def watch(
        self,
        *,
        api_key_id: str | None = None,
        resume_token: str | None = None,
        stop_when_caught_up: bool = False,
        timeout: float | None = None,
    ) -> WatchStream:
        """Follow the change feed: created, updated, deleted and expired events of the
        memories of one apiKeyId as they commit, each with a `resume_token`.

            with memsvc.memories.watch(resume_token=saved) as events:
                for event in events:
                    if event.kind != "bookmark":
                        handle(event)
                    saved = event.resume_token  # after handling it

        The first event is a bookmark with the position the stream starts after; more
        bookmarks carry the position while nothing changes. The stream is never retried or
        resumed silently: when it breaks (Unavailable, ...), call `watch` again with the
        `resume_token` of the last event you handled; the new stream continues right after it,
        nothing missed and nothing twice. Closing the stream (`close()`, leaving the `with`)
        cancels the call.

        Args:
            api_key_id: the tenant to follow; default the client's. "" (or a client without
                one) follows every tenant the credential covers.
            resume_token: continue after this event; None starts at the current position.
            stop_when_caught_up: end the stream once everything committed so far was
                delivered (a poll); its last event is a bookmark to resume from.
            timeout: a deadline for the whole stream; default none, unlike every other call.

        Raises (while iterating): PermissionDenied (an apiKeyId the credential does not
        cover), InvalidArgument (a resume token this server did not issue),
        FailedPrecondition (the primary backend keeps no change feed).
        """
        request = _wire.watch_request(self._client._owner(api_key_id), resume_token, stop_when_caught_up)
        deadline = self._client._conn.deadline(timeout) if timeout is not None else None
        try:
            call = self._client.stubs.memory.WatchMemories(
                request, timeout=deadline, metadata=self._client._conn.metadata
            )
        except grpc.RpcError as err:  # pragma: no cover - a stream's errors arrive while reading
            raise from_rpc_error(err) from err
        return WatchStream(call)

    def clear(
        self,
        *,
        api_key_id: str | None = None,
        type: MemoryType | None = None,
        session_id: str | None = None,
        older_than: datetime | None = None,
        timeout: float | None = None,
    ) -> int:
        """Delete every memory of one owner matching the filters (all of them without any);
        returns how many were deleted. Raises InvalidArgument without an apiKeyId."""
        request = _wire.clear_request(self._client._owner(api_key_id), type, session_id, older_than)
        answer = self._client._call(self._client.stubs.memory.ClearMemories, request, timeout)
        deleted: int = answer.deleted_count
        return deleted

    def page(
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
        """One page of memories, newest first, with the total and stats over all that match.
        `query` is a case-insensitive substring of content or key; `limit` is 1..200."""
        request = _wire.list_request(self._client._owner(api_key_id), type, session_id, query, offset, limit)
        return _wire.page(self._client._call(self._client.stubs.memory.ListMemories, request, timeout), offset)

    def list(
        self,
        *,
        api_key_id: str | None = None,
        type: MemoryType | None = None,
        session_id: str | None = None,
        query: str | None = None,
        page_size: int = _wire.DEFAULT_PAGE_SIZE,
        timeout: float | None = None,
    ) -> Iterator[Memory]:
        """Every matching memory, newest first, fetched a page at a time as you iterate
        (`timeout` is per page).

        Pages follow by offset. A memory added while you iterate shifts the older ones down a
        place; the iterator skips what the page before already gave, so you see no memory
        twice. (A memory deleted meanwhile may shift one you have not seen onto a page you
        have: list again when you need a snapshot.)
        """
        size = _wire.page_size(page_size)
        owner = self._client._owner(api_key_id)

        def walk() -> Iterator[Memory]:
            offset, previous = 0, set[str]()
            while True:
                current = self.page(
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


class Settings:
    """`client.settings`: the server's memory engine settings (global to the server)."""

    def __init__(self, client: Memsvc) -> None:
        self._client = client

    def get(self, *, timeout: float | None = None) -> MemorySettings:
        """Every memory setting, normalized."""
        request = settings_pb2.GetMemorySettingsRequest()
        return _wire.memory_settings(
            self._client._call(self._client.stubs.settings.GetMemorySettings, request, timeout)
        )

    def update(
        self, values: Mapping[str, Any] | None = None, /, *, timeout: float | None = None, **changes: Any
    ) -> MemorySettings:
        """Change some settings and return all of them:
        `update(enabled=True, max_tokens=1500)` (or a mapping, in either spelling:
        `update({"maxTokens": 1500})`). None clears a nullable setting.

        Strict: an unknown name, a wrong type or a value out of range raises InvalidArgument
        listing every violation, and nothing is saved.
        """
        request = _wire.settings_request({**(values or {}), **changes})
        return _wire.memory_settings(
            self._client._call(self._client.stubs.settings.UpdateMemorySettings, request, timeout)
        )
