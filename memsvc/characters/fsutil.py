"""File-system primitives the character files need: atomic replacement, and telling real
files and folders from symbolic links (which never count as a character's storage)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new entry in `folder` durable (the entry lives in the folder)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8) so that a crash leaves the old file or the new one:
    a temporary file in the same folder, fsync, rename over, fsync of the folder."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name[:40]}-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8", "surrogatepass"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(folder)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (OSError, ValueError):
        return None


def is_real_file(path: Path) -> bool:
    st = _lstat(path)
    return st is not None and stat.S_ISREG(st.st_mode)


def is_real_dir(path: Path) -> bool:
    st = _lstat(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def exists_no_follow(path: Path) -> bool:
    return _lstat(path) is not None


def signature(path: Path) -> str | None:
    """Identity of the file object now at `path`: device, inode, change time and size. A
    file replaced or re-created by someone else gets a different one."""
    st = _lstat(path)
    if st is None:
        return None
    return f"{st.st_dev}:{st.st_ino}:{st.st_ctime_ns}:{st.st_size}"


def writable_dir(folder: Path) -> bool:
    """Whether entries can be created in `folder` (or, if it does not exist yet, in the
    nearest folder above it that does)."""
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    return probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)


def move(source: Path, target: Path) -> None:
    """Rename within one file system, then make both folders' entries durable."""
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(source, target)
    fsync_dir(target.parent)
    if source.parent != target.parent:
        fsync_dir(source.parent)
