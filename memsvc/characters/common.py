"""Pieces every part of the character-memory API shares: where the files are, the
per-character locks, the storage-mode guard and the test hook."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memsvc.characters.fsutil import clean_temp_files, exists_no_follow, is_real_dir, is_real_file, writable_dir
from memsvc.characters.process_lock import ProcessLock, lock_path
from memsvc.core.credentials import current_scope
from memsvc.kernel.errors import ConflictError, PermissionDeniedError, shorten

STORAGE_READ_ONLY = "STORAGE_READ_ONLY"
STORAGE_MAINTENANCE = "STORAGE_MAINTENANCE"
# Flat files and folders of the companion app's older layout that belong to one character
# and move with it on a rename ("{}" is the name).
FLAT_ENTRIES = ("recent_{}.json", "settings_{}.json", "semantic_memory_{}", "time_indexed_{}", "time_indexed_{}.db")
# Prefixes of the flat entries that are bare names: a character named like one of them
# would share its folder with another character's storage.
STORAGE_PREFIXES = tuple(p[:-2] for p in FLAT_ENTRIES if p.endswith("{}"))


def owner_id(name: str) -> str:
    """The `memories` owner of a character's long-term memory."""
    return f"character:{name}"


def may_address(name: str) -> bool:
    """Whether the calling request may read or write the chat of character `name`: its
    owner `character:<name>` is among a confined caller's tenants (an admin, a `*` token
    or a server without tokens: any character). The one rule the core applies where the
    rule table cannot see the character (a listing, an append that follows a rename)."""
    scope = current_scope()
    return scope is None or scope.tenants is None or owner_id(name) in scope.tenants


def check_writes_owner(name: str) -> None:
    """A confined caller may write only the chat of a character whose owner it covers. The
    rule table checks the name a request gives; this checks the character a write actually
    lands on (an append to an old name follows the rename to the new one)."""
    if not may_address(name):
        raise PermissionDeniedError(f"this credential may not address apiKeyId {shorten(owner_id(name))!r}")


@dataclass(frozen=True)
class Roots:
    """The runtime memory root and the optional project root (shipped or older files)."""

    runtime: Path
    project: Path | None = None

    def all(self) -> list[Path]:
        return [self.runtime] + ([self.project] if self.project is not None else [])

    def candidates(self, name: str) -> list[tuple[Path, Path | None]]:
        """(file, folder that must be real too) in resolution order."""
        out: list[tuple[Path, Path | None]] = []
        for root in self.all():
            out.append((root / name / "recent.json", root / name))
            out.append((root / f"recent_{name}.json", None))
        return out

    def resolve(self, name: str) -> Path | None:
        """The first real file of the resolution order; symbolic links never count."""
        for path, folder in self.candidates(name):
            if (folder is None or is_real_dir(folder)) and is_real_file(path):
                return path
        return None

    def default(self, name: str) -> Path:
        """Where a character's history is created when it has none."""
        return self.runtime / name / "recent.json"

    def locate(self, path: Path) -> tuple[Path, list[str]]:
        """(root, components below it) of a path built under one of the roots (the
        innermost root when they nest): what the link-refusing writes walk."""
        for root in sorted(self.all(), key=lambda r: len(r.parts), reverse=True):
            try:
                return root, list(path.relative_to(root).parts)
            except ValueError:
                continue
        raise ValueError(f"{path} is under no memory root")

    def folder_moves(self, old: str, new: str) -> list[tuple[Path, Path]]:
        """(source, target) of the character folders a rename of `old` to `new` moves."""
        return [(root / old, root / new) for root in self.all()]

    def flat_moves(self, old: str, new: str, others: set[str]) -> list[tuple[Path, Path]]:
        """(source, target) of the flat entries of `old` in every root, leaving out any named
        exactly like another registered character (`others`): that is the other character's
        folder, never `old`'s storage."""
        return [
            (root / p.format(old), root / p.format(new))
            for root in self.all()
            for p in FLAT_ENTRIES
            if p.format(old) not in others
        ]

    def storage_entries(self, name: str, others: set[str]) -> list[Path]:
        """Everything on disk that belongs to `name` (`others`: the other registered
        characters): folders first, then flat entries."""
        moves = self.folder_moves(name, name) + self.flat_moves(name, name, others)
        return [source for source, _ in moves if exists_no_follow(source)]

    def clean_temp_files(self) -> int:
        """Remove what killed writes left: temp files in each root and in its character folders."""
        return sum(clean_temp_files(root, depth=1) for root in self.all())


class Hooks:
    """Test hook: `step(name)` is called at named points (rename steps, the save commit,
    reviews, the Powerful Memory reset, legacy removals) and may raise or block there."""

    def __init__(self) -> None:
        self.step: Callable[[str], None] | None = None

    def fire(self, name: str) -> None:
        hook = self.step
        if hook is not None:
            hook(name)


class CharacterLocks:
    """One re-entrant lock per character name: reads, saves, flushes and renames of a
    character take it, so they see and leave the file and its pending batch whole. With a
    `lock_dir` the lock also excludes the other processes sharing the data dir (a
    ProcessLock: the flushers of two server processes never write one character's file at
    once); without one it is this process's alone."""

    def __init__(self, lock_dir: Path | None = None) -> None:
        self._guard = threading.Lock()
        self._lock_dir = lock_dir
        self._locks: dict[str, threading.RLock | ProcessLock] = {}

    def get(self, name: str) -> threading.RLock | ProcessLock:
        with self._guard:
            lock = self._locks.get(name)
            if lock is None:
                lock = self._locks[name] = (
                    threading.RLock()
                    if self._lock_dir is None
                    else ProcessLock(lock_path(self._lock_dir, "characters", name))
                )
            return lock

    @contextmanager
    def hold(self, *names: str) -> Iterator[None]:
        """Several characters' locks, always in the same order (no deadlock)."""
        locks = [self.get(n) for n in sorted(set(names))]
        for lock in locks:
            lock.acquire()
        try:
            yield
        finally:
            for lock in reversed(locks):
                lock.release()


class StorageGuard:
    """Refuses writes (409) when storage is read-only or in maintenance."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def check(self) -> None:
        if self.mode == "read-only":
            raise ConflictError("character storage is read-only; try again later", reason=STORAGE_READ_ONLY)
        if self.mode == "maintenance":
            raise ConflictError("character storage is in maintenance; try again later", reason=STORAGE_MAINTENANCE)

    def check_dir(self, folder: Path) -> None:
        self.check()
        if not writable_dir(folder):
            raise ConflictError(f"storage folder {folder.name or folder} is not writable", reason=STORAGE_READ_ONLY)
