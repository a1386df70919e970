"""MemoryBackend implementations other than SQLite, one file per kind: the generic HTTP
backend (http.py), Obsidian's Local REST API (obsidian.py), Notion (notion.py) and another
memsvc's REST API (memsvc_rest.py), over a small shared base (base.py). `create_backend`
is the factory: a validated `backendConfigs` entry in, a backend out. Which backend serves
which operation is routing policy, in memsvc.core.backend_manager."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memsvc.backends.base import Connection
from memsvc.backends.http import HttpBackend, HttpBackendConfig
from memsvc.backends.memsvc_rest import MemsvcBackend
from memsvc.backends.notion import NOTION_VERSION, NotionBackend
from memsvc.backends.obsidian import DEFAULT_FOLDER, ObsidianBackend
from memsvc.core.settings.backends import DEFAULT_BASE_URLS, DEFAULT_TIMEOUT_MS, backend_type
from memsvc.kernel.backend import PluggableBackend

__all__ = ["create_backend"]


def _connection(kind: str, config: Mapping[str, Any]) -> Connection:
    return Connection(
        base_url=config.get("baseUrl") or DEFAULT_BASE_URLS[kind],
        api_key=config.get("apiKey") or None,
        headers=dict(config.get("headers") or {}),
        timeout_s=(config.get("timeoutMs") or DEFAULT_TIMEOUT_MS) / 1000.0,
        ca_certificate=config.get("caCertificate") or None,
    )


def create_backend(name: str, config: Mapping[str, Any]) -> PluggableBackend:
    """The backend a `backendConfigs` entry describes (validated when it was saved)."""
    kind = backend_type(name, config)
    if kind is None:
        raise ValueError(f"backend {name!r} has no known type")
    connection = _connection(kind, config)
    if kind == "obsidian":
        return ObsidianBackend(name, connection, config.get("folder") or DEFAULT_FOLDER)
    if kind == "notion":
        return NotionBackend(
            name, connection, str(config.get("databaseId") or ""), config.get("notionVersion") or NOTION_VERSION
        )
    if kind == "memsvc":
        return MemsvcBackend(name, connection)
    return HttpBackend(
        name,
        HttpBackendConfig(
            connection,
            dict(config.get("endpoints") or {}),
            dict(config.get("queryParams") or {}),
            dict(config.get("pathParams") or {}),
        ),
    )
