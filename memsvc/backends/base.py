"""What every pluggable backend shares: one policy-checked HTTP caller, the memory JSON shape
most memory APIs (and memsvc's own REST API) use, and a base class with the operations that
can be written once over the others (clear = list + delete of what the filter matches).

Every outbound URL passes the same URL policy as remote embeddings: the static check here,
before the call, on the URL actually requested, and the after-DNS check on the very address
connected to (memsvc.outbound). Errors name the host only, never the path (it may carry an
id or a token), the key or a body."""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from memsvc import outbound
from memsvc.core.backend_manager import readable
from memsvc.kernel.backend import BackendError, BackendHealth
from memsvc.kernel.models import (
    DEFAULT_MEMORY_TYPE,
    MEMORY_TYPES,
    Memory,
    MemoryFilter,
    MemoryPage,
    MemoryPatch,
    NewMemory,
)
from memsvc.kernel.url_policy import check_url, host_of, join

DEFAULT_TIMEOUT_S = 30.0
#: clear() deletes page by page; a store this large is cleared in several calls.
CLEAR_PAGE = 100
CLEAR_MAX = 100_000


@dataclass(frozen=True)
class Connection:
    """Where and how to call one backend. `headers` are sent on every request (after the
    defaults, so they may override Accept); `api_key` becomes `Authorization: Bearer`."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S
    #: PEM text of a CA (or self-signed certificate) to trust instead of the system store.
    ca_certificate: str | None = field(default=None, repr=False)


class HttpCaller:
    """One httpx client per backend: no redirects, no proxies or .netrc from the
    environment, connections only to addresses the URL policy accepts."""

    def __init__(self, connection: Connection):
        self.connection = connection
        options = outbound.client_options()
        if connection.ca_certificate:
            context = ssl.create_default_context(cadata=connection.ca_certificate)
            options["transport"] = outbound.pinned_transport(verify=context)
        self._client = httpx.Client(
            timeout=httpx.Timeout(connection.timeout_s), headers={"User-Agent": "memsvc"}, **options
        )
        self.host = host_of(connection.base_url)

    def close(self) -> None:
        self._client.close()

    def url(self, path: str) -> str:
        return (
            join(self.connection.base_url, path)
            if path not in ("", "/")
            else self.connection.base_url.rstrip("/") + "/"
        )

    def call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        content: str | None = None,
        content_type: str | None = None,
        accept: str = "application/json",
    ) -> httpx.Response:
        """One request; raises BackendError for anything but an HTTP answer."""
        url = self.url(path)
        problem = check_url(url)
        if problem:
            raise BackendError(f"the backend URL {problem}")
        headers = {"Accept": accept}
        if self.connection.api_key:
            headers["Authorization"] = f"Bearer {self.connection.api_key}"
        headers.update(self.connection.headers)
        body: bytes | None = None
        if json_body is not None:
            body, headers["Content-Type"] = json.dumps(json_body).encode("utf-8"), "application/json"
        elif content is not None:
            body, headers["Content-Type"] = content.encode("utf-8"), content_type or "text/plain"
        try:
            return self._client.request(method, url, params=_query(params), content=body, headers=headers)
        except outbound.URLRefused as exc:
            raise BackendError(f"the backend URL {exc.problem}") from None
        except httpx.TimeoutException:
            raise BackendError(f"{self.host} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise BackendError(f"could not reach {self.host} ({type(exc).__name__})") from None
        except Exception as exc:  # noqa: BLE001 - a remote store may fail in any way; callers handle BackendError
            raise BackendError(f"could not call {self.host} ({type(exc).__name__})") from None

    def failed(self, response: httpx.Response) -> BackendError:
        if response.status_code in (401, 403):
            return BackendError(f"{self.host} refused the credentials (HTTP {response.status_code})")
        if response.is_redirect:
            return BackendError(
                f"{self.host} answered with a redirect (HTTP {response.status_code}); redirects are not followed"
            )
        return BackendError(f"{self.host} answered HTTP {response.status_code}")

    def expect(self, response: httpx.Response) -> httpx.Response:
        """The response when it is a 2xx, else the BackendError saying what it was."""
        if not 200 <= response.status_code < 300:
            raise self.failed(response)
        return response

    def json(self, response: httpx.Response) -> Any:
        self.expect(response)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise BackendError(f"{self.host} answered with something that is not JSON") from None

    def probe(self, method: str, path: str, **kwargs: Any) -> tuple[BackendHealth, Any]:
        """A health request: (ok/latency/error, the decoded JSON answer of a 2xx, or None)."""
        started = time.perf_counter()
        try:
            response = self.call(method, path, **kwargs)
        except BackendError as exc:
            return BackendHealth(False, _ms(started), str(exc)), None
        if not 200 <= response.status_code < 300:
            return BackendHealth(False, _ms(started), str(self.failed(response))), None
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = None
        return BackendHealth(True, _ms(started)), body


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _query(params: Mapping[str, Any] | None) -> dict[str, str] | None:
    """Only parameters with a value are sent: an API that validates its query string must
    not see empty ones."""
    if not params:
        return None
    return {
        k: (json.dumps(v) if isinstance(v, (dict, list)) else str(v).lower() if isinstance(v, bool) else str(v))
        for k, v in params.items()
        if v is not None and v != ""
    }


def path_segment(value: str) -> str:
    """An id as one URL path segment ('/', '?', '#' and '..' cannot escape it)."""
    return quote(value, safe="")


# ---- the common memory JSON shape (memsvc's REST API uses it too) ----


def to_iso(dt: datetime | None) -> str | None:
    return None if dt is None else dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_time(value: Any) -> datetime | None:
    """ISO 8601 text, or a Unix time in seconds or milliseconds; None when unreadable."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        seconds = value / 1000 if abs(value) > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def new_memory_json(memory: NewMemory) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiKeyId": memory.api_key_id,
        "type": memory.type,
        "content": memory.content,
        "metadata": dict(memory.metadata),
    }
    if memory.session_id:
        out["sessionId"] = memory.session_id
    if memory.key:
        out["key"] = memory.key
    if memory.expires_at:
        out["expiresAt"] = to_iso(memory.expires_at)
    if memory.keep is not None:  # unsaid: a new memory is not kept, an upsert leaves it as it was
        out["keep"] = memory.keep
    if memory.occurred_at:
        out["occurredAt"] = to_iso(memory.occurred_at)
    return out


def patch_json(patch: MemoryPatch) -> dict[str, Any]:
    out: dict[str, Any] = {
        name: getattr(patch, name)
        for name in ("type", "key", "content", "metadata", "keep")
        if getattr(patch, name) is not None
    }
    if patch.occurred_at is not None:
        out["occurredAt"] = to_iso(patch.occurred_at)
    return out


def _text(obj: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        value = obj.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def memory_from_json(obj: Any, owner: str = "") -> Memory:
    """A memory from the common JSON shape (camelCase or snake_case names). `owner` stands
    in when the answer does not say whose memory it is (a search scoped to one owner)."""
    if not isinstance(obj, Mapping) or not _text(obj, "id") or not isinstance(obj.get("content"), str):
        raise BackendError("the backend answered with a memory that has no id or content")
    created = parse_time(obj.get("createdAt", obj.get("created_at"))) or datetime.now(UTC)
    kind = obj.get("type")
    metadata = obj.get("metadata")
    return Memory(
        id=str(obj["id"]),
        memory_id=0,
        api_key_id=_text(obj, "apiKeyId", "api_key_id") or owner,
        session_id=_text(obj, "sessionId", "session_id"),
        type=kind if kind in MEMORY_TYPES else DEFAULT_MEMORY_TYPE,
        key=_text(obj, "key"),
        content=obj["content"],
        metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
        created_at=created,
        updated_at=parse_time(obj.get("updatedAt", obj.get("updated_at"))) or created,
        expires_at=parse_time(obj.get("expiresAt", obj.get("expires_at"))),
        access_count=count if isinstance(count := obj.get("accessCount"), int) else 0,
        keep=obj.get("keep") is True,
        occurred_at=parse_time(obj.get("occurredAt", obj.get("occurred_at"))),
    )


def unwrap_list(body: Any, *names: str) -> list[Any]:
    """The list in an answer that is a list, or holds one under the first of `names` present."""
    if isinstance(body, list):
        return body
    if isinstance(body, Mapping):
        for name in names:
            if isinstance(body.get(name), list):
                return body[name]
    raise BackendError("the backend answered with something that is not a list of memories")


def page_of(memories: list[Memory], total: int | None = None, by_type: Mapping[str, int] | None = None) -> MemoryPage:
    counts: dict[str, int] = dict(by_type) if by_type else {}
    if not by_type:
        for m in memories:
            counts[m.type] = counts.get(m.type, 0) + 1
    return MemoryPage(
        memories, len(memories) if total is None else total, counts, sum(-(-len(m.content) // 4) for m in memories)
    )


def matches(memory: Memory, flt: MemoryFilter) -> bool:
    """The whole filter applied here, for stores whose own query cannot express all of it
    and for remote APIs that may ignore part of what they are sent. Its owner and session
    part is the one owner rule every read through a backend passes (`readable`)."""
    if not readable(memory, flt):
        return False
    if flt.type and memory.type != flt.type:
        return False
    if flt.created_before and memory.created_at >= flt.created_before:
        return False
    if flt.q:
        q = flt.q.lower()
        return q in memory.content.lower() or q in (memory.key or "").lower()
    return True


# ---- the write rules, for stores that keep whole documents (a note, a page) ----


def fresh(memory: NewMemory, memory_id: str, now: datetime) -> Memory:
    return Memory(
        id=memory_id,
        memory_id=0,
        api_key_id=memory.api_key_id,
        session_id=memory.session_id,
        type=memory.type,
        key=memory.key,
        content=memory.content,
        metadata=dict(memory.metadata),
        created_at=now,
        updated_at=now,
        expires_at=memory.expires_at,
        keep=bool(memory.keep),
        occurred_at=memory.occurred_at,
    )


def upserted(existing: Memory, memory: NewMemory, now: datetime) -> Memory:
    """A create with the key of an existing memory: content, session, type and expiry
    replaced, metadata merged shallowly (new keys win); id and creation time kept, and keep
    and the time it happened too unless the create says them."""
    return replace(
        existing,
        session_id=memory.session_id,
        type=memory.type,
        content=memory.content,
        metadata={**existing.metadata, **memory.metadata},
        expires_at=memory.expires_at,
        updated_at=now,
        keep=existing.keep if memory.keep is None else memory.keep,
        occurred_at=memory.occurred_at or existing.occurred_at,
    )


def patched(existing: Memory, patch: MemoryPatch, now: datetime) -> Memory:
    """An update: fields the patch sets replace the stored ones (metadata as a whole)."""
    return replace(
        existing,
        type=patch.type or existing.type,
        key=existing.key if patch.key is None else (patch.key or None),
        content=existing.content if patch.content is None else patch.content,
        metadata=existing.metadata if patch.metadata is None else dict(patch.metadata),
        updated_at=now,
        keep=existing.keep if patch.keep is None else patch.keep,
        occurred_at=patch.occurred_at or existing.occurred_at,
    )


def newest_first(memories: list[Memory]) -> list[Memory]:
    return sorted(memories, key=lambda m: (m.created_at, m.id), reverse=True)


class RemoteBackend:
    """The small base class of every pluggable backend: a name, a kind, an HTTP caller, and
    the operations that need nothing store-specific."""

    kind = "remote"

    def __init__(self, name: str, connection: Connection):
        self.name = name
        self.http = HttpCaller(connection)

    if TYPE_CHECKING:  # each backend probes its own service

        def health(self) -> BackendHealth: ...

    def initialize(self) -> None:
        health = self.health()
        if not health.ok:
            raise BackendError(f"backend {self.name!r} is not usable: {health.error}")

    def shutdown(self) -> None:
        self.http.close()

    def clear(self, flt: MemoryFilter) -> int:
        """Every memory the filter matches deleted, page by page, and nothing else: a row
        the listing answers is deleted only when `matches` accepts it, since a remote API
        may ignore part of the filter it is sent (apiKeyId, sessionId, type, the age) and
        answer other tenants' rows. The rows left stay ahead in the listing, so each next
        page starts after them; a page that brings no row not seen before ends the clear
        (a remote that ignores the offset cannot make it loop)."""
        deleted, kept = 0, 0
        seen: set[str] = set()
        while len(seen) < CLEAR_MAX:
            page = self.list(flt, CLEAR_PAGE, kept)  # type: ignore[attr-defined]
            new = [m for m in page.data if m.id not in seen]
            if not new:
                break
            for m in new:
                seen.add(m.id)
                if not matches(m, flt):
                    kept += 1
                elif self.delete(m.id):  # type: ignore[attr-defined]
                    deleted += 1
        return deleted
