"""Recent-history files: list, read with snapshot tokens, guarded save, durable appends and
their ordered flush.

What a client sees of a character (`content`) is the file followed by the appends still
pending, rendered exactly as the flush will write them; so the fingerprint of a GET stays
valid across a flush, and a save is checked against everything accepted so far. All of it
happens under the character's lock. Appends only journal rows (SQLite) and never touch the
file, so the chat pipeline is never blocked by an editor's save.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memsvc.characters import messages as fmt
from memsvc.characters.common import CharacterLocks, Hooks, Roots, StorageGuard, check_writes_owner, may_address
from memsvc.characters.fsutil import atomic_write_text, check_writable, is_real_file, signature
from memsvc.characters.models import AppendResult, ChatItem, RecentSnapshot, SaveRequest, SaveResult
from memsvc.characters.names import character_from_filename, logical_filename, validate_new_name
from memsvc.characters.registry import Registry
from memsvc.characters.theater import merge_chat
from memsvc.kernel.errors import ConflictError, NotFoundError, UnavailableError, ValidationError, shorten
from memsvc.storage.character_store import CharacterStore, PendingRow

log = logging.getLogger("memsvc.characters.recent")

MAX_ITEMS = 10_000
MAX_TEXT_CHARS = 32_768
MAX_TOTAL_CHARS = 2_097_152
RECENT_FILE_CONFLICT = "RECENT_FILE_CONFLICT"


def validate_chat(items: Sequence[ChatItem], field: str) -> None:
    """The limits of a chat list, in the spec's order; inclusive; 400 naming the rule."""
    if len(items) > MAX_ITEMS:
        raise ValidationError.single(field, f"must have at most {MAX_ITEMS} items, got {len(items)}")
    total = 0
    for i, item in enumerate(items):
        if not isinstance(item.role, str):
            raise ValidationError.single(f"{field}[{i}].role", "must be a string")
        if item.text is None:
            continue
        if not isinstance(item.text, str):
            raise ValidationError.single(f"{field}[{i}].text", "must be a string")
        if len(item.text) > MAX_TEXT_CHARS:
            raise ValidationError.single(f"{field}[{i}].text", f"must be at most {MAX_TEXT_CHARS} characters")
        total += len(item.text)
    if total > MAX_TOTAL_CHARS:
        raise ValidationError.single(field, f"texts must total at most {MAX_TOTAL_CHARS} characters, got {total}")


@dataclass
class View:
    """A character's history as a client sees it, with what it is made of."""

    name: str
    path: Path  # where it is, or where it would be created
    on_disk: bool
    disk_text: str | None
    pending: list[PendingRow] = field(default_factory=list)  # the rows included in content
    content: str = ""
    generation: int | None = None  # None: nothing there

    @property
    def fingerprint(self) -> str:
        return fmt.fingerprint(self.content)

    @property
    def identity(self) -> str:
        assert self.generation is not None
        return fmt.identity_token(self.path, self.generation)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise UnavailableError(f"cannot read {path.name}: {exc.strerror}") from None


class RecentFiles:
    def __init__(
        self,
        roots: Roots,
        store: CharacterStore,
        registry: Registry,
        locks: CharacterLocks,
        guard: StorageGuard,
        hooks: Hooks,
    ):
        self.roots = roots
        self.store = store
        self.registry = registry
        self.locks = locks
        self.guard = guard
        self.hooks = hooks
        # Set by the owner: what happens after a save (cancel the review), after an
        # append (maybe flush at once) and after a flush (start a review).
        self.on_saved: Callable[[str], None] = lambda name: None
        self.on_appended: Callable[[str, int], None] = lambda name, pending: None
        self.on_flushed: Callable[[str, list[str]], None] = lambda name, texts: None

    # -- reading ---------------------------------------------------------------------------

    def list_files(self) -> list[str]:
        """Logical names of every real history in both roots, plus characters whose
        history exists so far only as pending appends; for a confined caller only the
        characters whose owner it covers (`may_address`): the names of the others' chats
        are not its to see."""
        found: set[str] = set()
        for root in self.roots.all():
            found |= self._scan(root)
        found |= {logical_filename(n) for n in self.store.pending_characters()}
        return sorted(f for f in found if _readable(f))

    @staticmethod
    def _scan(root: Path) -> set[str]:
        try:
            entries = list(os.scandir(root))
        except OSError:
            return set()
        found: set[str] = set()
        for entry in entries:
            if entry.is_symlink():
                continue
            if (
                entry.is_file(follow_symlinks=False)
                and entry.name.startswith("recent_")
                and entry.name.endswith(".json")
            ):
                found.add(entry.name)
            elif (
                entry.is_dir(follow_symlinks=False)
                and not entry.name.startswith("semantic_memory_")
                and is_real_file(Path(entry.path) / "recent.json")
            ):
                found.add(logical_filename(entry.name))
        return found

    def get(self, filename: str) -> RecentSnapshot:
        name = character_from_filename(filename)
        with self.locks.get(name):
            view = self.view(name)
        if view.generation is None:
            raise NotFoundError(f"{shorten(filename)} not found")
        return RecentSnapshot(view.content, view.fingerprint, view.identity)

    def view(self, name: str) -> View:
        """The current history of `name` (call under its lock)."""
        path = self.roots.resolve(name)
        disk_text = _read_text(path) if path is not None else None
        if disk_text is None:
            path = None
        rows = self.store.pending(name)
        if rows and disk_text is not None:
            rows = self._drop_already_written(rows, disk_text)
        if path is None and not rows:
            self._forget(name)
            return View(name, self.roots.default(name), False, None)
        view = View(name, path or self.roots.default(name), path is not None, disk_text)
        disk_messages = fmt.parse_messages(disk_text) if path is not None else []
        if rows and disk_messages is not None:
            view.pending = rows
            view.content = fmt.render(disk_messages + [fmt.message_dict(r.role, r.text) for r in rows])
        else:
            view.content = disk_text or ""
        view.generation = self._observe(view.path, view.on_disk)
        return view

    def _drop_already_written(self, rows: list[PendingRow], disk_text: str) -> list[PendingRow]:
        """Rows a write already put on disk before a crash kept it from deleting them."""
        on_disk = fmt.fingerprint(disk_text)
        written = [r.id for r in rows if r.consumed_by == on_disk]
        if not written:
            return rows
        self.store.delete_pending(written)
        return [r for r in rows if r.id not in set(written)]

    def _forget(self, name: str) -> None:
        """Nothing is there any more: the next activation of these paths is a new identity."""
        keys = [fmt.path_key(p) for p, _ in self.roots.candidates(name)]
        active = self.store.active_paths(keys)
        if active:
            self.store.deactivate(active)

    def _observe(self, path: Path, on_disk: bool) -> int:
        """The generation of `path` now, bumping it when the path was (re)activated or the
        file was replaced by another writer since memsvc last saw it."""
        key = fmt.path_key(path)
        row = self.store.generation(key)
        current = signature(path) if on_disk else None
        if row is None or not row.active:
            return self.store.activate(key, current)
        if on_disk and row.signature is None:
            self.store.set_generation(key, row.generation, True, current)
            return row.generation
        if row.signature != current:
            return self.store.activate(key, current)
        return row.generation

    # -- writing ---------------------------------------------------------------------------

    def save(self, request: SaveRequest) -> SaveResult:
        name = character_from_filename(request.filename)
        validate_chat(request.chat, "chat")
        if request.fingerprint is None or request.identity_token is None:
            raise ConflictError(
                "fingerprint and identity_token are required: reload the file and edit that snapshot", reason=""
            )
        self.guard.check()
        with self.locks.get(name):
            view = self.view(name)
            if (
                view.generation is None
                or view.identity != request.identity_token
                or view.fingerprint != request.fingerprint
            ):
                raise _conflict(view)
            self.guard.check_dir(view.path.parent)
            text = fmt.render(merge_chat(fmt.parse_messages(view.content) or [], request.chat))
            self._commit(view, text, "save.commit")
            self.on_saved(name)
        return SaveResult(name, fmt.fingerprint(text), view.identity)

    def _commit(self, view: View, text: str, step: str) -> None:
        """Write `text` as the history of `view` and retire the pending rows it includes."""
        ids = [r.id for r in view.pending]
        self.hooks.fire(step)
        if ids:
            self.store.mark_consumed(ids, fmt.fingerprint(text))
        root, parts = self.roots.locate(view.path)
        try:
            atomic_write_text(root, parts, text)
        except Exception as exc:  # the rows stay pending, untagged: nothing accepted is dropped
            if ids:
                self.store.mark_consumed(ids, None)
            if isinstance(exc, OSError):
                raise UnavailableError(f"cannot write the history of {shorten(view.name)}: {exc.strerror}") from None
            raise
        key = fmt.path_key(view.path)
        row = self.store.generation(key)
        if row is not None and row.active:
            self.store.set_generation(key, row.generation, True, signature(view.path))
        else:
            self.store.activate(key, signature(view.path))
        self.hooks.fire(f"{step}.written")  # a crash here is what consumed_by is for
        if ids:
            self.store.delete_pending(ids)

    def append(self, character: str, items: Sequence[ChatItem]) -> AppendResult:
        if not items:
            raise ValidationError.single("messages", "must not be empty")
        validate_chat(items, "messages")
        self.guard.check()
        with self.registry.lock:
            name, registered = self._append_target(character)
            check_writes_owner(name)
            self._check_writable(name)
            if not registered:
                self.guard.check_dir(self.registry.path.parent)
                self.registry.register(name)
            pending = self.store.add_pending(name, [(i.role, i.text or "") for i in items])
        self.on_appended(name, pending)
        return AppendResult(len(items), pending)

    def _append_target(self, character: str) -> tuple[str, bool]:
        """The character to append to (following renames) and whether it is registered."""
        if not character or not character.strip():
            raise ValidationError.single("character", "is required")
        target = self.registry.resolve(character)
        if self.registry.is_registered(target):
            return target, True
        name = validate_new_name("character", character)
        return name, self.registry.is_registered(name)

    def _check_writable(self, name: str) -> None:
        """Refuse an append the flush could not write (a symbolic link where the history
        goes) before accepting it, rather than accept and then keep failing to write it.
        A link planted after acceptance is refused by the flush itself, which keeps the rows
        pending (and visible to GET) until the link is gone."""
        root, parts = self.roots.locate(self.roots.resolve(name) or self.roots.default(name))
        check_writable(root, parts)

    def flush(self, name: str) -> int:
        """Write the pending appends of `name` after its file, in order."""
        with self.locks.get(name):
            view = self.view(name)
            if not view.pending:
                if self.store.pending(name):
                    log.error("recent.flush.skipped", extra={"reason": "file is not a JSON list"})
                return 0
            self._commit(view, view.content, "flush.commit")
        self.on_flushed(name, [r.text for r in view.pending if r.role == "human"])
        return len(view.pending)

    def flush_all(self) -> int:
        flushed = 0
        for name in self.store.pending_characters():
            try:
                flushed += self.flush(name)
            except Exception as exc:  # noqa: BLE001 - one character's failure must not stop the others
                log.error(
                    "recent.flush.failed",
                    extra={"error_type": type(exc).__name__, "reason": getattr(exc, "reason", "")},
                )
        return flushed


def _readable(filename: str) -> bool:
    """A file GetRecentFile would serve to the calling request (a name it can parse, of a
    character the caller may address)."""
    try:
        name = character_from_filename(filename)
    except ValidationError:
        return False
    return may_address(name)


def _conflict(view: View) -> ConflictError:
    current = (
        {"fingerprint": view.fingerprint, "identity_token": view.identity}
        if view.generation is not None
        else {"fingerprint": "", "identity_token": ""}
    )
    return ConflictError(
        "the file changed since it was read (or was deleted): GET it again and merge your "
        "edits; do not resend the old chat with the new tokens",
        reason=RECENT_FILE_CONFLICT,
        metadata=current,
    )
