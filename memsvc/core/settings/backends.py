"""The memory settings that choose backends: `primaryBackend`, `fallbackBackends` and
`backendConfigs`, checked strictly on write (every violation listed, under its dotted path)
and read leniently.

`backendConfigs` maps a backend name to its configuration. The entry's `type` (http,
obsidian, notion, memsvc) defaults to its name, so `{"obsidian": {...}}` needs none. Each
entry's `apiKey` is write-only, as the Qdrant key: never returned (GET shows `hasApiKey` and
`apiKeyMasked`), kept when a write leaves it out (so a client can send back what it read),
removed by `apiKey: ""` or null. A write that changes where the key is sent (the entry's
`baseUrl`, or its `type` and with it the default one) must give the key again:
`moved_secret_problem` is the rule, the Qdrant key follows it too.

The name "local" is the built-in store, SQLite or PostgreSQL; "sqlite", its name from before
PostgreSQL existed, is still accepted wherever a backend is named and read as "local". An
entry under either name is accepted and ignored."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from memsvc.kernel.url_policy import check_resolved

LOCAL = "local"
#: Earlier names of LOCAL that clients may still send.
LOCAL_ALIASES = ("sqlite",)
BUILT_IN = (LOCAL, *LOCAL_ALIASES)
TYPES = ("http", "obsidian", "notion", "memsvc")
READ_ONLY = ("hasApiKey", "apiKeyMasked")
COMMON = ("type", "baseUrl", "apiKey", "headers", "timeoutMs", "caCertificate")
FIELDS: dict[str, tuple[str, ...]] = {
    "http": COMMON + ("endpoints", "queryParams", "pathParams"),
    "obsidian": COMMON + ("folder",),
    "notion": COMMON + ("databaseId", "notionVersion"),
    "memsvc": COMMON,
}
#: Types whose baseUrl has a default (the tool's usual local address, or the public API).
DEFAULT_BASE_URLS = {"obsidian": "https://127.0.0.1:27124", "notion": "https://api.notion.com"}
ENDPOINT_NAMES = ("search", "create", "list", "get", "update", "delete", "health")
QUERY_PARAM_NAMES = (
    "query",
    "apiKeyId",
    "sessionId",
    "type",
    "limit",
    "offset",
    "strategy",
    "maxTokens",
    "options",
    "orderBy",
    "orderDir",
)
PATH_PARAM_NAMES = ("id",)
TIMEOUT_MS = (100, 120_000)
DEFAULT_TIMEOUT_MS = 30_000
MAX_BACKENDS = 8
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")  # an HTTP header name
_PARAM = re.compile(r"^[A-Za-z0-9_.\-\[\]]{1,64}$")
_PATH = re.compile(r"^/[A-Za-z0-9_.~!$&'()*+,;=:@%/{}\-]{0,255}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]")
_FOLDER = re.compile(r"^[A-Za-z0-9 _.\-]{1,64}(/[A-Za-z0-9 _.\-]{1,64}){0,7}$")
_NOTION_ID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MAX_KEY = 1024
_MAX_PEM = 16_000

Add = Callable[[str, str], None]


def backend_type(name: str, config: Mapping[str, Any]) -> str | None:
    kind = config.get("type", name if name in TYPES else None)
    return kind if kind in TYPES else None


def is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(_NAME.match(value))


def canonical(name: str) -> str:
    """A backend name as stored and reported: an earlier name of the built-in store is LOCAL."""
    return LOCAL if name in LOCAL_ALIASES else name


# ---- one entry ----


def _check_map(
    add: Add, path: str, value: Any, keys: tuple[str, ...] | None, check: Callable[[str], bool], what: str
) -> None:
    if not isinstance(value, Mapping):
        add(path, "must be an object")
        return
    for key, item in value.items():
        if keys is not None and key not in keys:
            add(f"{path}.{key}", f"unknown; known: {', '.join(keys)}")
        elif not isinstance(item, str) or not check(item):
            add(f"{path}.{key}", what)


def _check_headers(add: Add, path: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        add(path, "must be an object of header names to values")
        return
    for key, item in value.items():
        if not _TOKEN.match(key):
            add(f"{path}.{key}", "is not a valid HTTP header name")
        elif key.lower() in ("host", "content-length", "transfer-encoding", "connection"):
            add(f"{path}.{key}", "is set by memsvc itself")
        elif not isinstance(item, str) or len(item) > 4096 or _CONTROL.search(item):
            add(f"{path}.{key}", "must be a string of at most 4096 characters without control characters")


def _check_key(add: Add, path: str, value: Any) -> None:
    if value is None or value == "":
        return
    if not isinstance(value, str):
        add(path, 'must be a string ("" removes the key)')
    elif len(value) > _MAX_KEY:
        add(path, f"must be at most {_MAX_KEY} characters")
    elif _SPACE_OR_CONTROL.search(value):
        add(path, "must not contain spaces or control characters")  # never echoes the key


def _check_common(add: Add, path: str, kind: str, config: Mapping[str, Any]) -> None:
    url = config.get("baseUrl")
    if url is None and kind not in DEFAULT_BASE_URLS:
        add(f"{path}.baseUrl", "is required")
    elif url is not None:
        problem = "must be a string" if not isinstance(url, str) else check_resolved(url, unresolvable_ok=True)
        if problem:
            add(f"{path}.baseUrl", problem)
    _check_key(add, f"{path}.apiKey", config.get("apiKey"))
    if "headers" in config:
        _check_headers(add, f"{path}.headers", config["headers"])
    timeout = config.get("timeoutMs")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not float(timeout).is_integer()
        or not TIMEOUT_MS[0] <= timeout <= TIMEOUT_MS[1]
    ):
        add(f"{path}.timeoutMs", f"must be an integer from {TIMEOUT_MS[0]} to {TIMEOUT_MS[1]}")
    pem = config.get("caCertificate")
    if pem is not None and (
        not isinstance(pem, str) or len(pem) > _MAX_PEM or "-----BEGIN CERTIFICATE-----" not in pem
    ):
        add(f"{path}.caCertificate", f"must be PEM text (-----BEGIN CERTIFICATE-----) of at most {_MAX_PEM} characters")


def _check_kind_fields(add: Add, path: str, kind: str, config: Mapping[str, Any]) -> None:
    if kind == "http":
        if "endpoints" in config:
            _check_map(
                add,
                f"{path}.endpoints",
                config["endpoints"],
                ENDPOINT_NAMES,
                lambda v: bool(_PATH.match(v)) and ".." not in v.split("/"),
                "must be a path starting with '/' (no query string, no '..')",
            )
        if "queryParams" in config:
            _check_map(
                add,
                f"{path}.queryParams",
                config["queryParams"],
                QUERY_PARAM_NAMES,
                lambda v: bool(_PARAM.match(v)),
                "must be a query parameter name (letters, digits, _ . - [ ])",
            )
        if "pathParams" in config:
            _check_map(
                add,
                f"{path}.pathParams",
                config["pathParams"],
                PATH_PARAM_NAMES,
                lambda v: bool(re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$", v)),
                "must be a placeholder name",
            )
    elif kind == "obsidian":
        folder = config.get("folder")
        if folder is not None and (
            not isinstance(folder, str) or not _FOLDER.match(folder) or any(p in (".", "..") for p in folder.split("/"))
        ):
            add(f"{path}.folder", "must be a relative vault folder (letters, digits, space, _ . -; no '..')")
    elif kind == "notion":
        database = config.get("databaseId")
        if not isinstance(database, str) or not _NOTION_ID.match(database):
            add(f"{path}.databaseId", "is required: the database's id (32 hex digits, dashes allowed)")
        version = config.get("notionVersion")
        if version is not None and (not isinstance(version, str) or not _VERSION.match(version)):
            add(f"{path}.notionVersion", "must be a date like 2022-06-28")


def check_entry(add: Add, name: str, config: Any) -> None:
    path = f"backendConfigs.{name}"
    if not is_name(name):
        add(path, "backend names are 1 to 32 lower-case letters, digits, '_' or '-', starting with a letter")
        return
    if not isinstance(config, Mapping):
        add(path, "must be an object")
        return
    if name in BUILT_IN:
        return
    kind = backend_type(name, config)
    if kind is None:
        add(f"{path}.type", f"must be one of {', '.join(TYPES)}")
        return
    for key in config:
        if key not in FIELDS[kind] and key not in READ_ONLY:
            add(f"{path}.{key}", f"unknown for a {kind} backend; known: {', '.join(FIELDS[kind])}")
    _check_common(add, path, kind, config)
    _check_kind_fields(add, path, kind, config)


# ---- the three settings together ----


def check(
    add: Add,
    patch: Mapping[str, Any],
    stored_configs: Mapping[str, Any],
    stored_primary: str,
    stored_fallbacks: tuple[str, ...],
) -> None:
    """Every violation of the backend settings as they will be after `patch` (the fields it
    leaves out keep their stored values)."""
    configs = patch.get("backendConfigs", stored_configs)
    if "backendConfigs" in patch and isinstance(configs, Mapping):
        if len([n for n in configs if n not in BUILT_IN]) > MAX_BACKENDS:
            add("backendConfigs", f"at most {MAX_BACKENDS} backends")
        for name, config in configs.items():
            check_entry(add, name, config)
    known = {*BUILT_IN, *(configs if isinstance(configs, Mapping) else {})}
    primary = patch.get("primaryBackend", stored_primary)
    if isinstance(primary, str) and primary not in known:
        add("primaryBackend", f"unknown backend {primary!r}; defined: {', '.join(sorted(known))}")
    if "backendConfigs" in patch and isinstance(configs, Mapping):
        _check_moved_keys(add, configs, stored_configs)
    fallbacks = patch.get("fallbackBackends", list(stored_fallbacks))
    if isinstance(fallbacks, list) and all(isinstance(f, str) for f in fallbacks):
        unknown = [f for f in fallbacks if f not in known]
        if unknown:
            add("fallbackBackends", f"unknown backends {unknown}; defined: {', '.join(sorted(known))}")
        if len({canonical(f) for f in fallbacks}) != len(fallbacks):
            add("fallbackBackends", "must not name a backend twice")


def name_problem(value: Any) -> str | None:
    return None if is_name(value) else "must be a backend name (local or a name defined in backendConfigs)"


def names_problem(value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return "must be a list of strings"
    return None if all(is_name(v) for v in value) else "must list backend names"


# ---- secrets ----


def moved_secret_problem(stored: bool, given: bool, before: str | None, after: str | None) -> str | None:
    """The rule for every stored secret (a backend's apiKey, Qdrant's): a write that changes
    the address the secret is sent to must give the secret again, or remove it. Otherwise
    whoever may change the address could have the stored key sent to a host of their choice.
    A write that leaves the secret out keeps it only while the address stays as it was."""
    if not stored or given or before == after:
        return None
    return (
        "must be given again when the address it is sent to changes (the stored key is never sent to a new "
        'address); "" removes it'
    )


def destination(name: str, config: Mapping[str, Any]) -> str | None:
    """The base URL a backend entry's key is sent to (its type's default when it has none)."""
    url = config.get("baseUrl")
    if isinstance(url, str) and url.strip():
        return url.strip().rstrip("/")
    kind = backend_type(name, config)
    return DEFAULT_BASE_URLS.get(kind) if kind else None


def _check_moved_keys(add: Add, configs: Mapping[str, Any], stored: Mapping[str, Any]) -> None:
    for name, config in configs.items():
        previous = stored.get(name)
        if not isinstance(config, Mapping) or not isinstance(previous, Mapping) or name in BUILT_IN:
            continue
        problem = moved_secret_problem(
            bool(previous.get("apiKey")), "apiKey" in config, destination(name, previous), destination(name, config)
        )
        if problem:
            add(f"backendConfigs.{name}.apiKey", problem)


def with_stored_keys(configs: Mapping[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """What to store for a backendConfigs write: read-only fields dropped, an entry without
    `apiKey` keeps the stored entry's key, `apiKey: ""` or null removes it."""
    out: dict[str, Any] = {}
    for name, config in configs.items():
        entry = {k: v for k, v in config.items() if k not in READ_ONLY} if isinstance(config, Mapping) else config
        previous = stored.get(name)
        if isinstance(entry, dict):
            if "apiKey" not in entry and isinstance(previous, Mapping) and previous.get("apiKey"):
                entry["apiKey"] = previous["apiKey"]
            elif entry.get("apiKey") in ("", None):
                entry.pop("apiKey", None)
        out[name] = entry
    return out


def masked(configs: Mapping[str, Any]) -> dict[str, Any]:
    """backendConfigs as returned to clients: every key replaced by hasApiKey/apiKeyMasked
    (masked as the Qdrant key is)."""
    from memsvc.core.settings.qdrant import mask_api_key  # here: qdrant_settings imports settings, which imports this

    out: dict[str, Any] = {}
    for name, config in configs.items():
        if isinstance(config, Mapping) and name not in BUILT_IN:
            entry = {k: v for k, v in config.items() if k != "apiKey"}
            entry["hasApiKey"] = bool(config.get("apiKey"))
            key = config.get("apiKey")
            entry["apiKeyMasked"] = mask_api_key(key if isinstance(key, str) else None)
            out[name] = entry
        else:
            out[name] = config
    return out
