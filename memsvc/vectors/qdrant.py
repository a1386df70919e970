"""Tier 2: Qdrant, opt-in, through qdrant-client.

One code path for a Qdrant server (host, port, api-key header) and for qdrant-client's
embedded local mode (`QdrantClient(path=folder)` or ":memory:"): every operation goes through
the same `QdrantClient` methods. Only two things differ: the health probe (a server answers
`GET /readyz`; a local store is probed by listing its collections) and a lock around the
local engine, which is not thread-safe.

The collection is created on first use with Cosine distance and the dimension of the first
real embedding (never a configured size). Point id = the memory's UUID; payload
`{kind: "omniroute_memory", memoryId, apiKeyId, sessionId, key, content, metadata,
createdAtUnix, expiresAtUnix}` plus `memoryRowId` (ours: the integer memory_id, so hits map to
the SQLite row without another lookup). `createdAtUnix` is floor(seconds), `expiresAtUnix`
ceil(seconds) or null for "never": filters err by under a second towards including a
memory, and the engine's SQLite load re-applies the exact scope.

Scores: Qdrant's Cosine score is the cosine similarity (higher is better); hits report it
as `score` and `distance = 1 - score`.

A collection made for one embedding model refuses another model's vectors: before an upsert
or search the collection's configured size is compared with the vector and a mismatch raises
`DimensionMismatch` (the engine then falls back to sqlite-vec and reports the reason). The
collection is never recreated automatically (switch models by using a new
collection name).

Quantization (`none | int8 | binary`): int8 = scalar quantization (quantile 0.99, always in
RAM), binary = binary quantization; searches then pass `rescore: true` so the full vectors
re-rank the quantized candidates. The requested mode is also recorded in the collection's
metadata, because local mode accepts but does not keep quantization settings (it always
searches exactly); `collection_info()["quantization"]` reads the server's config when present,
else that record.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
import warnings
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from memsvc import outbound
from memsvc.core.settings.qdrant import (
    DEFAULT_COLLECTION,
    DEFAULT_HOST,
    DEFAULT_PORT,
    MEMORY_LOCAL,
    QUANTIZATIONS,
    QdrantSettings,
)
from memsvc.kernel.models import SearchScope, utcnow
from memsvc.kernel.url_policy import check_url
from memsvc.kernel.vector_index import (
    DeleteResult,
    DimensionMismatch,
    VectorError,
    VectorHit,
    VectorRow,
    VectorUnavailable,
    as_vector,
)

log = logging.getLogger("memsvc.vectors.qdrant")

KIND = "omniroute_memory"
TOP_K_RANGE = (1, 20)
DEFAULT_TOP_K = 20
_META_KEY = "memsvc"
_PAYLOAD_INDEXES = (
    ("kind", qm.PayloadSchemaType.KEYWORD),
    ("apiKeyId", qm.PayloadSchemaType.KEYWORD),
    ("sessionId", qm.PayloadSchemaType.KEYWORD),
    ("memoryRowId", qm.PayloadSchemaType.INTEGER),
    ("createdAtUnix", qm.PayloadSchemaType.INTEGER),
    ("expiresAtUnix", qm.PayloadSchemaType.INTEGER),
)
_HIT_FIELDS = ["memoryId", "memoryRowId"]

# Local mode says, once per process, that payload indexes and search params have no effect
# there (it searches exactly). True, and expected: keep it off stderr (logs are JSON lines).
warnings.filterwarnings("ignore", message="Local mode performs exact", category=UserWarning)
warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant", category=UserWarning)


def clamp_top_k(k: int | None) -> int:
    """topK is clamped to [1, 20] everywhere: the search route, the schema and the code."""
    if k is None:
        return DEFAULT_TOP_K
    return max(TOP_K_RANGE[0], min(TOP_K_RANGE[1], int(k)))


def quantization_config(mode: str) -> qm.ScalarQuantization | qm.BinaryQuantization | None:
    """The collection config for a quantization mode (None = full precision)."""
    if mode == "int8":
        return qm.ScalarQuantization(
            scalar=qm.ScalarQuantizationConfig(type=qm.ScalarType.INT8, quantile=0.99, always_ram=True)
        )
    if mode == "binary":
        return qm.BinaryQuantization(binary=qm.BinaryQuantizationConfig(always_ram=True))
    if mode == "none":
        return None
    raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}")


def search_params(mode: str) -> qm.SearchParams | None:
    """Quantized collections re-score their candidates with the full vectors."""
    return qm.SearchParams(quantization=qm.QuantizationSearchParams(rescore=True)) if mode != "none" else None


def _mode_of(config: Any) -> str | None:
    if isinstance(config, qm.ScalarQuantization):
        return "int8"
    if isinstance(config, qm.BinaryQuantization):
        return "binary"
    return None


def unix_floor(dt: datetime) -> int:
    return math.floor(_aware(dt).timestamp())


def unix_ceil(dt: datetime) -> int:
    return math.ceil(_aware(dt).timestamp())


def _aware(dt: datetime) -> datetime:
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt


def _point_id(value: Any) -> str:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError as exc:
        raise VectorError("Qdrant point ids are memory UUIDs; got a malformed id") from exc


def _describe(exc: BaseException) -> str:
    """A short error text for the fallback reason (the API key is never part of it: it
    travels in a header, never in a URL or message)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


@dataclass(frozen=True)
class QdrantPoint:
    """A search result with its payload (for the SearchQdrant test route)."""

    id: str
    memory_id: int | None
    score: float
    payload: dict[str, Any]


class QdrantIndex:
    """The Qdrant tier over one `QdrantClient` and one collection."""

    name = "qdrant"

    def __init__(
        self,
        client: QdrantClient,
        collection: str = DEFAULT_COLLECTION,
        *,
        quantization: str = "none",
        server_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 5.0,
    ) -> None:
        if quantization not in QUANTIZATIONS:
            raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}")
        self._client = client
        self.collection = collection
        self.quantization = quantization
        #: None in local mode; the server's base URL otherwise (for GET /readyz).
        self.server_url = server_url
        self._api_key = api_key
        self.timeout = float(timeout)
        self.local = server_url is None
        self._lock = threading.RLock() if self.local else nullcontext()
        self._dim: int | None = None
        #: GET /readyz: policy-checked and pinned, no proxy or .netrc (memsvc.outbound).
        self._probe = None if self.local else outbound.make_client(self.timeout)

    @property
    def client(self) -> QdrantClient:
        return self._client

    def __repr__(self) -> str:  # never the key
        where = self.server_url or "local"
        return f"QdrantIndex(collection={self.collection!r}, at={where!r}, quantization={self.quantization!r})"

    # -- construction --------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        api_key: str | None = None,
        path: str | Path | None = None,
        collection: str = DEFAULT_COLLECTION,
        quantization: str = "none",
        timeout: float = 5.0,
    ) -> QdrantIndex:
        """A server at host:port (host may be an http(s) URL), or — when `path` is given —
        the embedded local store in that folder (":memory:" for a throwaway one)."""
        if path is not None:
            client = QdrantClient(location=MEMORY_LOCAL) if str(path) == MEMORY_LOCAL else QdrantClient(path=str(path))
            return cls(client, collection, quantization=quantization, timeout=timeout)
        url = QdrantSettings(host=host, port=port).server_url()
        problem = check_url(url)
        if problem:
            raise VectorUnavailable(f"qdrant host {problem}")
        # qdrant-client hands unknown keyword arguments to its httpx client: the same
        # policy-checked, pinned connections as every other outbound call (memsvc.outbound).
        client = QdrantClient(
            url=url,
            api_key=api_key or None,
            timeout=max(1, math.ceil(timeout)),
            check_compatibility=False,
            **outbound.client_options(),
        )
        return cls(client, collection, quantization=quantization, server_url=url, api_key=api_key, timeout=timeout)

    @classmethod
    def from_settings(cls, settings: QdrantSettings, data_dir: str | Path, *, timeout: float = 5.0) -> QdrantIndex:
        """From the stored settings; `localPath` is a folder inside `data_dir` (checked again
        here, after following links: a value stored before that rule, or a link planted
        since, is refused). A server host is checked against the URL policy, statically here
        and after DNS on every connection: the API key must never be sent to a link-local
        or cloud metadata address."""
        try:
            local = settings.resolved_local_path(data_dir)
        except ValueError as exc:
            raise VectorUnavailable(f"qdrant localPath {exc}") from None
        if local is not None and local != MEMORY_LOCAL:
            Path(local).mkdir(parents=True, exist_ok=True)
        return cls.connect(
            host=settings.host,
            port=settings.port,
            api_key=settings.api_key,
            path=local,
            collection=settings.collection,
            quantization=settings.quantization,
            timeout=timeout,
        )

    def close(self) -> None:
        """Release the client (a local folder's lock too)."""
        with self._lock:
            try:
                self._client.close()
                if self._probe is not None:
                    self._probe.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                log.warning("qdrant.close_failed", exc_info=True)

    # -- collection ----------------------------------------------------------------------

    def _read_dim(self) -> int | None:
        """The collection's configured vector size (None when it does not exist)."""
        with self._lock:
            if not self._client.collection_exists(self.collection):
                self._dim = None
                return None
            info = self._client.get_collection(self.collection)
        vectors = info.config.params.vectors
        if not isinstance(vectors, qm.VectorParams):
            raise VectorError(f"collection {self.collection!r} uses named vectors; memsvc needs one unnamed vector")
        self._dim = int(vectors.size)
        return self._dim

    def _dimension(self) -> int | None:
        return self._dim if self._dim is not None else self._read_dim()

    def _create(self, dim: int, signature: str | None = None) -> bool:
        """Create the collection; False when someone else created it first."""
        meta = {_META_KEY: {"quantization": self.quantization, **({"signature": signature} if signature else {})}}
        with self._lock:
            try:
                self._client.create_collection(
                    self.collection,
                    vectors_config=qm.VectorParams(size=dim, distance=qm.Distance.COSINE),
                    quantization_config=quantization_config(self.quantization),
                    metadata=meta,
                )
            except Exception:
                if self._client.collection_exists(self.collection):
                    return False
                raise
            for field_name, schema in _PAYLOAD_INDEXES:
                try:
                    self._client.create_payload_index(self.collection, field_name, schema)
                except Exception:  # noqa: BLE001 - an index only speeds filters up
                    log.warning("qdrant.payload_index_failed", extra={"field": field_name})
        self._dim = dim
        return True

    def ensure(self, signature: str, dim: int) -> bool:
        """Create the collection (Cosine, `dim`) when missing → True. An existing collection
        of another size raises DimensionMismatch (it is never recreated automatically); one
        with another quantization is updated to this index's mode (best effort)."""
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise VectorError("dimension must be a positive integer")
        try:
            current = self._read_dim()
            if current is None:
                return self._create(dim, signature)
        except VectorError:
            raise
        except Exception as exc:  # noqa: BLE001 - a probe reports, it does not raise
            raise VectorUnavailable(f"qdrant: {_describe(exc)}") from exc
        if current != dim:
            raise DimensionMismatch(current, dim, f"qdrant collection {self.collection!r}")
        self._sync_quantization()
        return False

    def _sync_quantization(self) -> None:
        try:
            info = self.collection_info()
            if info.get("quantization") == self.quantization:
                return
            config = quantization_config(self.quantization) or qm.Disabled.DISABLED
            with self._lock:
                self._client.update_collection(
                    self.collection,
                    quantization_config=config,
                    metadata={_META_KEY: {"quantization": self.quantization}},
                )
        except Exception:  # noqa: BLE001 - searches still work with the old mode
            log.warning("qdrant.quantization_update_failed", extra={"collection": self.collection})

    def collection_info(self) -> dict[str, Any]:
        """{exists, size, distance, quantization, points_count, signature} read back from
        Qdrant."""
        with self._lock:
            if not self._client.collection_exists(self.collection):
                return {
                    "exists": False,
                    "size": None,
                    "distance": None,
                    "quantization": None,
                    "points_count": 0,
                    "signature": None,
                }
            info = self._client.get_collection(self.collection)
        vectors = info.config.params.vectors
        recorded = (info.config.metadata or {}).get(_META_KEY, {}) if isinstance(info.config.metadata, dict) else {}
        quant = _mode_of(info.config.quantization_config)
        if quant is None and isinstance(vectors, qm.VectorParams):
            quant = _mode_of(vectors.quantization_config)
        if quant is None:
            quant = recorded.get("quantization", "none")
        return {
            "exists": True,
            "size": vectors.size if isinstance(vectors, qm.VectorParams) else None,
            "distance": vectors.distance.value if isinstance(vectors, qm.VectorParams) else None,
            "quantization": quant,
            "points_count": int(info.points_count or 0),
            "signature": recorded.get("signature"),
        }

    # -- writes --------------------------------------------------------------------------

    @staticmethod
    def payload(row: VectorRow) -> dict[str, Any]:
        return {
            "kind": KIND,
            "memoryId": row.id,
            "memoryRowId": int(row.memory_id),
            "apiKeyId": row.api_key_id,
            "sessionId": row.session_id,
            "key": row.key,
            "content": row.content,
            "metadata": row.metadata,
            "createdAtUnix": unix_floor(row.created_at),
            "expiresAtUnix": unix_ceil(row.expires_at) if row.expires_at is not None else None,
            "keep": row.keep,
        }

    def upsert(self, rows: Sequence[VectorRow]) -> int:
        """Insert or replace points; creates the collection from the first vector's
        dimension when it does not exist yet. Returns how many points were written."""
        if not rows:
            return 0
        vectors = [as_vector(r.vector) for r in rows]
        points = [
            qm.PointStruct(id=_point_id(r.id), vector=v.tolist(), payload=self.payload(r))
            for r, v in zip(rows, vectors)
        ]
        try:
            dim = self._dimension()
            if dim is None:
                self._create(int(vectors[0].shape[0]))
                dim = self._dimension()
            if dim is None:
                raise VectorUnavailable(f"qdrant collection {self.collection!r} has no vector size once created")
        except VectorError:
            raise
        except Exception as exc:
            raise VectorUnavailable(f"qdrant: {_describe(exc)}") from exc
        for v in vectors:
            if v.shape[0] != dim:
                raise DimensionMismatch(int(dim), int(v.shape[0]), f"qdrant collection {self.collection!r}")
        try:
            with self._lock:
                self._client.upsert(self.collection, points=points, wait=True)
        except Exception as exc:
            raise self._after_failure(exc, int(vectors[0].shape[0])) from exc
        return len(points)

    def set_keep(self, memories: Sequence[Any]) -> None:
        """Bring the payload `keep` of these memories' points (objects with `.id` and
        `.keep`) up to date without rewriting their vectors: the search filter and cleanup
        read it to spare a kept point its age. A memory without a point is skipped."""
        if not memories or not self._exists():
            return
        for keep in (True, False):
            ids = [m.id for m in memories if bool(m.keep) is keep]
            if not ids:
                continue
            flt = qm.Filter(
                must=[
                    qm.FieldCondition(key="kind", match=qm.MatchValue(value=KIND)),
                    qm.FieldCondition(key="memoryId", match=qm.MatchAny(any=ids)),
                ]
            )
            try:
                with self._lock:
                    self._client.set_payload(
                        self.collection, payload={"keep": keep}, points=qm.FilterSelector(filter=flt), wait=True
                    )
            except Exception as exc:
                raise VectorUnavailable(f"qdrant: {_describe(exc)}") from exc

    def _after_failure(self, exc: BaseException, got: int) -> VectorError:
        """A failed call: re-read the collection (it may have been recreated with another
        size) so a mismatch is reported as one."""
        self._dim = None
        try:
            dim = self._read_dim()
        except Exception:
            dim = None
        if dim is not None and dim != got:
            return DimensionMismatch(dim, got, f"qdrant collection {self.collection!r}")
        return VectorUnavailable(f"qdrant: {_describe(exc)}")

    def _keys(self, ids: Iterable[Any]) -> tuple[list[str], list[int]]:
        uuids: list[str] = []
        row_ids: list[int] = []
        for item in ids:
            if hasattr(item, "id"):
                uuids.append(_point_id(item.id))
            elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                row_ids.append(int(item))
            else:
                uuids.append(_point_id(item))
        return list(dict.fromkeys(uuids)), list(dict.fromkeys(row_ids))

    def delete(self, ids: Sequence[Any], *, raise_errors: bool = False) -> DeleteResult:
        """Remove the points of these memories (UUIDs, objects with `.id`, or integer
        memory ids via the payload). Best effort: a failure is returned in
        `DeleteResult.error` (and logged without contents) unless `raise_errors`."""
        try:
            uuids, row_ids = self._keys(ids)
            if (not uuids and not row_ids) or not self._exists():
                return DeleteResult(0)
            deleted = 0
            with self._lock:
                if uuids:
                    deleted += len(
                        self._client.retrieve(self.collection, ids=uuids, with_payload=False, with_vectors=False)
                    )
                    self._client.delete(self.collection, points_selector=qm.PointIdsList(points=list(uuids)), wait=True)
                if row_ids:
                    flt = qm.Filter(must=[qm.FieldCondition(key="memoryRowId", match=qm.MatchAny(any=row_ids))])
                    deleted += self._client.count(self.collection, count_filter=flt, exact=True).count
                    self._client.delete(self.collection, points_selector=qm.FilterSelector(filter=flt), wait=True)
            return DeleteResult(deleted)
        except Exception as exc:
            error = f"qdrant delete failed: {_describe(exc)}"
            log.warning("qdrant.delete_failed", extra={"error": error})
            if raise_errors:
                raise VectorUnavailable(error) from exc
            return DeleteResult(0, error)

    def cleanup(self, retention_days: int, *, now: datetime | None = None, api_key_id: str | None = None) -> int:
        """Delete points that expired (`expiresAtUnix < now`) or fell out of retention
        (`createdAtUnix < now - retentionDays`), counting them first with the same filter;
        returns that count. retention_days is clamped to [0, 365]; 0 = no age limit (expired
        points only). A kept point (payload keep) is never deleted for its age."""
        days = max(0, min(365, int(retention_days)))
        now = _aware(now or utcnow())
        now_s = now.timestamp()
        must: list[Any] = [qm.FieldCondition(key="kind", match=qm.MatchValue(value=KIND))]
        if api_key_id is not None:
            must.append(qm.FieldCondition(key="apiKeyId", match=qm.MatchValue(value=api_key_id)))
        gone: list[Any] = [qm.FieldCondition(key="expiresAtUnix", range=qm.Range(lt=now_s))]
        if days:
            cutoff = (now - timedelta(days=days)).timestamp()
            gone.append(
                qm.Filter(
                    must=[qm.FieldCondition(key="createdAtUnix", range=qm.Range(lt=cutoff))],
                    must_not=[qm.FieldCondition(key="keep", match=qm.MatchValue(value=True))],
                )
            )
        flt = qm.Filter(must=must, should=gone)
        try:
            if not self._exists():
                return 0
            with self._lock:
                found = self._client.count(self.collection, count_filter=flt, exact=True).count
                if found:
                    self._client.delete(self.collection, points_selector=qm.FilterSelector(filter=flt), wait=True)
            return int(found)
        except Exception as exc:
            raise VectorUnavailable(f"qdrant cleanup failed: {_describe(exc)}") from exc

    # -- reads ---------------------------------------------------------------------------

    def _exists(self) -> bool:
        if self._dim is not None:
            return True
        return self._read_dim() is not None

    @staticmethod
    def scope_filter(scope: SearchScope) -> qm.Filter:
        """kind, owner (unless global), session (when session-scoped), not expired, within
        retention — all inside the search."""
        must: list[Any] = [qm.FieldCondition(key="kind", match=qm.MatchValue(value=KIND))]
        if scope.api_key_id is not None:
            must.append(qm.FieldCondition(key="apiKeyId", match=qm.MatchValue(value=scope.api_key_id)))
        if scope.session_only:
            if scope.session_id:
                must.append(qm.FieldCondition(key="sessionId", match=qm.MatchValue(value=scope.session_id)))
            else:
                must.append(qm.IsNullCondition(is_null=qm.PayloadField(key="sessionId")))
        must.append(
            qm.Filter(
                should=[
                    qm.IsEmptyCondition(is_empty=qm.PayloadField(key="expiresAtUnix")),
                    qm.FieldCondition(key="expiresAtUnix", range=qm.Range(gt=_aware(scope.now).timestamp())),
                ]
            )
        )
        if scope.created_after is not None:
            cutoff = math.floor(_aware(scope.created_after).timestamp())
            must.append(
                qm.Filter(
                    should=[
                        qm.FieldCondition(key="createdAtUnix", range=qm.Range(gte=cutoff)),
                        qm.FieldCondition(key="keep", match=qm.MatchValue(value=True)),
                    ]
                )
            )
        return qm.Filter(must=must)

    def search_points(
        self,
        scope: SearchScope,
        vector: Sequence[float] | np.ndarray,
        k: int | None = None,
        *,
        with_payload: bool = True,
    ) -> list[QdrantPoint]:
        """Nearest points in scope with their payload, best first; k clamped to [1, 20].
        No collection yet → []."""
        vec = as_vector(vector)
        limit = clamp_top_k(k)
        try:
            dim = self._dimension()
        except VectorError:
            raise
        except Exception as exc:
            raise VectorUnavailable(f"qdrant: {_describe(exc)}") from exc
        if dim is None:
            return []
        if vec.shape[0] != dim:
            raise DimensionMismatch(dim, int(vec.shape[0]), f"qdrant collection {self.collection!r}")
        try:
            with self._lock:
                result = self._client.query_points(
                    self.collection,
                    query=vec.tolist(),
                    query_filter=self.scope_filter(scope),
                    search_params=search_params(self.quantization),
                    limit=limit,
                    with_payload=True if with_payload else _HIT_FIELDS,
                    with_vectors=False,
                )
        except Exception as exc:
            raise self._after_failure(exc, int(vec.shape[0])) from exc
        out: list[QdrantPoint] = []
        for p in result.points:
            payload = dict(p.payload or {})
            row_id = payload.get("memoryRowId")
            out.append(
                QdrantPoint(
                    id=str(p.id),
                    memory_id=int(row_id) if isinstance(row_id, int) else None,
                    score=float(p.score),
                    payload=payload,
                )
            )
        return out

    def search(self, scope: SearchScope, vector: Sequence[float] | np.ndarray, k: int | None = None) -> list[VectorHit]:
        """VectorHits: score = cosine similarity, distance = 1 - score. Points without a
        memoryRowId (not written by memsvc) report memory_id -1."""
        return [
            VectorHit(
                memory_id=p.memory_id if p.memory_id is not None else -1, id=p.id, distance=1.0 - p.score, score=p.score
            )
            for p in self.search_points(scope, vector, k, with_payload=False)
        ]

    def count(self) -> int:
        """Memory points in the collection (0 when it does not exist)."""
        try:
            if not self._exists():
                return 0
            with self._lock:
                return int(
                    self._client.count(
                        self.collection,
                        exact=True,
                        count_filter=qm.Filter(must=[qm.FieldCondition(key="kind", match=qm.MatchValue(value=KIND))]),
                    ).count
                )
        except Exception as exc:
            raise VectorUnavailable(f"qdrant: {_describe(exc)}") from exc

    def health(self) -> dict[str, Any]:
        """Readiness with latency: a server answers GET /readyz (with the api-key header);
        a local store lists its collections. {ok, latency_ms, error, collection_exists,
        points_count, mode}."""
        out: dict[str, Any] = {
            "ok": False,
            "latency_ms": None,
            "error": None,
            "collection_exists": False,
            "points_count": 0,
            "mode": "local" if self.local else "server",
        }
        started = time.perf_counter()
        try:
            if self._probe is None:  # local mode: no server to probe
                with self._lock:
                    self._client.get_collections()
            else:
                headers = {"api-key": self._api_key} if self._api_key else {}
                response = self._probe.get(f"{self.server_url}/readyz", headers=headers)
                if response.status_code != 200:
                    raise VectorUnavailable(f"GET /readyz answered HTTP {response.status_code}")
            out["latency_ms"] = round((time.perf_counter() - started) * 1000, 3)
            info = self.collection_info()
            out.update(ok=True, collection_exists=info["exists"], points_count=info["points_count"])
        except Exception as exc:
            if out["latency_ms"] is None:
                out["latency_ms"] = round((time.perf_counter() - started) * 1000, 3)
            out["error"] = _describe(exc)
        return out
