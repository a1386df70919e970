"""The character rename transaction: all of a character's storage moves, or none of it.

Run under the registry lock, after the request is validated. In order: back up what it will
touch (the registry's bytes; the moves are renames, undone by renaming back; the database
rows' ids are recorded as they change), drain the character's reviews, move the folders and
the flat files, re-own the rows (memories, reflections, pending appends, path generations)
in one SQL transaction, write the registry, reload caches. A failure after the first change
undoes every completed part in reverse, and says what failed and what could not be undone.
`hooks.fire("rename.<step>")` runs before each step, so tests can fail any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memsvc.characters import fsutil
from memsvc.characters.common import CharacterLocks, Hooks, Roots, owner_id
from memsvc.characters.messages import path_key
from memsvc.characters.registry import CHARACTERS_KEY, Registry, renamed
from memsvc.characters.reviews import ReviewRunner
from memsvc.kernel.errors import OperationFailedError, UnavailableError
from memsvc.storage.character_store import CharacterStore, RenameBackup

DRAIN_TIMEOUT_S = 10.0
RELEASE_FAILED = "MEMORY_SERVER_RELEASE_FAILED"


@dataclass
class RenameParts:
    """What the transaction works on."""

    roots: Roots
    registry: Registry
    store: CharacterStore
    locks: CharacterLocks
    reviews: ReviewRunner
    reflections_lock: Any  # held while rows are re-owned: no review or sweep writes then
    hooks: Hooks
    reload: Callable[[], None]  # drop the engine's caches of both names
    reowned: Callable[[list[str]], None]  # after the commit: index the moved memories under the new owner
    clock: Callable[[], datetime]


@dataclass
class RenameTransaction:
    parts: RenameParts
    old: str
    new: str
    registry_data: dict[str, Any]
    step: str = "start"
    moved: list[tuple[Path, Path]] = field(default_factory=list)
    rows: RenameBackup | None = None
    registry_raw: bytes | None = None
    registry_written: bool = False

    def _enter(self, step: str) -> None:
        self.step = step
        self.parts.hooks.fire(f"rename.{step}")

    def run(self) -> None:
        try:
            self._enter("backup")
            self.registry_raw = self.parts.registry.raw()
        except Exception as exc:  # noqa: BLE001
            raise OperationFailedError(
                f"renaming {self.old!r} to {self.new!r} failed at step backup: {_describe(exc)}; nothing was changed"
            ) from exc
        self._drain()
        committed = False
        try:
            with self.parts.locks.hold(self.old, self.new), self.parts.reflections_lock:
                self._apply()
            committed = True
        finally:
            self.parts.reviews.resume(self.old, rename_to=self.new if committed else None)
        if self.rows is not None and self.rows.memory_ids:
            self.parts.reowned(self.rows.memory_ids)

    def _drain(self) -> None:
        try:
            self._enter("drain")
            self.parts.reviews.drain(self.old, DRAIN_TIMEOUT_S)
        except Exception as exc:
            self.parts.reviews.resume(self.old)
            raise UnavailableError(
                f"could not release {self.old!r}'s review tasks ({_describe(exc)}); "
                "nothing was changed and the tasks were resumed",
                reason=RELEASE_FAILED,
            ) from None

    def _apply(self) -> None:
        try:
            self._move("move_folder", self.parts.roots.folder_moves(self.old, self.new))
            self._move("move_flat_files", self.parts.roots.flat_moves(self.old, self.new, self.others()))
            self.rows = self.parts.store.rename_rows(
                self.old, self.new, owner_id(self.old), owner_id(self.new), self._generation_moves(), self._enter
            )
            self._enter("registry")
            self.parts.registry.save(renamed(self.registry_data, self.old, self.new, self.parts.clock()))
            self.registry_written = True
            self._enter("reload")
            self.parts.reload()
        except Exception as exc:
            problems = self._rollback()
            undo = f"; rollback failed: {'; '.join(problems)}" if problems else "; everything was rolled back"
            raise OperationFailedError(
                f"renaming {self.old!r} to {self.new!r} failed at step {self.step}: {_describe(exc)}{undo}"
            ) from exc

    def _move(self, step: str, moves: list[tuple[Path, Path]]) -> None:
        self._enter(step)
        for source, target in moves:
            if fsutil.exists_no_follow(source):
                fsutil.move_entry(source.parent, source.name, target.name)
                self.moved.append((source, target))

    def others(self) -> set[str]:
        """The other registered characters: entries named like them are never moved."""
        return set(self.registry_data[CHARACTERS_KEY]) - {self.old}

    def _recent_files(self, moved: list[tuple[Path, Path]]) -> list[tuple[Path, Path]]:
        """(old, new) path of each recent-history file among the moves."""
        out = []
        for source, target in moved:
            if target.name == self.new:
                out.append((source / "recent.json", target / "recent.json"))
            elif target.name == f"recent_{self.new}.json":
                out.append((source, target))
        return [(s, t) for s, t in out if fsutil.is_real_file(t)]

    def _generation_moves(self) -> list[tuple[str, str, str | None]]:
        return [(path_key(s), path_key(t), fsutil.signature(t)) for s, t in self._recent_files(self.moved)]

    def _rollback(self) -> list[str]:
        problems: list[str] = []
        recent = self._recent_files(self.moved)
        if self.registry_written:
            try:
                self.parts.registry.restore(self.registry_raw)
            except Exception as exc:  # noqa: BLE001 - report every part that could not be undone
                problems.append(f"registry not restored ({_describe(exc)})")
        for source, target in reversed(self.moved):
            try:
                fsutil.move_entry(target.parent, target.name, source.name)
            except Exception as exc:
                problems.append(f"{target.name} not moved back ({_describe(exc)})")
        restored = [(path_key(s), fsutil.signature(s)) for s, _ in recent if fsutil.is_real_file(s)]
        try:
            if self.rows is not None:
                self.parts.store.undo_rename_rows(self.old, owner_id(self.old), self.rows, restored)
            elif restored:
                self.parts.store.activate_restored(restored)
        except Exception as exc:
            problems.append(f"database rows not restored ({_describe(exc)})")
        return problems


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
