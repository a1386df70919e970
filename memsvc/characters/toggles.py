"""The two switches in `<data>/config/core_config.json`: auto review of recent memory and
Powerful Memory. The file is shared with the companion app, so other keys are kept as
they are, writes are atomic and one at a time, and a file that cannot be parsed is
reported (503) rather than guessed at.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsvc.characters.fsutil import atomic_write_text
from memsvc.characters.process_lock import ProcessLock
from memsvc.kernel.errors import UnavailableError, ValidationError

REVIEW_KEY = "recent_memory_auto_review"
POWERFUL_KEY = "powerful_memory_enabled"
DEFAULTS = {REVIEW_KEY: True, POWERFUL_KEY: True}


def strict_bool(value: Any) -> bool:
    """`enabled` must be a JSON boolean: "yes", 1, "true" or null are refused."""
    if not isinstance(value, bool):
        raise ValidationError.single("enabled", "must be a JSON boolean (true or false)")
    return value


class CoreConfig:
    def __init__(self, path: Path, lock: ProcessLock | None = None):
        self.path = path
        # A ProcessLock also keeps the other server processes out of the read-modify-write.
        self.lock = lock or threading.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise UnavailableError(f"{self.path.name} cannot be read: {exc.strerror}") from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise UnavailableError(f"{self.path.name} cannot be parsed as a JSON object; fix or remove it")
        return data

    def get(self, key: str) -> bool:
        value = self._read().get(key, DEFAULTS[key])
        if not isinstance(value, bool):
            raise UnavailableError(f"{self.path.name}: {key} is not a boolean; fix or remove it")
        return value

    def set(self, key: str, enabled: bool, before_save: Callable[[bool], None] | None = None) -> bool:
        """Write `key` (other keys untouched). `before_save(current)` runs first, under the
        same lock, and a failure there leaves the file as it was."""
        with self.lock:
            data = self._read()
            current = data.get(key, DEFAULTS[key])
            if before_save is not None:
                before_save(current if isinstance(current, bool) else DEFAULTS[key])
            data[key] = enabled
            atomic_write_text(self.path.parent, [self.path.name], json.dumps(data, ensure_ascii=False, indent=2))
        return enabled
