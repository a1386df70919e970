"""memsvc as LangGraph's long-term memory: `MemsvcStore`, a `langgraph.store.base.BaseStore`.

    from memsvc_client import Memsvc
    from memsvc_client.langgraph import MemsvcStore

    store = MemsvcStore(Memsvc("127.0.0.1:50051", api_key_id="user-42"))
    store.put(("memories",), "diet", {"text": "I am vegetarian"})
    store.search(("memories",), query="what do I eat?")
    graph = builder.compile(store=store)

Install with the extra: `pip install "memsvc-client[langgraph]"`.

How LangGraph's items live in memsvc (one memory per item):

- **Tenant.** By default every namespace lives inside one memsvc owner (apiKeyId): the
  store's `api_key_id`, or the client's default. With `tenant_label=i`, label `i` of each
  namespace names the owner instead (`tenant_label=0`: `("user-42", "memories")` is stored
  for apiKeyId `user-42`), so memsvc's tenant isolation, tokens confined to tenants, and its
  retrieval and injection for that user see what the graph stored. Then every operation must
  name that label: a search or a namespace listing over several tenants is refused
  (`InvalidNamespaceError`), memsvc has no call that reads across owners.
- **Session.** With `session_label=j`, label `j` (e.g. a thread or conversation id) becomes
  the memory's memsvc sessionId; a search whose prefix names it reads that session only.
- **Key.** The memory's `key` is `langgraph:` + the JSON array of the namespace labels and the
  item key (`langgraph:["memories","diet"]`): unique per owner, so a `put` of an existing
  (namespace, key) updates that memory in place (memsvc's upsert on key; `created_at` stays).
  Namespace and key together must fit memsvc's 512 characters for a key.
- **Value.** The value's exact JSON is kept in the memory's metadata
  (`{"langgraph": {"namespace": [...], "key": ..., "value": "<JSON text>", ...}}`; at most
  16 KiB in all), the text memsvc searches, embeds and may inject is its `content`: the
  value's fields named by `index=` on the put, else the store's `fields` (default `["$"]`,
  the whole value as JSON). `index=False` keeps the item out of query searches (memsvc still
  holds it as one of the owner's memories).
- Items are stored with `keep=True` (retention never hides them) and type `factual`; memsvc
  memories without the `langgraph:` envelope (written by other clients) are never returned.

Searching: without `query`, the items under the prefix that match `filter` (exact values,
nested dicts, lists, and `$eq $ne $gt $gte $lt $lte`, as InMemoryStore), newest first (by
creation: an update keeps an item's place). With a `query`, memsvc's retrieval (the server's
strategy: hybrid keyword + vector ranking when it has an embedding source, keyword otherwise)
ranks the owner's memories, at most 100 within its largest token budget, and the store keeps
those under the prefix that match the filter, best first, with `score` (memsvc's relevance:
keyword points or a fused rank score, higher is better; not a cosine). While memory is disabled on the server (`settings.update(enabled=True)`
turns it on) retrieval does not run and a query search lists as if it had no query, as a
LangGraph store without an index does.

What each operation costs: memsvc has no read by key, so `get` and `delete` list the owner's
memories by key (one call, a substring match on the server); a search without a query reads
pages of 200 until it has `offset + limit` items; one with a query is one retrieval plus a read
of each hit kept; `list_namespaces` reads every item of the owner (or of the session) under the
prefix's leading labels; the puts of a batch are one call per 1000.

TTL (`supports_ttl`): a put's `ttl` (minutes; or `ttl_config["default_ttl"]`) becomes the
memory's `expires_at`. Expired items are never returned (memsvc's retrieval already skips
them) and `sweep_ttl()` deletes them. Reads do not refresh a TTL: memsvc moves an expiry only
by writing the memory again, which would race a concurrent put of a new value, so an item
expires `ttl` minutes after its last put, and `refresh_ttl` / `refresh_on_read` are ignored.

`batch` runs on the synchronous client, `abatch` on the asyncio one (or, without it, `batch`
in a worker thread). Within one batch the reads (get, search, list_namespaces) see the store
as it was before the batch's writes, and of several puts of one (namespace, key) the last
wins, as in InMemoryStore. A refused call raises the SDK's typed error: `InvalidArgument` for
a value or key over memsvc's limits (that item alone; the batch's other writes are applied),
`PermissionDenied` for a tenant the token may not address (the batch's writes as a whole),
`Unauthenticated`, `Unavailable`, ...
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
        validate_op_namespace,
    )
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError(f"{exc}: install the SDK's extra, pip install 'memsvc-client[langgraph]'") from exc

from memsvc_client.aio import AsyncMemsvc
from memsvc_client.client import Memsvc
from memsvc_client.errors import MemsvcError, NotFound
from memsvc_client.types import Memory, MemoryPage, MemoryType, NewMemory, RetrieveResult, Strategy

__all__ = ["KEY_PREFIX", "MemsvcStore"]

#: Every memory this store writes has a key starting with this.
KEY_PREFIX = "langgraph:"
#: The metadata field holding the item (namespace, key, value JSON, index, ttl).
ENVELOPE = "langgraph"

# memsvc's limits (memsvc/core/memories.py): a key, a listing's `q`, content, one page, one batch.
MAX_KEY_CHARS = 512
MAX_QUERY_CHARS = 1024
MAX_CONTENT_BYTES = 32 * 1024
PAGE_SIZE = 200
MAX_BATCH = 1000
# Retrieval's largest answer: 100 memories within 16000 tokens.
RETRIEVE_LIMIT = 100
RETRIEVE_BUDGET = 16000
# How many memories a query search fetches at once (concurrently on the asyncio client).
FETCH_CHUNK = 16

T = TypeVar("T")


# ---- the plans: what to ask memsvc, free of any client -----------------------------------------
#
# Each operation is a generator that yields the calls it needs (one `_Call`, or a tuple of them
# to run together) and receives their results; `_run_sync` drives it with a `Memsvc`,
# `_run_async` with an `AsyncMemsvc`. A failed single call is thrown into the plan as the SDK's
# typed error; in a tuple, each failure takes the place of its result.


@dataclass(frozen=True, slots=True)
class _Call:
    method: str  # "retrieve", or a method of `client.memories`
    kwargs: dict[str, Any]


_Step = _Call | tuple[_Call, ...]
_Plan = Generator[_Step, Any, T]


def _bound(client: Memsvc | AsyncMemsvc, call: _Call) -> Callable[..., Any]:
    target: Any = client if call.method == "retrieve" else client.memories
    method: Callable[..., Any] = getattr(target, call.method)
    return method


def _run_sync(client: Memsvc, plan: _Plan[T]) -> T:
    reply: Any = None
    error: MemsvcError | None = None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result
        reply, error = None, None
        if isinstance(step, tuple):
            outcomes: list[Any] = []
            for call in step:
                try:
                    outcomes.append(_bound(client, call)(**call.kwargs))
                except MemsvcError as exc:
                    outcomes.append(exc)
            reply = outcomes
        else:
            try:
                reply = _bound(client, step)(**step.kwargs)
            except MemsvcError as exc:
                error = exc


async def _run_async(client: AsyncMemsvc, plan: _Plan[T]) -> T:
    async def outcome(call: _Call) -> Any:
        try:
            return await _bound(client, call)(**call.kwargs)
        except MemsvcError as exc:
            return exc

    reply: Any = None
    error: MemsvcError | None = None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result
        reply, error = None, None
        if isinstance(step, tuple):
            reply = list(await asyncio.gather(*(outcome(call) for call in step)))
        else:
            try:
                reply = await _bound(client, step)(**step.kwargs)
            except MemsvcError as exc:
                error = exc


# ---- the mapping -------------------------------------------------------------------------------


def memory_key(namespace: tuple[str, ...], key: str) -> str:
    """The memsvc key of one item: `langgraph:` + the JSON array of labels and key."""
    return KEY_PREFIX + json.dumps([*namespace, key], ensure_ascii=False, separators=(",", ":"))


def _prefix_hint(labels: Sequence[str]) -> str:
    """A listing's `q` that every key under `labels` contains (the start of its JSON array).
    A case-insensitive substring on the server: it narrows, the exact test is ours."""
    hint = KEY_PREFIX + "[" + "".join(json.dumps(label, ensure_ascii=False) + "," for label in labels)
    return hint[:MAX_QUERY_CHARS]


def _utf8_prefix(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


@dataclass(frozen=True, slots=True)
class _Record:
    """A memory this store wrote, decoded."""

    memory: Memory
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] = field(hash=False)
    indexed: bool

    def expired(self, now: datetime) -> bool:
        return self.memory.expires_at is not None and self.memory.expires_at <= now

    def item(self) -> Item:
        return Item(
            value=self.value,
            key=self.key,
            namespace=self.namespace,
            created_at=self.memory.created_at,
            updated_at=self.memory.updated_at,
        )

    def search_item(self, score: float | None = None) -> SearchItem:
        return SearchItem(
            namespace=self.namespace,
            key=self.key,
            value=self.value,
            created_at=self.memory.created_at,
            updated_at=self.memory.updated_at,
            score=score,
        )


def _decode(memory: Memory) -> _Record | None:
    """The item a memory holds, or None for a memory this store did not write."""
    labels = _decode_key(memory.key)
    envelope = memory.metadata.get(ENVELOPE)
    if labels is None or not isinstance(envelope, dict) or not isinstance(envelope.get("value"), str):
        return None
    try:
        value = json.loads(envelope["value"])
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return _Record(memory, labels[:-1], labels[-1], value, envelope.get("index") is not False)


def _decode_key(key: str | None) -> tuple[str, ...] | None:
    if not key or not key.startswith(KEY_PREFIX):
        return None
    try:
        labels = json.loads(key[len(KEY_PREFIX) :])
    except ValueError:
        return None
    if not isinstance(labels, list) or len(labels) < 2 or not all(isinstance(x, str) for x in labels):
        return None
    return tuple(labels)


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    labels = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want == "*" or want == have for have, want in zip(labels, path, strict=True))


def _filter_ok(value: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    """InMemoryStore's filter: every field equal (dicts recursively, lists item by item), or
    satisfying its operators ($eq $ne $gt $gte $lt $lte)."""
    return not wanted or all(_compare(value.get(name), expected) for name, expected in wanted.items())


def _compare(actual: Any, expected: Any) -> bool:
    if isinstance(expected, dict):
        if any(str(k).startswith("$") for k in expected):
            return all(_operator(actual, op, operand) for op, operand in expected.items())
        return isinstance(actual, dict) and all(_compare(actual.get(k), v) for k, v in expected.items())
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(expected)
            and all(_compare(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return bool(actual == expected)


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(actual == operand)
    if op == "$ne":
        return bool(actual != operand)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            left, right = float(actual), float(operand)
        except (TypeError, ValueError):
            return False
        return {"$gt": left > right, "$gte": left >= right, "$lt": left < right, "$lte": left <= right}[op]
    raise ValueError(f"Unsupported operator: {op}")


# ---- the store ---------------------------------------------------------------------------------


class MemsvcStore(BaseStore):
    """A LangGraph store whose items are memsvc memories (see the module's docstring for the
    mapping).

    Args:
        client: the synchronous client `batch` (put, get, search, ...) uses.
        aclient: the asyncio client `abatch` (aput, aget, asearch, ...) uses; without it,
            `abatch` runs `batch` in a worker thread. Give at least one of the two.
        api_key_id: the owner of every item (default: the clients' default apiKeyId), unless
            `tenant_label` is set.
        tenant_label: which namespace label names the owner (apiKeyId) instead.
        session_label: which namespace label, if any, becomes the memory's sessionId.
        fields: the JSON paths of a value whose text becomes the memory's content, for puts
            that pass no `index` (LangGraph's path syntax: "text", "a.b", "items[*].name";
            "$" is the whole value as JSON).
        ttl_config: LangGraph's TTL configuration; `default_ttl` (minutes) applies to puts
            that pass no `ttl`. Reads never refresh a TTL (see the module's docstring).
        strategy: memsvc's retrieval strategy for query searches (default: the server's).
        min_score: memsvc's relevance floor for query searches (default: the server's).
        memory_type: the memsvc type of the memories written (default: factual).
    """

    supports_ttl: bool = True

    def __init__(
        self,
        client: Memsvc | None = None,
        *,
        aclient: AsyncMemsvc | None = None,
        api_key_id: str | None = None,
        tenant_label: int | None = None,
        session_label: int | None = None,
        fields: Sequence[str] = ("$",),
        ttl_config: TTLConfig | None = None,
        strategy: Strategy | None = None,
        min_score: float | None = None,
        memory_type: MemoryType | None = None,
    ) -> None:
        if client is None and aclient is None:
            raise ValueError("MemsvcStore needs a client (Memsvc), an aclient (AsyncMemsvc), or both")
        for name, label in (("tenant_label", tenant_label), ("session_label", session_label)):
            if label is not None and label < 0:
                raise ValueError(f"{name} must be a label index >= 0")
        if tenant_label is not None and tenant_label == session_label:
            raise ValueError("tenant_label and session_label must be different labels")
        if tenant_label is not None and api_key_id is not None:
            raise ValueError("give api_key_id (one owner) or tenant_label (the owner per namespace), not both")
        if not fields:
            raise ValueError("fields must name at least one path ('$' for the whole value)")
        self.client = client
        self.aclient = aclient
        self.api_key_id = api_key_id
        self.tenant_label = tenant_label
        self.session_label = session_label
        self.fields = tuple(fields)
        self.ttl_config = ttl_config
        self.strategy: Strategy | None = strategy
        self.min_score = min_score
        self.memory_type: MemoryType | None = memory_type

    # ---- BaseStore -----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations on the synchronous client; results in the order of `ops`."""
        if self.client is None:
            raise RuntimeError("MemsvcStore.batch needs the synchronous client: MemsvcStore(Memsvc(...))")
        return _run_sync(self.client, self._plan_batch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations on the asyncio client (or `batch` in a worker thread)."""
        ops = list(ops)
        if self.aclient is None:
            return await asyncio.to_thread(self.batch, ops)
        return await _run_async(self.aclient, self._plan_batch(ops))

    def sweep_ttl(self, namespace_prefix: tuple[str, ...] = ()) -> int:
        """Delete the expired items under `namespace_prefix` (all of the store's owner by
        default; with `tenant_label`, the prefix must name the tenant); how many were deleted."""
        if self.client is None:
            raise RuntimeError("MemsvcStore.sweep_ttl needs the synchronous client")
        return _run_sync(self.client, self._plan_sweep(namespace_prefix))

    async def asweep_ttl(self, namespace_prefix: tuple[str, ...] = ()) -> int:
        """`sweep_ttl` on the asyncio client."""
        if self.aclient is None:
            return await asyncio.to_thread(self.sweep_ttl, namespace_prefix)
        return await _run_async(self.aclient, self._plan_sweep(namespace_prefix))

    # ---- where an item lives -------------------------------------------------------------------

    def _owner(self, labels: Sequence[str], what: str) -> str | None:
        """The apiKeyId for a namespace (or a prefix): None means the clients' default."""
        if self.tenant_label is None:
            return self.api_key_id
        if len(labels) <= self.tenant_label or labels[self.tenant_label] == "*":
            raise InvalidNamespaceError(
                f"MemsvcStore(tenant_label={self.tenant_label}) stores each namespace for the apiKeyId in its "
                f"label {self.tenant_label}: {what} {tuple(labels)} must name it (memsvc reads one tenant at a time)"
            )
        return labels[self.tenant_label]

    def _session(self, labels: Sequence[str]) -> str | None:
        if self.session_label is None or len(labels) <= self.session_label or labels[self.session_label] == "*":
            return None
        return labels[self.session_label]

    def _new_memory(self, op: PutOp, now: datetime) -> NewMemory:
        assert op.value is not None
        value = dict(op.value)
        value_json = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        paths: Sequence[str] = self.fields if op.index is None or op.index is False else op.index
        texts = [text for path in paths for text in get_text_at_path(value, path) if text.strip()]
        content = "\n".join(texts) if texts else get_text_at_path(value, "$")[0]
        envelope: dict[str, Any] = {"namespace": list(op.namespace), "key": op.key, "value": value_json}
        if op.index is False:
            envelope["index"] = False
        if op.ttl is not None:
            envelope["ttl"] = op.ttl
        return NewMemory(
            content=_utf8_prefix(content, MAX_CONTENT_BYTES),
            type=self.memory_type,
            key=memory_key(op.namespace, op.key),
            session_id=self._session(op.namespace),
            metadata={ENVELOPE: envelope},
            expires_at=now + timedelta(minutes=op.ttl) if op.ttl is not None else None,
            keep=True,
            api_key_id=self._owner(op.namespace, "the namespace"),
        )

    # ---- plans ---------------------------------------------------------------------------------

    def _plan_batch(self, ops: list[Op]) -> _Plan[list[Result]]:
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, PutOp) and not op.namespace:
                raise InvalidNamespaceError("Namespace cannot be empty.")
            if isinstance(op, GetOp | PutOp):
                self._owner(op.namespace, "the namespace")
            elif isinstance(op, SearchOp):
                self._owner(op.namespace_prefix, "the search prefix")
            elif isinstance(op, ListNamespacesOp):
                self._listing_scope(op)
            else:
                raise TypeError(f"Unknown operation type: {type(op)}")
        now = datetime.now(UTC)
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append((yield from self._plan_get(op, now)))
            elif isinstance(op, SearchOp):
                results.append((yield from self._plan_search(op, now)))
            elif isinstance(op, ListNamespacesOp):
                results.append((yield from self._plan_list_namespaces(op, now)))
            elif isinstance(op, PutOp):
                puts.pop((op.namespace, op.key), None)  # the last put of a key wins
                puts[(op.namespace, op.key)] = op
                results.append(None)
        if puts:
            yield from self._plan_puts(list(puts.values()), now)
        return results

    def _plan_find(self, owner: str | None, key: str) -> _Plan[Memory | None]:
        """The owner's memory whose key is `key`: a listing by `q` (a substring of content or
        key), then the exact key."""
        if len(key) > MAX_KEY_CHARS:
            return None  # memsvc never stored it
        offset = 0
        while True:
            page: MemoryPage = yield _Call(
                "page", {"api_key_id": owner, "query": key, "offset": offset, "limit": PAGE_SIZE}
            )
            for memory in page.memories:
                if memory.key == key:
                    return memory
            offset += len(page.memories)
            if not page.memories or offset >= page.total:
                return None

    def _plan_get(self, op: GetOp, now: datetime) -> _Plan[Item | None]:
        memory = yield from self._plan_find(
            self._owner(op.namespace, "the namespace"), memory_key(op.namespace, op.key)
        )
        record = _decode(memory) if memory is not None else None
        if record is None or record.expired(now):
            return None
        return record.item()

    def _plan_scan(
        self,
        owner: str | None,
        session: str | None,
        labels: Sequence[str],
        accept: Callable[[_Record], bool],
        stop_after: int | None = None,
    ) -> _Plan[list[_Record]]:
        """The owner's (the session's) items whose key starts with `labels` and that `accept`
        takes, newest first, page by page: at most `stop_after` of them."""
        kept: list[_Record] = []
        offset, previous = 0, set[str]()
        hint = _prefix_hint(labels)
        while stop_after is None or len(kept) < stop_after:
            page: MemoryPage = yield _Call(
                "page",
                {"api_key_id": owner, "session_id": session, "query": hint, "offset": offset, "limit": PAGE_SIZE},
            )
            for memory in page.memories:
                if memory.id in previous:  # shifted down a place by a memory added meanwhile
                    continue
                record = _decode(memory)
                if record is not None and record.namespace[: len(labels)] == tuple(labels) and accept(record):
                    kept.append(record)
            previous = {m.id for m in page.memories}
            offset += len(page.memories)
            if not page.memories or offset >= page.total:
                break
        return kept if stop_after is None else kept[:stop_after]

    def _plan_search(self, op: SearchOp, now: datetime) -> _Plan[list[SearchItem]]:
        prefix = tuple(op.namespace_prefix)
        owner, session = self._owner(prefix, "the search prefix"), self._session(prefix)
        if op.limit <= 0 or op.offset < 0:
            return []
        wanted = op.offset + op.limit

        def listing() -> _Plan[list[SearchItem]]:
            records = yield from self._plan_scan(
                owner,
                session,
                prefix,
                lambda r: not r.expired(now) and _filter_ok(r.value, op.filter),
                stop_after=wanted,
            )
            return [r.search_item() for r in records[op.offset :]]

        if not op.query:
            return (yield from listing())
        ranked: RetrieveResult = yield _Call(
            "retrieve",
            {
                "query": op.query,
                "api_key_id": owner,
                "session_id": session,
                "scope": "session" if session is not None else "apiKey",
                "strategy": self.strategy,
                "limit": RETRIEVE_LIMIT,
                "max_tokens": RETRIEVE_BUDGET,
                "min_score": self.min_score,
            },
        )
        if ranked.resolution.strategy_used == "none":
            # Retrieval did not run (memory is disabled on the server, or no backend answered):
            # the query is ignored, as by a LangGraph store without an index.
            return (yield from listing())
        hits = [hit for hit in ranked.memories if (labels := _decode_key(hit.key)) and labels[: len(prefix)] == prefix]
        found: list[SearchItem] = []
        for start in range(0, len(hits), FETCH_CHUNK):
            chunk = hits[start : start + FETCH_CHUNK]
            memories = yield tuple(_Call("get", {"memory_id": hit.id}) for hit in chunk)
            for hit, memory in zip(chunk, memories, strict=True):
                if isinstance(memory, NotFound):
                    continue  # deleted since the ranking
                if isinstance(memory, MemsvcError):
                    raise memory
                record = _decode(memory)
                if record and record.indexed and not record.expired(now) and _filter_ok(record.value, op.filter):
                    found.append(record.search_item(hit.score))
            if len(found) >= wanted:
                break
        return found[op.offset : wanted]

    def _listing_scope(self, op: ListNamespacesOp) -> tuple[str | None, str | None, tuple[str, ...]]:
        """(owner, session, leading labels) a namespace listing reads, from its prefix."""
        prefix: tuple[str, ...] = ()
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix" and len(condition.path) > len(prefix):
                prefix = tuple(condition.path)
        owner = self._owner(prefix, "a namespace listing's prefix")
        leading = prefix[: prefix.index("*")] if "*" in prefix else prefix
        return owner, self._session(prefix), leading

    def _plan_list_namespaces(self, op: ListNamespacesOp, now: datetime) -> _Plan[list[tuple[str, ...]]]:
        owner, session, leading = self._listing_scope(op)
        records = yield from self._plan_scan(owner, session, leading, lambda r: not r.expired(now))
        conditions = op.match_conditions or ()
        namespaces = {r.namespace for r in records if all(_matches(c, r.namespace) for c in conditions)}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    def _plan_puts(self, puts: list[PutOp], now: datetime) -> _Plan[None]:
        first_error: MemsvcError | None = None
        writes = [self._new_memory(op, now) for op in puts if op.value is not None]
        for start in range(0, len(writes), MAX_BATCH):
            try:
                stored = yield _Call("add_many", {"items": writes[start : start + MAX_BATCH]})
            except MemsvcError as exc:
                first_error = first_error or exc
                continue
            first_error = first_error or next((item.error for item in stored.items if item.error), None)
        for op in puts:
            if op.value is None:
                try:
                    yield from self._plan_delete(self._owner(op.namespace, "the namespace"), op.namespace, op.key)
                except MemsvcError as exc:
                    first_error = first_error or exc
        if first_error is not None:
            raise first_error
        return None

    def _plan_delete(self, owner: str | None, namespace: tuple[str, ...], key: str) -> _Plan[None]:
        memory = yield from self._plan_find(owner, memory_key(namespace, key))
        if memory is not None:
            try:
                yield _Call("delete", {"memory_id": memory.id})
            except NotFound:
                pass  # deleted meanwhile: what was asked
        return None

    def _plan_sweep(self, prefix: tuple[str, ...]) -> _Plan[int]:
        now = datetime.now(UTC)
        expired = yield from self._plan_scan(
            self._owner(prefix, "the prefix"), self._session(prefix), prefix, lambda r: r.expired(now)
        )
        deleted = 0
        for start in range(0, len(expired), FETCH_CHUNK):
            outcomes = yield tuple(
                _Call("delete", {"memory_id": r.memory.id}) for r in expired[start : start + FETCH_CHUNK]
            )
            for outcome in outcomes:
                if isinstance(outcome, MemsvcError) and not isinstance(outcome, NotFound):
                    raise outcome
                deleted += outcome is None
        return deleted
