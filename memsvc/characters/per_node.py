"""Character memory where it cannot be served: with a shared PostgreSQL store.

Character memory is a per-node capability: a desktop app's recent-history files, their
append journal and rename transaction in the node's own SQLite file, and file locks under
its data dir. Replicas sharing one PostgreSQL would each hold a different copy of that state
(and a rename re-owns rows of the SQLite file that the shared memories are not in), so every
character RPC is refused with FAILED_PRECONDITION instead of answering per replica.
"""

from __future__ import annotations

from typing import Any, NoReturn

from memsvc.kernel.errors import PreconditionError

REASON = "CHARACTER_MEMORY_PER_NODE"
MESSAGE = (
    "character memory is per node (a desktop app's files and their SQLite journal) and memsvc serves "
    "from the shared database of MEMSVC_DATABASE_URL: run character memory on one node without "
    "MEMSVC_DATABASE_URL"
)


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise PreconditionError(MESSAGE, reason=REASON)


class PerNodeCharacters:
    """What App wires instead of `Characters` with a shared store: the same methods, each
    refused (see the module docstring); no files, loops or database of its own."""

    step_hook = None
    list_recent_files = get_recent_file = save_recent_file = append_recent_messages = staticmethod(_refuse)
    rename = scan_legacy = purge_legacy = staticmethod(_refuse)
    get_review_config = set_review_config = staticmethod(_refuse)
    get_powerful_memory_config = set_powerful_memory_config = staticmethod(_refuse)

    def start(self) -> None:
        """Nothing to start: no recent files are flushed and no reflections swept."""

    def close(self) -> None:
        """Nothing to close."""

    def flush_now(self) -> int:
        return 0

    def sweep_now(self) -> int:
        return 0
