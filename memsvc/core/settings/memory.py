"""Memory settings: lenient on read, strict on write, cached.

Reads normalize whatever is stored (clamp, round, invalid enum → default, "" → null), so a
hand-edited or older row never breaks retrieval. Writes are all-or-nothing: every violation
is reported and nothing is saved when there is one. The cache is keyed by a version the
store bumps on every write, so another process's write is seen on the next read.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Generic, Protocol, TypeVar

from memsvc.core.settings import backends as backend_settings
from memsvc.kernel.errors import Violations
from memsvc.kernel.url_policy import check_resolved

STRATEGIES = ("recent", "semantic", "hybrid")
SCOPES = ("apiKey", "session", "global")
EMBEDDING_SOURCES = ("remote", "static", "transformers", "auto")
#: "local": the store's own vector index (sqlite-vec on SQLite, pgvector on PostgreSQL).
VECTOR_STORES = ("local", "qdrant", "auto")
#: Earlier names of "local" that clients may still send; read and stored as "local".
VECTOR_STORE_ALIASES = {"sqlite-vec": "local", "pgvector": "local"}
MAX_TOKENS_RANGE = (0, 16000)
# retentionDays 0 = no age limit; 1..365 = days a memory stays retrievable after it was created.
RETENTION_RANGE = (0, 365)
MAX_STRING = 2048
MAX_CONFIG_BYTES = 16 * 1024
NAMESPACE = "memory"
T = TypeVar("T")


class SettingsStore(Protocol):
    def read_settings(self, namespace: str) -> dict[str, Any]: ...

    def write_settings(self, namespace: str, values: Mapping[str, Any]) -> None: ...

    def settings_version(self) -> int: ...


@dataclass(frozen=True)
class MemorySettings:
    enabled: bool = False
    max_tokens: int = 2000
    retention_days: int = 30
    strategy: str = "hybrid"
    scope: str = "apiKey"
    skills_enabled: bool = False
    embedding_source: str = "auto"
    embedding_provider_model: str | None = None
    custom_base_url: str | None = None
    custom_model_id: str | None = None
    transformers_enabled: bool = False
    static_enabled: bool = False
    rerank_enabled: bool = False
    rerank_provider_model: str | None = None
    vector_store: str = "auto"
    primary_backend: str = backend_settings.LOCAL
    fallback_backends: tuple[str, ...] = ()
    #: Holds backend keys: never in repr; clients see `public_backend_configs()`.
    backend_configs: dict[str, Any] = field(default_factory=dict, repr=False)
    #: A new memory without a key that repeats an existing one of its owner merges into it
    #: (memsvc.core.duplicates) instead of adding a row.
    dedup_on_write: bool = True

    def to_api(self) -> dict[str, Any]:
        """Every field under its API (camelCase) name, backend keys masked."""
        out = {s.api: getattr(self, s.attr) for s in SPECS}
        out["backendConfigs"] = self.public_backend_configs()
        return out

    def public_backend_configs(self) -> dict[str, Any]:
        """backendConfigs without the keys (hasApiKey and apiKeyMasked instead)."""
        return backend_settings.masked(self.backend_configs)


# ---- field kinds: (lenient read, strict write) pairs ----

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off", ""}


def read_bool(value: Any, default: bool) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    return default


def write_bool(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be a boolean (true or false)"


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        try:
            parsed = float(value.strip())
        except ValueError:
            return None
        return parsed if math.isfinite(parsed) else None
    return None


#: A setting's kind: (lenient read of a stored value with the default, strict check of a
#: written value: the problem, or None).
Kind = tuple[Callable[[Any, Any], Any], Callable[[Any], str | None]]


def int_kind(lo: int, hi: int) -> Kind:
    def read(value: Any, default: int) -> int:
        number = _number(value)
        return default if number is None else int(min(hi, max(lo, round(number))))

    def write(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
            return "must be an integer"
        return None if lo <= value <= hi else f"must be between {lo} and {hi}"

    return read, write


def enum_kind(
    values: tuple[str, ...], aliases: Mapping[str, str] | None = None, *, writable_aliases: bool = False
) -> Kind:
    """One of `values`. A stored alias reads as the value it names; a written one is accepted
    only when `writable_aliases` (an earlier name clients may still send, not a retired one)."""
    aliases = aliases or {}
    accepted = (*values, *aliases) if writable_aliases else values

    def read(value: Any, default: str) -> str:
        value = aliases.get(value, value) if isinstance(value, str) else value
        return value if value in values else default

    def write(value: Any) -> str | None:
        return None if isinstance(value, str) and value in accepted else f"must be one of {', '.join(values)}"

    return read, write


def _nullable_str_kind(check: Callable[[str], str | None] | None = None) -> Kind:
    def read(value: Any, default: str | None) -> str | None:
        if isinstance(value, str):
            return value.strip() or None
        return default

    def write(value: Any) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            return "must be a string or null"
        if len(value) > MAX_STRING:
            return f"must be at most {MAX_STRING} characters"
        return check(value.strip()) if check else None

    return read, write


def _provider_model(value: str) -> str | None:
    provider, _, model = value.partition("/")
    return None if provider and model else 'must look like "provider/model"'


def _backend_name_kind() -> Kind:
    """A backend name; whether it is defined is checked with backendConfigs (see
    `normalize` and `validate_update`)."""

    def read(value: Any, default: str) -> str:
        return backend_settings.canonical(value) if backend_settings.is_name(value) else default

    return read, backend_settings.name_problem


def _backend_list_kind() -> Kind:
    def read(value: Any, default: tuple[str, ...]) -> tuple[str, ...]:
        if not isinstance(value, list):
            return default
        return tuple(dict.fromkeys(backend_settings.canonical(v) for v in value if backend_settings.is_name(v)))

    return read, backend_settings.names_problem


def _object_kind() -> Kind:
    def read(value: Any, default: dict[str, Any]) -> dict[str, Any]:
        return dict(value) if isinstance(value, dict) else dict(default)

    def write(value: Any) -> str | None:
        if not isinstance(value, dict):
            return "must be an object"
        try:
            serialized = json.dumps(value, separators=(",", ":"), allow_nan=False)
        except ValueError:
            return "numbers must be finite (no NaN or Infinity)"
        if len(serialized) > MAX_CONFIG_BYTES:
            return f"must serialize to at most {MAX_CONFIG_BYTES} bytes"
        return None

    return read, write


@dataclass(frozen=True)
class Spec:
    api: str
    attr: str
    read: Callable[[Any, Any], Any]
    write: Callable[[Any], str | None]


def spec(api: str, attr: str, kind: Kind) -> Spec:
    """A field from its API name, attribute name and (lenient read, strict write) kind."""
    read, write = kind
    return Spec(api, attr, read, write)


def read_specs(specs: tuple[Spec, ...], cls: type[T], stored: Mapping[str, Any]) -> T:
    """Lenient read shared by every settings namespace: each stored field through its
    kind's reader, the class default when absent or unreadable."""
    defaults = cls()
    return cls(
        **{
            s.attr: s.read(stored[s.api], getattr(defaults, s.attr)) if s.api in stored else getattr(defaults, s.attr)
            for s in specs
        }
    )


_BOOL = (read_bool, write_bool)
SPECS: tuple[Spec, ...] = (
    spec("enabled", "enabled", _BOOL),
    spec("maxTokens", "max_tokens", int_kind(*MAX_TOKENS_RANGE)),
    spec("retentionDays", "retention_days", int_kind(*RETENTION_RANGE)),
    spec("strategy", "strategy", enum_kind(STRATEGIES, {"exact": "recent"})),
    spec("scope", "scope", enum_kind(SCOPES)),
    spec("skillsEnabled", "skills_enabled", _BOOL),
    spec("embeddingSource", "embedding_source", enum_kind(EMBEDDING_SOURCES)),
    spec("embeddingProviderModel", "embedding_provider_model", _nullable_str_kind(_provider_model)),
    spec("customBaseUrl", "custom_base_url", _nullable_str_kind(lambda url: check_resolved(url, unresolvable_ok=True))),
    spec("customModelId", "custom_model_id", _nullable_str_kind()),
    spec("transformersEnabled", "transformers_enabled", _BOOL),
    spec("staticEnabled", "static_enabled", _BOOL),
    spec("rerankEnabled", "rerank_enabled", _BOOL),
    spec("rerankProviderModel", "rerank_provider_model", _nullable_str_kind(_provider_model)),
    spec("vectorStore", "vector_store", enum_kind(VECTOR_STORES, VECTOR_STORE_ALIASES, writable_aliases=True)),
    spec("primaryBackend", "primary_backend", _backend_name_kind()),
    spec("fallbackBackends", "fallback_backends", _backend_list_kind()),
    spec("backendConfigs", "backend_configs", _object_kind()),
    spec("dedupOnWrite", "dedup_on_write", _BOOL),
)
_BY_API = {s.api: s for s in SPECS}


def normalize(stored: Mapping[str, Any]) -> MemorySettings:
    """Lenient: whatever is stored becomes a valid MemorySettings; a primary or fallback
    that backendConfigs does not define is dropped (the primary becomes the built-in store)."""
    settings = read_specs(SPECS, MemorySettings, stored)
    known = {backend_settings.LOCAL, *settings.backend_configs}
    return replace(
        settings,
        primary_backend=settings.primary_backend if settings.primary_backend in known else backend_settings.LOCAL,
        fallback_backends=tuple(f for f in settings.fallback_backends if f in known),
    )


def validate_update(patch: Mapping[str, Any], current: MemorySettings | None = None) -> dict[str, Any]:
    """Strict: every violation at once; returns the values to store ("" → None). The
    backend fields are checked together, against `current` for those the patch leaves out,
    and a backend entry without apiKey keeps the key `current` holds."""
    current = current or MemorySettings()
    v = Violations()
    if not patch:
        v.add("settings", "nothing to update")
    for name, value in patch.items():
        known = _BY_API.get(name)
        if known is None:
            v.add(name, "unknown setting")
            continue
        problem = known.write(value)
        if problem:
            v.add(name, problem)
    if not any(item.field in ("primaryBackend", "fallbackBackends", "backendConfigs") for item in v.items):
        backend_settings.check(
            v.add, patch, current.backend_configs, current.primary_backend, current.fallback_backends
        )
    v.raise_if_any()
    out: dict[str, Any] = {name: _stored(name, value) for name, value in patch.items()}
    if "backendConfigs" in out:
        out["backendConfigs"] = backend_settings.with_stored_keys(out["backendConfigs"], current.backend_configs)
    return out


def _stored(name: str, value: Any) -> Any:
    """A valid written value as it is stored: "" as None, an earlier name as today's."""
    if value == "":
        return None
    if name == "vectorStore":
        return VECTOR_STORE_ALIASES.get(value, value)
    if name == "primaryBackend":
        return backend_settings.canonical(value)
    if name == "fallbackBackends":
        return [backend_settings.canonical(v) for v in value]
    return value


class NamespaceSettings(Generic[T]):
    """One namespace of the settings store, normalized on read and cached by the store's
    version (so another process's write is seen on the next read). Memory and Qdrant
    settings share it; each brings its own normalize and validate."""

    def __init__(
        self,
        store: SettingsStore,
        namespace: str,
        normalize_fn: Callable[[Mapping[str, Any]], T],
        validate_fn: Callable[[Mapping[str, Any]], dict[str, Any]],
    ):
        self._store = store
        self._namespace = namespace
        self._normalize = normalize_fn
        self._validate = validate_fn
        self._lock = threading.Lock()
        self._cached: tuple[int, T] | None = None

    def get(self) -> T:
        version = self._store.settings_version()
        cached = self._cached
        if cached is not None and cached[0] == version:
            return cached[1]
        with self._lock:
            current = self._normalize(self._store.read_settings(self._namespace))
            self._cached = (version, current)
            return current

    def save(self, patch: Mapping[str, Any]) -> T:
        """Validate strictly (nothing saved on any violation), store, return the new value."""
        values = self._validate(patch)
        with self._lock:
            self._store.write_settings(self._namespace, values)
            self._cached = None
        return self.get()


class Settings(NamespaceSettings[MemorySettings]):
    """Cached access to the memory settings of one store."""

    def __init__(self, store: SettingsStore):
        super().__init__(store, NAMESPACE, normalize, lambda patch: validate_update(patch, self.get()))

    def update(self, patch: Mapping[str, Any]) -> MemorySettings:
        return self.save(patch)

    def override(self, **changes: Any) -> MemorySettings:
        """The current settings with some fields replaced (per-request options)."""
        return replace(self.get(), **changes)


def field_names() -> list[str]:
    return [f.name for f in fields(MemorySettings)]
