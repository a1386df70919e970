"""Legacy storage: memory folders older app versions left behind, shown (scan) and removed
only when a person picks them (purge).

Purge is destructive, so every path is checked on its own and refused unless it resolves
strictly below a known legacy root, outside the runtime memory root, without `..` and
without a symbolic link leading out of the root; the removal then walks down from the root
without following any link, so a link swapped in after the check is refused, not followed.
One bad path never stops the others, and a path already gone counts as removed, so a retry
after a partial failure is harmless.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsvc.characters.common import Hooks
from memsvc.characters.fsutil import remove_entry
from memsvc.characters.models import LegacyEntry, LegacyRoot, LegacyScan, PurgeError, PurgeResult
from memsvc.characters.registry import Registry
from memsvc.kernel.errors import ConflictError, PreconditionError, ValidationError

SOURCE = "legacy_app_root"
MAX_SIZE_ENTRIES = 50_000
RETRY_AFTER_S = 0.3
NO_LEGACY_ROOTS = "NO_LEGACY_ROOTS"
_RECENT_FILE = re.compile(r"recent_(.+)\.json", re.DOTALL)


def _below(path: str, root: str, *, strictly: bool) -> bool:
    if path == root:
        return not strictly
    return path.startswith(root.rstrip(os.sep) + os.sep)


def tree_size(path: str) -> int:
    """Bytes of the files under `path`, links not followed; -1 on an error or past 50,000
    entries (a size the user could not wait for is not worth showing)."""
    total, seen, stack = 0, 0, [path]
    try:
        while stack:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_SIZE_ENTRIES:
                        return -1
                    if entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_size
    except OSError:
        return -1
    return total


class Legacy:
    def __init__(
        self,
        runtime_root: Path,
        app_roots: tuple[str, ...],
        registry: Registry,
        hooks: Hooks,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.runtime_root = runtime_root
        self.app_roots = app_roots
        self.registry = registry
        self.hooks = hooks
        self.sleep = sleep

    def roots(self) -> list[tuple[str, str]]:
        """(shown path, resolved path) of each legacy root: `<app root>/memory`, de-duplicated
        by resolved path, the runtime root left out."""
        runtime = os.path.realpath(self.runtime_root)
        seen: set[str] = set()
        out = []
        for candidate in self.app_roots:
            shown = os.path.abspath(os.path.join(candidate, "memory"))
            real = os.path.realpath(shown)
            if real == runtime or real in seen:
                continue
            seen.add(real)
            out.append((shown, real))
        return out

    # -- scan ------------------------------------------------------------------------------

    def scan(self) -> LegacyScan:
        registered = self._registered()
        roots = [self._scan_root(shown, registered) for shown, _ in self.roots()]
        entries = [e for r in roots for e in r.entries]
        return LegacyScan(
            roots,
            os.path.abspath(self.runtime_root),
            len(entries),
            sum(e.size_bytes for e in entries if e.size_bytes > 0),
        )

    def _registered(self) -> set[str]:
        try:
            return self.registry.names()
        except Exception:  # noqa: BLE001 - a broken registry only makes everything "unlinked"
            return set()

    def _scan_root(self, root: str, registered: set[str]) -> LegacyRoot:
        if not os.path.isdir(root):
            return LegacyRoot(root, SOURCE, False, [])
        try:
            with os.scandir(root) as it:
                children = sorted(
                    (e for e in it if not e.name.startswith((".", "_")) and not e.is_symlink()), key=lambda e: e.name
                )
        except OSError:
            return LegacyRoot(root, SOURCE, True, [])
        return LegacyRoot(root, SOURCE, True, [self._entry(e, registered) for e in children])

    def _entry(self, entry: os.DirEntry, registered: set[str]) -> LegacyEntry:
        is_dir = entry.is_dir(follow_symlinks=False)
        if is_dir:
            size = tree_size(entry.path)
        else:
            try:
                size = entry.stat(follow_symlinks=False).st_size
            except OSError:
                size = -1
        match = None if is_dir else _RECENT_FILE.fullmatch(entry.name)
        character = match.group(1) if match else entry.name
        return LegacyEntry(
            entry.name,
            entry.path,
            is_dir,
            size,
            character not in registered,
            os.path.isdir(self.runtime_root / entry.name),
        )

    # -- purge -----------------------------------------------------------------------------

    def purge(self, paths: list[Any]) -> PurgeResult:
        if not paths:
            raise ValidationError.single("paths", "must be a non-empty list of absolute paths")
        roots = [real for _, real in self.roots()]
        if not roots:
            raise ConflictError("no legacy roots are configured (MEMSVC_LEGACY_APP_ROOTS)", reason=NO_LEGACY_ROOTS)
        result = PurgeResult()
        for value in paths:
            target, problem = self._check(value, roots)
            if problem is None:
                problem = self._remove(target, roots)
            if problem is None:
                result.removed.append(target)
            else:
                result.errors.append(PurgeError(_shown(value), problem))
        return result

    def _check(self, value: Any, roots: list[str]) -> tuple[str, str | None]:
        if not isinstance(value, str) or not value.strip():
            return "", "must be a non-blank string"
        if ".." in value.replace("\\", "/").split("/"):
            return "", "must not contain '..' segments"
        if "\x00" in value or not os.path.isabs(value):
            return "", "must be an absolute path"
        lexical = os.path.normpath(value)
        target = os.path.join(os.path.realpath(os.path.dirname(lexical)), os.path.basename(lexical))
        resolved = os.path.realpath(target)
        runtime = os.path.realpath(self.runtime_root)
        if any(_below(p, runtime, strictly=False) for p in (target, resolved)):
            return target, "is the runtime memory folder or inside it"
        if not any(_below(target, r, strictly=True) for r in roots):
            return target, "is not strictly inside a known legacy root"
        if os.path.islink(target) and not any(_below(resolved, r, strictly=True) for r in roots):
            return target, "is a symbolic link pointing outside the legacy roots"
        return target, None

    def _remove(self, target: str, roots: list[str]) -> str | None:
        """None when `target` is gone (removed now or already), else why not."""
        root = next(r for r in roots if _below(target, r, strictly=True))
        parts = target[len(root.rstrip(os.sep)) + 1 :].split(os.sep)
        for attempt in (1, 2):
            try:
                self.hooks.fire("legacy.remove")
                remove_entry(Path(root), parts)
                return None
            except PreconditionError as exc:
                return exc.message
            except FileNotFoundError:
                return None
            except PermissionError as exc:
                if attempt == 1:
                    self.sleep(RETRY_AFTER_S)
                    continue
                return f"permission denied: {exc.strerror or exc}"
            except OSError as exc:
                if not os.path.lexists(target):
                    return None
                return exc.strerror or str(exc)
        return None  # pragma: no cover - the loop always returns


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
