"""The character registry: `<data>/config/characters.json`, in the companion app's layout.

`猫娘` maps each character name to its profile, `当前猫娘` names the current character.
We add `rename_history` (the last 20 renames), which also tells a writer still using an
old name where that character went. Every change goes through `lock` and is written
atomically, so the file is never torn and a rename can restore it byte for byte.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from memsvc.characters.fsutil import atomic_write_bytes, atomic_write_text, unlink_file
from memsvc.characters.process_lock import ProcessLock
from memsvc.kernel.errors import UnavailableError

CHARACTERS_KEY = "猫娘"
CURRENT_KEY = "当前猫娘"
HISTORY_KEY = "rename_history"
HISTORY_LIMIT = 20


class Registry:
    def __init__(self, path: Path, lock: ProcessLock | None = None):
        self.path = path
        # Re-entrant: a rename holds it for the whole transaction and calls helpers that
        # take it too. A ProcessLock also keeps the other server processes sharing the data
        # dir out (two appends registering two new characters at once must keep both).
        self.lock = lock or threading.RLock()

    def raw(self) -> bytes | None:
        """The file's exact bytes (None when absent): a rename's backup."""
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    def restore(self, raw: bytes | None) -> None:
        with self.lock:
            if raw is None:
                unlink_file(self.path.parent, self.path.name)
            else:
                atomic_write_bytes(self.path.parent, [self.path.name], raw)

    def load(self) -> dict[str, Any]:
        raw = self.raw()
        if raw is None:
            return {CHARACTERS_KEY: {}, CURRENT_KEY: ""}
        try:
            data = json.loads(raw.decode("utf-8"))
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get(CHARACTERS_KEY, {}), dict):
            raise UnavailableError(f"{self.path.name} cannot be parsed; fix or remove it")
        data.setdefault(CHARACTERS_KEY, {})
        return data

    def save(self, data: dict[str, Any]) -> None:
        with self.lock:
            atomic_write_text(self.path.parent, [self.path.name], json.dumps(data, ensure_ascii=False, indent=2))

    def names(self) -> set[str]:
        return set(self.load()[CHARACTERS_KEY])

    def is_registered(self, name: str) -> bool:
        return name in self.load()[CHARACTERS_KEY]

    def register(self, name: str) -> None:
        """Add `name` with an empty profile (an unknown character met by an append)."""
        with self.lock:
            data = self.load()
            if name in data[CHARACTERS_KEY]:
                return
            data[CHARACTERS_KEY][name] = {}
            if not data.get(CURRENT_KEY):
                data[CURRENT_KEY] = name
            self.save(data)

    def resolve(self, name: str) -> str:
        """Where a writer using `name` should write: itself when registered, else the name
        it was last renamed to (followed through later renames)."""
        data = self.load()
        characters = data[CHARACTERS_KEY]
        history = [e for e in data.get(HISTORY_KEY, []) if isinstance(e, dict)]
        seen = {name}
        while name not in characters:
            target = next((e.get("new") for e in reversed(history) if e.get("old") == name), None)
            if not isinstance(target, str) or target in seen:
                break
            seen.add(target)
            name = target
        return name


def renamed(data: dict[str, Any], old: str, new: str, at: datetime) -> dict[str, Any]:
    """A copy of the registry with `old`'s profile under `new` (in the same place), a
    rename event appended (the last 20 kept), and the current character updated."""
    out = dict(data)
    out[CHARACTERS_KEY] = {(new if k == old else k): v for k, v in data[CHARACTERS_KEY].items()}
    if out.get(CURRENT_KEY) == old:
        out[CURRENT_KEY] = new
    history = [e for e in data.get(HISTORY_KEY, []) if isinstance(e, dict)]
    history.append({"old": old, "new": new, "at": at.isoformat()})
    out[HISTORY_KEY] = history[-HISTORY_LIMIT:]
    return out
