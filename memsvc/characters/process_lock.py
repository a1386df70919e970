"""A lock that one thread of one process holds at a time, for the character files.

Several server processes share a data dir, and each runs its own flusher of appended
messages, saves and renames. A flush reads the file and the pending appends, writes the
file with them and deletes the rows it wrote. Two processes doing that for one character at
once lose messages: A reads the file and rows [1]; B, which has just accepted row 2, reads
the same file and rows [1, 2], writes both and deletes them; A then replaces the file with
its own view (row 1 only) and row 2 is gone from the file and the journal alike. A save
racing a flush loses rows the same way, and a process that sees the file change under it
takes it for another writer and changes the file's identity (a spurious conflict). So every
read-and-write of a character (and of the registry and switch files, read-modify-write too)
runs under a lock that also excludes the other processes.

Why `fcntl.flock` on a lock file rather than a lease row with a TTL: the kernel releases the
lock the moment its holder dies, even by SIGKILL, so nothing waits out an expiry and no
heartbeat is needed; and while a holder is alive the lock stays its own however long it
stalls, whereas a lease could expire under a stalled writer mid-write and let a second one
write the same file at the same time (a TTL cannot fence a file write). Lock files live
under `<data-dir>/locks/` (a local file system, as SQLite's WAL mode needs too), named by a
hash of what they guard, and are never deleted (deleting a lock file others may have open
would let two holders lock two different files).

Within a process an RLock orders the threads first, so only one thread per process waits
in flock, and a thread that already holds the lock may take it again (a rename holds a
character while calling helpers that lock it too).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from pathlib import Path

LOCK_FILE_MODE = 0o600


class ProcessLock:
    """Re-entrant; the flock is taken on the outermost acquire and dropped on its release."""

    def __init__(self, path: Path):
        self.path = path
        self._threads = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    def acquire(self) -> bool:
        self._threads.acquire()
        try:
            if self._depth == 0:
                self._fd = _locked_fd(self.path)
            self._depth += 1
        except BaseException:
            self._threads.release()
            raise
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)  # closing the only descriptor releases the flock
        self._threads.release()

    def __enter__(self) -> ProcessLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _locked_fd(path: Path) -> int:
    """A descriptor of `path` (created if missing, never through a link) holding LOCK_EX;
    blocks while another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, LOCK_FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def lock_path(folder: Path, kind: str, name: str) -> Path:
    """The lock file of `name` (any text: a character name) among the `kind` locks."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return folder / kind / f"{digest}.lock"
