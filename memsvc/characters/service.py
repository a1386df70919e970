"""The character-memory API as one object: what MemoryService's character RPCs and the two
SettingsService toggles call. It wires the parts (recent files, registry, reviews,
reflections, legacy storage, switches) and runs the two background loops: the flush of
appended messages and the sweep promoting reflections by age."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memsvc.characters.common import CharacterLocks, Hooks, Roots, StorageGuard, owner_id
from memsvc.characters.fsutil import check_writable, clean_temp_files, exists_no_follow
from memsvc.characters.legacy import Legacy
from memsvc.characters.models import (
    AppendResult,
    ChatItem,
    LegacyScan,
    PurgeResult,
    RecentSnapshot,
    RenameRequest,
    RenameResult,
    SaveRequest,
    SaveResult,
)
from memsvc.characters.names import validate_new_name, validate_old_name
from memsvc.characters.process_lock import ProcessLock
from memsvc.characters.recent import RecentFiles
from memsvc.characters.reflections import Reflections
from memsvc.characters.registry import Registry
from memsvc.characters.rename import RenameParts, RenameTransaction
from memsvc.characters.reviews import ReviewRunner
from memsvc.characters.toggles import POWERFUL_KEY, REVIEW_KEY, CoreConfig, strict_bool
from memsvc.config import Config
from memsvc.core.background import Ticker
from memsvc.core.memories import Memories
from memsvc.kernel.errors import ConflictError, NotFoundError, OperationFailedError, ValidationError
from memsvc.kernel.models import utcnow

if TYPE_CHECKING:  # the stores are built by memsvc.app and passed in
    from memsvc.storage.character_store import CharacterStore
    from memsvc.storage.reflection_store import ReflectionStore

log = logging.getLogger("memsvc.characters")

PARTIAL_RENAME = "PARTIAL_RENAME"
LOCK_DIR = "locks"  # under the data dir: the lock files of the character files
RENAME_TARGET_EXISTS = "RENAME_TARGET_EXISTS"


class Characters:
    def __init__(self, config: Config, store: CharacterStore, reflection_store: ReflectionStore, memories: Memories):
        self.config = config
        self.memories = memories
        #: "Now" for reflections (tests move it to check the 14-day rules).
        self.clock: Callable[[], datetime] = utcnow
        self.hooks = Hooks()
        self.roots = Roots(config.runtime_memory_dir, config.project_memory_dir)
        # Every file read-modify-write below also excludes the other server processes on
        # this data dir (see memsvc.characters.process_lock).
        locks = config.data_dir / LOCK_DIR
        self.registry = Registry(config.config_dir / "characters.json", ProcessLock(locks / "registry.lock"))
        self.toggles = CoreConfig(config.config_dir / "core_config.json", ProcessLock(locks / "core_config.lock"))
        self.store = store
        self.guard = StorageGuard(config.storage_mode)
        self.locks = CharacterLocks(locks)
        self.recent = RecentFiles(self.roots, self.store, self.registry, self.locks, self.guard, self.hooks)
        self.reflections = Reflections(reflection_store, memories, self.toggles, lambda: self.clock(), self.hooks)
        self.reviews = ReviewRunner(self.reflections.review, self.hooks)
        self.legacy = Legacy(config.runtime_memory_dir, config.legacy_app_roots, self.registry, self.hooks)
        self.recent.on_saved = self.reviews.cancel
        self.recent.on_appended = self._appended
        self.recent.on_flushed = self._flushed
        self._flusher = Ticker("memsvc-recent-flush", config.recent_flush_s, self.recent.flush_all)
        self._sweeper = Ticker("memsvc-reflection-sweep", config.reflection_sweep_s, self.reflections.sweep)

    @property
    def step_hook(self) -> Callable[[str], None] | None:
        """Test hook called with the name of each step (see `Hooks`)."""
        return self.hooks.step

    @step_hook.setter
    def step_hook(self, hook: Callable[[str], None] | None) -> None:
        self.hooks.step = hook

    def start(self) -> None:
        """Remove the temporary files killed writes left behind, then start the background
        loops; appends journaled before a crash flush on the first tick."""
        removed = self.roots.clean_temp_files() + clean_temp_files(self.config.config_dir, depth=0)
        if removed:
            log.info("recent.temp_files.removed", extra={"count": removed})
        self._flusher.start()
        self._sweeper.start()
        if self.store.pending_characters():
            self._flusher.wake()

    def close(self) -> None:
        """Stop the loops, flush every accepted append to its file, stop the reviews."""
        self._flusher.stop()
        self._sweeper.stop()
        self.recent.flush_all()
        self.reviews.close()

    # -- background ------------------------------------------------------------------------

    def _appended(self, name: str, pending: int) -> None:
        if pending >= self.config.recent_flush_messages:
            self._flusher.wake()

    def _flushed(self, name: str, human_texts: list[str]) -> None:
        try:
            enabled = self.toggles.get(REVIEW_KEY)
        except Exception:  # noqa: BLE001 - an unreadable switch skips the review, never the flush
            enabled = False
        if enabled:
            self.reviews.submit(name, human_texts)

    def flush_now(self) -> int:
        return self.recent.flush_all()

    def sweep_now(self) -> int:
        return self.reflections.sweep()

    # -- recent files ----------------------------------------------------------------------

    def list_recent_files(self) -> list[str]:
        return self.recent.list_files()

    def get_recent_file(self, filename: str) -> RecentSnapshot:
        return self.recent.get(filename)

    def save_recent_file(self, request: SaveRequest) -> SaveResult:
        return self.recent.save(request)

    def append_recent_messages(self, character: str, messages: list[ChatItem]) -> AppendResult:
        return self.recent.append(character, messages)

    # -- rename ----------------------------------------------------------------------------

    def rename(self, request: RenameRequest) -> RenameResult:
        old = validate_old_name("old_name", request.old_name, alias=request.alias)
        new = validate_new_name("new_name", request.new_name, alias=request.alias)
        self.guard.check()
        with self.registry.lock:
            data = self.registry.load()
            names = set(data["猫娘"])
            if old not in names:
                if request.alias and new in names:
                    return self._already_renamed(old, new, names)
                raise NotFoundError(f"character {old!r} is not registered")
            if new in names:
                raise ValidationError.single("new_name", f"{new!r} is already a registered character")
            self._check_rename_target(old, new, names)
            RenameTransaction(self._rename_parts(), old, new, data).run()
        return RenameResult(changed=True)

    def _has_storage(self, name: str, registered: set[str]) -> bool:
        return bool(self.roots.storage_entries(name, registered - {name})) or self.store.owns_rows(name, owner_id(name))

    def _already_renamed(self, old: str, new: str, names: set[str]) -> RenameResult:
        """The alias called again after the rename completed: a no-op, unless storage of the
        old name is left (a partial rename must be repaired, not hidden)."""
        if self._has_storage(old, names):
            raise ConflictError(
                f"{new!r} is registered but storage of {old!r} remains: repair it through "
                f"POST /api/characters/catgirl/{{old_name}}/rename",
                reason=PARTIAL_RENAME,
            )
        return RenameResult(changed=False, already_renamed=True, exists_after=self._has_storage(new, names))

    def _check_rename_target(self, old: str, new: str, names: set[str]) -> None:
        """Nothing of `old` may land on an existing entry or in a registered character's
        folder, and every folder the rename writes must be writable, links refused."""
        if self._has_storage(new, names):
            raise ConflictError(
                f"storage of {new!r} already exists; move or purge it first", reason=RENAME_TARGET_EXISTS
            )
        others = names - {old}
        moves = self.roots.folder_moves(old, new) + self.roots.flat_moves(old, new, others)
        for source, target in moves:
            if exists_no_follow(source) and (exists_no_follow(target) or target.name in others):
                raise ConflictError(
                    f"{target.name!r} already exists or is a registered character's folder; move or purge it first",
                    reason=RENAME_TARGET_EXISTS,
                )
        folders = {p.parent for p in self.roots.storage_entries(old, others)} | {self.registry.path.parent}
        for folder in sorted(folders):
            self.guard.check_dir(folder)
        check_writable(self.registry.path.parent, [self.registry.path.name])

    def _rename_parts(self) -> RenameParts:
        return RenameParts(
            self.roots,
            self.registry,
            self.store,
            self.locks,
            self.reviews,
            self.reflections.lock,
            self.hooks,
            self.memories.read_cache.clear,
            self._reowned,
            lambda: self.clock(),
        )

    def _reowned(self, memory_ids: list[str]) -> None:
        """Vector indexes are partitioned by owner: re-index the moved memories under the
        new one (best effort; what fails is marked needs_reindex by the vector tier)."""
        try:
            self.memories.events.written(memory_ids)
        except Exception as exc:  # noqa: BLE001 - the rename itself is committed
            log.error("rename.reindex.failed", extra={"error_type": type(exc).__name__})

    # -- legacy ----------------------------------------------------------------------------

    def scan_legacy(self) -> LegacyScan:
        return self.legacy.scan()

    def purge_legacy(self, paths: list[Any]) -> PurgeResult:
        return self.legacy.purge(paths)

    # -- switches --------------------------------------------------------------------------

    def get_review_config(self) -> bool:
        return self.toggles.get(REVIEW_KEY)

    def set_review_config(self, value: Any) -> bool:
        enabled = strict_bool(value)
        self.guard.check_dir(self.toggles.path.parent)
        return self.toggles.set(REVIEW_KEY, enabled)

    def get_powerful_memory_config(self) -> bool:
        return self.toggles.get(POWERFUL_KEY)

    def set_powerful_memory_config(self, value: Any) -> bool:
        """ON → OFF first restarts the 14-day clock of every confirmed reflection, so old
        items are not promoted at once by the time-driven fallback; the setting is saved
        only when that worked."""
        enabled = strict_bool(value)
        self.guard.check_dir(self.toggles.path.parent)

        def migrate(current: bool) -> None:
            if current and not enabled:
                try:
                    self.reflections.reset_confirmed()
                except Exception as exc:
                    raise OperationFailedError(
                        f"Powerful Memory migration failed ({type(exc).__name__}: {exc}); the setting was not saved"
                    ) from exc

        return self.toggles.set(POWERFUL_KEY, enabled, before_save=migrate)
