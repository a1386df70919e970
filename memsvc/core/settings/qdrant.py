"""Qdrant settings (GetQdrantSettings / UpdateQdrantSettings),
in the pattern of `memsvc.core.settings.memory`: lenient on read, strict on write (every violation
listed, nothing saved when there is one), stored through a `SettingsStore` under the
namespace "qdrant", cached by the store's version.

The API key is write-only: it is stored, used for the `api-key` header, and never returned
or logged — GET shows `hasApiKey` and `apiKeyMasked` ("***" + its last 4 characters); a PUT
with `apiKey: ""` (or null) removes it; a PUT without `apiKey` leaves it alone, unless it
changes the server the key is sent to (`host`, `port`): then the key must be given again
(`memsvc.core.settings.backends.moved_secret_problem`, the one rule for stored secrets).

`localPath` (qdrant-client's embedded store) is always a folder inside the data directory:
a relative path is taken under it, an absolute one must lie inside it once links are
followed, and `~` and `..` are refused — an API-writable setting must not make the server
create or write files anywhere else. It is checked on write and again on use.

Enabling Qdrant makes it the engine's vector store (memory setting `vectorStore = "qdrant"`),
disabling resets that to "auto" (the reference's #5597): `memory_settings_patch()` returns the
memory-settings change to apply alongside, which the caller passes to
`memsvc.core.settings.memory.Settings.update`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import urlsplit

from memsvc.core.settings.backends import moved_secret_problem
from memsvc.core.settings.memory import (
    Kind,
    NamespaceSettings,
    SettingsStore,
    Spec,
    enum_kind,
    int_kind,
    read_bool,
    read_specs,
    spec,
    write_bool,
)
from memsvc.kernel.errors import PreconditionError, ValidationError, Violations
from memsvc.kernel.url_policy import check_url

NAMESPACE = "qdrant"
QUANTIZATIONS = ("none", "int8", "binary")
PORT_RANGE = (1, 65535)
DEFAULT_HOST = "localhost"
DEFAULT_PORT = 6333
DEFAULT_COLLECTION = "omniroute_memory"
DEFAULT_EMBEDDING_MODEL = "openai/text-embedding-3-small"
MEMORY_LOCAL = ":memory:"
#: Response-only fields: accepted in a PUT (so a client may send back what GET returned)
#: and ignored.
READ_ONLY = ("hasApiKey", "apiKeyMasked")

_COLLECTION = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
_HOST_FORMAT = "must be a host name or IP address (or an http(s) URL)"
_CONTROL = re.compile(r"[\x00-\x20\x7f]")
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
_MAX_KEY = 1024
_MAX_MODEL = 256
_MAX_PATH = 4096


@dataclass(frozen=True)
class QdrantSettings:
    enabled: bool = False
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    collection: str = DEFAULT_COLLECTION
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    quantization: str = "none"
    local_path: str | None = None
    #: Never in repr, never in to_api().
    api_key: str | None = field(default=None, repr=False)

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key)

    def to_api(self) -> dict[str, Any]:
        """What GET returns: every field under its API name, the key only masked."""
        out = {s.api: getattr(self, s.attr) for s in SPECS if s.api != "apiKey"}
        out["hasApiKey"] = self.has_api_key
        out["apiKeyMasked"] = mask_api_key(self.api_key)
        return out

    def resolved_local_path(self, data_dir: str | Path) -> str | None:
        """The embedded Qdrant folder inside the data dir (links followed), ":memory:" for
        an in-process throwaway store, None when a server is configured. Raises ValueError
        (the reason) for a folder outside the data dir."""
        if self.local_path is None:
            return None
        if self.local_path == MEMORY_LOCAL:
            return MEMORY_LOCAL
        problem = _local_path_problem(self.local_path)
        if problem:
            raise ValueError(problem)
        return str(confine_local_path(self.local_path, data_dir))

    def server_url(self) -> str:
        """http(s)://host:port of the server (host may itself be an http(s) URL)."""
        if "://" in self.host:
            parts = urlsplit(self.host)
            port = parts.port or self.port
            host = parts.hostname or DEFAULT_HOST
            scheme = parts.scheme
        else:
            host, port, scheme = self.host, self.port, "http"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"{scheme}://{host}:{port}"


def mask_api_key(key: str | None) -> str | None:
    """ "***" + the last 4 characters; just "***" for keys under 8 characters (showing 4 of
    a 5-character key would show most of it); None when there is no key."""
    if not key:
        return None
    return "***" + key[-4:] if len(key) >= 8 else "***"


# ---- field kinds: (lenient read, strict write) ----


def _host_problem(value: str) -> str | None:
    value = value.strip()
    if not value:
        return "must not be empty"
    if len(value) > 2048:
        return "must be at most 2048 characters"
    if "://" in value:
        problem = check_url(value)
        if problem:
            return problem
        if urlsplit(value).path not in ("", "/"):
            return "must not contain a path"
        return None
    if _CONTROL.search(value) or any(c in value for c in "/@?#"):
        return _HOST_FORMAT
    bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    # The same policy, and the same parser, as the URL the client will call.
    problem = check_url(f"http://[{bare}]" if ":" in bare else f"http://{bare}")
    return _HOST_FORMAT if problem is not None and problem.startswith("is not a valid URL") else problem


def _host_kind() -> Kind:
    def read(value: Any, default: str) -> str:
        return value.strip() if isinstance(value, str) and _host_problem(value) is None else default

    def write(value: Any) -> str | None:
        return "must be a string" if not isinstance(value, str) else _host_problem(value)

    return read, write


def _collection_kind() -> Kind:
    def read(value: Any, default: str) -> str:
        return value.strip() if isinstance(value, str) and _COLLECTION.match(value.strip()) else default

    def write(value: Any) -> str | None:
        if not isinstance(value, str):
            return "must be a string"
        if not value.strip():
            return "must not be empty"
        return (
            None if _COLLECTION.match(value.strip()) else "may only contain letters, digits, '_' and '-' (at most 255)"
        )

    return read, write


def _model_kind() -> Kind:
    def ok(value: str) -> bool:
        return 0 < len(value) <= _MAX_MODEL and not _CONTROL.search(value)

    def read(value: Any, default: str) -> str:
        return value.strip() if isinstance(value, str) and ok(value.strip()) else default

    def write(value: Any) -> str | None:
        if not isinstance(value, str):
            return "must be a string"
        if not value.strip():
            return "must not be empty"
        return (
            None
            if ok(value.strip())
            else f"must be at most {_MAX_MODEL} characters without spaces or control characters"
        )

    return read, write


def _api_key_kind() -> Kind:
    def read(value: Any, default: str | None) -> str | None:
        return value if isinstance(value, str) and value and not _CONTROL.search(value) else None

    def write(value: Any) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            return 'must be a string ("" removes the key)'
        if len(value) > _MAX_KEY:
            return f"must be at most {_MAX_KEY} characters"
        # It goes into an HTTP header: no whitespace or control characters (and the message
        # never echoes the key).
        return "must not contain spaces or control characters" if _CONTROL.search(value) else None

    return read, write


LOCAL_PATH_OUTSIDE = "must be a folder inside the data directory"


def _local_path_problem(value: str) -> str | None:
    """The checks that need no data directory (read and write)."""
    if value == MEMORY_LOCAL:
        return None
    if len(value) > _MAX_PATH:
        return f"must be at most {_MAX_PATH} characters"
    if _CONTROL_CHARS.search(value):
        return "must not contain control characters"
    if value.startswith("~"):
        return f"{LOCAL_PATH_OUTSIDE} ('~' is not expanded)"
    if ".." in PurePath(value).parts:
        return f"{LOCAL_PATH_OUTSIDE} (no '..')"
    return None


def confine_local_path(value: str, data_dir: str | Path) -> Path:
    """`value` as a folder inside `data_dir`, links followed on both; ValueError otherwise
    (the data dir itself is refused too: it holds the database)."""
    root = Path(data_dir).resolve()
    path = Path(value)
    folder = (path if path.is_absolute() else root / path).resolve()
    if folder == root or root not in folder.parents:
        raise ValueError(LOCAL_PATH_OUTSIDE)
    return folder


def _local_path_kind() -> Kind:
    def read(value: Any, default: str | None) -> str | None:
        if isinstance(value, str) and value.strip() and _local_path_problem(value.strip()) is None:
            return value.strip()
        return default

    def write(value: Any) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            return "must be a string or null"
        return _local_path_problem(value.strip()) if value.strip() else None

    return read, write


SPECS: tuple[Spec, ...] = (
    spec("enabled", "enabled", (read_bool, write_bool)),
    spec("host", "host", _host_kind()),
    spec("port", "port", int_kind(*PORT_RANGE)),
    spec("collection", "collection", _collection_kind()),
    spec("embeddingModel", "embedding_model", _model_kind()),
    spec("apiKey", "api_key", _api_key_kind()),
    spec("quantization", "quantization", enum_kind(QUANTIZATIONS)),
    spec("localPath", "local_path", _local_path_kind()),
)
_BY_API = {s.api: s for s in SPECS}


def normalize(stored: Mapping[str, Any]) -> QdrantSettings:
    """Lenient: whatever is stored becomes valid settings (invalid → default)."""
    return read_specs(SPECS, QdrantSettings, stored)


def validate_update(patch: Mapping[str, Any], data_dir: str | Path) -> dict[str, Any]:
    """Strict: every violation at once (never echoing the key); returns what to store:
    strings trimmed, "" → None (apiKey "" removes the key, localPath "" goes back to the
    server), read-only response fields dropped. `localPath` must lie inside `data_dir`."""
    v = Violations()
    if not isinstance(patch, Mapping) or not any(name not in READ_ONLY for name in patch):
        v.add("settings", "nothing to update")
        v.raise_if_any()
    for name, value in patch.items():
        if name in READ_ONLY:
            continue
        known = _BY_API.get(name)
        if known is None:
            v.add(name, "unknown setting")
            continue
        problem = known.write(value)
        if problem is None and name == "localPath":
            problem = _confinement_problem(value, data_dir)
        if problem:
            v.add(name, problem)
    v.raise_if_any()
    out: dict[str, Any] = {}
    for name, value in patch.items():
        if name in READ_ONLY:
            continue
        if isinstance(value, str) and name != "apiKey":
            value = value.strip()
        out[name] = None if value == "" else value
    return out


def _confinement_problem(value: Any, data_dir: str | Path) -> str | None:
    if not isinstance(value, str) or value.strip() in ("", MEMORY_LOCAL):
        return None
    try:
        confine_local_path(value.strip(), data_dir)
    except ValueError as exc:
        return str(exc)
    return None


def memory_settings_patch(patch: Mapping[str, Any]) -> dict[str, Any]:
    """The memory-settings change that goes with a Qdrant update: enabling makes Qdrant the
    vector store, disabling resets the selector to "auto"; {} when `enabled` is not in the
    patch. Apply it with `Settings.update` right after saving the Qdrant settings."""
    if patch.get("enabled") is True:
        return {"vectorStore": "qdrant"}
    if patch.get("enabled") is False:
        return {"vectorStore": "auto"}
    return {}


@dataclass(frozen=True)
class QdrantUpdate:
    settings: QdrantSettings
    #: To pass to `memsvc.core.settings.memory.Settings.update` ({} = nothing to change).
    memory_patch: dict[str, Any]


class QdrantSettingsManager(NamespaceSettings[QdrantSettings]):
    """Cached access to the Qdrant settings of one store; `data_dir` is the folder that
    `localPath` must stay inside."""

    def __init__(self, store: SettingsStore, data_dir: str | Path):
        super().__init__(store, NAMESPACE, normalize, self._checked)
        self._data_dir = data_dir
        self._processes = 1
        self._across_hosts = False

    def shared_by(self, processes: int) -> None:
        """`processes` server processes serve this database (see `update`)."""
        self._processes = processes

    def shared_across_hosts(self) -> None:
        """Replicas on other hosts may serve this database (a shared store): a folder on
        this host cannot hold their vectors (see `update`)."""
        self._across_hosts = True

    def _checked(self, patch: Mapping[str, Any]) -> dict[str, Any]:
        """validate_update, then the stored key's rule against the current settings."""
        values = validate_update(patch, self._data_dir)
        _check_moved_key(self.get(), values)
        return values

    def update(self, patch: Mapping[str, Any]) -> QdrantUpdate:
        """Validate strictly, save, and return the new settings plus the memory-settings
        patch to apply alongside (see `memory_settings_patch`).

        Qdrant's local mode opens its folder in one process only (qdrant-client locks it,
        and ":memory:" is one process's own), so while several processes serve, an update
        that sets a `localPath`, or enables Qdrant with one stored, is refused
        (PreconditionError) and nothing is saved; so is it with a shared store, whose
        replicas may run on other hosts."""
        values = self._validate(patch)
        if self._across_hosts and _uses_local_mode(self.get(), values):
            raise PreconditionError(local_mode_across_hosts("refused"))
        if self._processes > 1 and _uses_local_mode(self.get(), values):
            raise PreconditionError(
                f"Qdrant's local mode (localPath) can be used by one process only, and {self._processes} server "
                "processes serve this database: point Qdrant at a server (host and port, localPath empty), "
                "or run memsvc with MEMSVC_PROCESSES=1"
            )
        return QdrantUpdate(self.save(patch), memory_settings_patch(patch))


def _check_moved_key(current: QdrantSettings, values: Mapping[str, Any]) -> None:
    """INVALID_ARGUMENT on `apiKey` when the validated update moves the server a stored key
    is sent to without giving the key again."""
    after = normalize({**current.to_api(), **values})
    problem = moved_secret_problem(current.has_api_key, "apiKey" in values, current.server_url(), after.server_url())
    if problem:
        raise ValidationError.single("apiKey", problem)


def local_mode_across_hosts(what: str) -> str:
    """Why Qdrant's local mode cannot serve a store shared across hosts, after `what`."""
    return (
        f"{what}: Qdrant's local mode (localPath) keeps vectors in a folder of one host, and memsvc serves "
        "from a database that replicas on other hosts share (MEMSVC_DATABASE_URL); point Qdrant at a server "
        "or cluster (host and port, localPath empty)"
    )


def _uses_local_mode(current: QdrantSettings, values: Mapping[str, Any]) -> bool:
    """Whether the validated update `values` sets a local path, or enables Qdrant with one."""
    if values.get("localPath") is not None:
        return True
    path = values.get("localPath", current.local_path)
    return bool(values.get("enabled", current.enabled)) and path is not None
