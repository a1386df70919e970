"""What the kernel says about processes (Linux /proc): alive or not, and every process below
one. `memsvc cluster` and the local PostgreSQL use it to stop everything they started and to
make sure it is gone; the tests use the same functions to prove it."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
_SIGTERM = int(signal.SIGTERM)
#: prctl(2), looked up once, in the parent: `die_with_parent` runs between fork and exec, where
#: a lookup (dlopen takes the loader's lock and allocates) could meet a lock another thread of
#: the parent held at the fork, and crash or hang the child. The argument types are fixed here
#: for the same reason: the call in the child then converts two small ints and nothing else.
#: None where there is no prctl (not Linux): the child then is not tied to its parent.
_PRCTL = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
if _PRCTL is not None:
    _PRCTL.argtypes = (ctypes.c_int, ctypes.c_ulong)
    _PRCTL.restype = ctypes.c_int


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid), or None for no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()  # the command name in (...) may contain spaces
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    """Running or sleeping; a zombie (dead, not yet reaped by its parent) is not alive."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def wait_gone(pid: int, timeout_s: float = 30.0) -> bool:
    """Poll until `pid` is no longer alive; False if it still is after the (generous) bound."""
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def descendants(root: int) -> set[int]:
    """Every live process below `root`, at any depth."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        stat = _stat(pid)
        if stat is not None:
            children.setdefault(stat[1], []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {pid for pid in found if alive(pid)}


def die_with_parent() -> None:
    """A Popen preexec_fn: the child asks the kernel for SIGTERM when the process that
    started it dies, however it dies (Linux). It runs between fork and exec, in a copy of a
    parent that may have other threads (a server's, a test's), so it only calls the function
    found beforehand (`_PRCTL`): no lookup, no import, no allocation."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, _SIGTERM)
