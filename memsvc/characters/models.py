"""Plain request and result objects of the character-memory API (no protobuf here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ChatItem:
    """One chat item as a client sends it. `role`/`text` are None when absent."""

    role: Any
    text: Any = None
    source_index: int | None = None
    theater: bool = False


@dataclass(frozen=True)
class RecentSnapshot:
    content: str
    fingerprint: str
    identity_token: str


@dataclass(frozen=True)
class SaveRequest:
    filename: str
    fingerprint: str | None
    identity_token: str | None
    chat: list[ChatItem]


@dataclass(frozen=True)
class SaveResult:
    catgirl_name: str
    fingerprint: str
    identity_token: str


@dataclass(frozen=True)
class AppendResult:
    accepted: int
    pending: int


@dataclass(frozen=True)
class RenameRequest:
    old_name: str
    new_name: str
    alias: bool  # called through the compatibility alias route


@dataclass(frozen=True)
class RenameResult:
    """The canonical answer (memory_renamed...) or the alias's idempotent no-op (changed...)."""

    changed: bool
    already_renamed: bool = False
    exists_after: bool = False


@dataclass(frozen=True)
class LegacyEntry:
    name: str
    path: str
    is_dir: bool
    size_bytes: int
    is_unlinked: bool
    runtime_has_same_name: bool


@dataclass(frozen=True)
class LegacyRoot:
    root: str
    source: str
    exists: bool
    entries: list[LegacyEntry]


@dataclass(frozen=True)
class LegacyScan:
    roots: list[LegacyRoot]
    runtime_memory_dir: str
    total_entries: int
    total_size_bytes: int


@dataclass(frozen=True)
class PurgeError:
    path: str
    error: str


@dataclass(frozen=True)
class PurgeResult:
    removed: list[str] = field(default_factory=list)
    errors: list[PurgeError] = field(default_factory=list)
