"""File-system primitives the character files need: atomic replacement, moves, removals and
the clean-up of temporary files, none of which ever follows a symbolic link inside a
storage root; and telling real files and folders from links (which never count as a
character's storage).

A storage root is a folder memsvc owns (the runtime and project memory roots, the config
folder, a legacy root). The root itself is opened as configured, so an operator may point
it at a link on purpose; below it, every folder is opened relative to its parent's
descriptor with O_NOFOLLOW and every file is created, replaced, renamed or removed relative
to its folder's descriptor. A link planted at any level, even while a write runs, is
therefore refused (FAILED_PRECONDITION, reason UNSAFE_STORAGE_PATH) instead of followed.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from memsvc.kernel.errors import PreconditionError, shorten

UNSAFE_STORAGE_PATH = "UNSAFE_STORAGE_PATH"
# A new file gets this mode minus the process umask (0644 under the usual umask 022), like
# any file the companion app writes; a replaced file keeps its mode and, where the process
# may set it, its owner.
NEW_FILE_MODE = 0o666
TEMP_PREFIX = ".tmp-"
_TEMP_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789_"
# Only the temporary files of our own atomic writes (the target's name cut at 40
# characters, then 8 random characters) are ever cleaned up.
_TEMP_NAME = re.compile(r"\.tmp-(?:recent\.json|recent_.*|characters\.json|core_config\.json)-[a-z0-9_]{8}", re.DOTALL)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _refusal(parts: Sequence[str], what: str) -> PreconditionError:
    shown = shorten("/".join(parts))
    return PreconditionError(
        f"{shown} in a storage folder is {what}; memsvc never writes through a symbolic "
        "link inside its storage folders: replace it with a real folder or file",
        reason=UNSAFE_STORAGE_PATH,
    )


def _lstat_at(fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _kind(st: os.stat_result | None, wanted: str) -> str:
    if st is not None and stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    return f"not a {wanted}"


def _open_root(root: Path, create: bool) -> int:
    if create:
        os.makedirs(root, exist_ok=True)
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _open_child(fd: int, parts: Sequence[str], i: int, create: bool) -> int:
    """The folder `parts[i]` inside `fd`, created when missing and `create`, never a link."""
    name = parts[i]
    if name in ("", ".", "..") or "/" in name or "\x00" in name:
        raise ValueError(f"not a single path component: {name!r}")
    for _ in range(2):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except NotADirectoryError:
            raise _refusal(parts[: i + 1], _kind(_lstat_at(fd, name), "folder")) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a link, on systems that report it so
                raise _refusal(parts[: i + 1], "a symbolic link") from None
            if not (create and isinstance(exc, FileNotFoundError)):
                raise
        try:
            os.mkdir(name, dir_fd=fd)
            os.fsync(fd)  # the new folder's entry is durable before anything goes into it
        except FileExistsError:
            pass
    raise FileNotFoundError(name)  # pragma: no cover - created, then removed at once by someone


@contextmanager
def open_folder(root: Path, parts: Sequence[str] = (), *, create: bool = False) -> Iterator[int]:
    """A descriptor of `root/parts...`, each part opened without following a link (and
    created when missing, with `create`). FileNotFoundError when a part is missing."""
    fd = _open_root(root, create)
    try:
        for i in range(len(parts)):
            child = _open_child(fd, parts, i, create)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _keep_owner_and_mode(fd: int, original: os.stat_result) -> None:
    """A replaced file keeps its mode, and its owner where this process may set it (only a
    privileged process can give a file away; others keep their own)."""
    mine = os.fstat(fd)
    if (original.st_uid, original.st_gid) != (mine.st_uid, mine.st_gid):
        try:
            os.fchown(fd, original.st_uid, original.st_gid)
        except PermissionError:
            pass
    os.fchmod(fd, stat.S_IMODE(original.st_mode))


def _create_temp(fd: int, name: str) -> tuple[str, int]:
    while True:
        tmp = f"{TEMP_PREFIX}{name[:40]}-{''.join(secrets.choice(_TEMP_ALPHABET) for _ in range(8))}"
        try:
            return tmp, os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, NEW_FILE_MODE, dir_fd=fd
            )
        except FileExistsError:
            continue


def atomic_write_bytes(root: Path, relative: Sequence[str], data: bytes) -> None:
    """Replace `root/relative...` with `data` so that a crash leaves the old file or the new
    one: a temporary file in the same folder, fsync, rename over, fsync of the folder. The
    target must be a regular file or absent; a link there is refused, not replaced."""
    *dirs, name = relative
    with open_folder(root, dirs, create=True) as fd:
        current = _lstat_at(fd, name)
        if current is not None and not stat.S_ISREG(current.st_mode):
            raise _refusal(relative, _kind(current, "regular file"))
        tmp, tmp_fd = _create_temp(fd, name)
        try:
            with os.fdopen(tmp_fd, "wb") as handle:
                if current is not None:
                    _keep_owner_and_mode(handle.fileno(), current)
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass
            raise
        os.fsync(fd)


def atomic_write_text(root: Path, relative: Sequence[str], text: str) -> None:
    """`atomic_write_bytes` of `text` in UTF-8."""
    atomic_write_bytes(root, relative, text.encode("utf-8", "surrogatepass"))


def check_writable(root: Path, relative: Sequence[str]) -> None:
    """Refuse now what `atomic_write_bytes(root, relative)` would refuse (a link or a
    non-folder on the way, a non-regular file at the end), so a caller can say no before it
    accepts work; the write itself checks again."""
    *dirs, name = relative
    try:
        with open_folder(root, dirs) as fd:
            current = _lstat_at(fd, name)
    except FileNotFoundError:
        return
    if current is not None and not stat.S_ISREG(current.st_mode):
        raise _refusal(relative, _kind(current, "regular file"))


def move_entry(root: Path, source: str, target: str) -> None:
    """Rename the entry `source` of `root` to `target` (a link moves as the link itself),
    refusing to replace anything, then make the folder durable."""
    with open_folder(root) as fd:
        if _lstat_at(fd, target) is not None:
            raise FileExistsError(f"{shorten(target)} already exists")
        os.rename(source, target, src_dir_fd=fd, dst_dir_fd=fd)
        os.fsync(fd)


def unlink_file(root: Path, name: str) -> None:
    """Remove the file (or link) `name` of `root`; already gone is not an error."""
    try:
        with open_folder(root) as fd:
            os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        return


def remove_entry(root: Path, relative: Sequence[str]) -> None:
    """Remove `root/relative...`: a folder recursively (links inside are removed, never
    followed), anything else unlinked. Already gone is not an error."""
    *dirs, name = relative
    try:
        with open_folder(root, dirs) as fd:
            current = _lstat_at(fd, name)
            if current is None:
                return
            if stat.S_ISDIR(current.st_mode):
                shutil.rmtree(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        return


def clean_temp_files(root: Path, depth: int) -> int:
    """Remove the temporary files a killed write left in `root` and, to `depth` levels, in
    its real subfolders: only our own temp-file names, only regular files, links neither
    followed nor removed. The number removed."""
    try:
        with open_folder(root) as fd:
            return _clean_in(fd, depth)
    except FileNotFoundError:
        return 0


def _clean_in(fd: int, depth: int) -> int:
    removed = 0
    with os.scandir(fd) as entries:
        for entry in list(entries):
            if entry.is_file(follow_symlinks=False) and _TEMP_NAME.fullmatch(entry.name):
                try:
                    os.unlink(entry.name, dir_fd=fd)
                    removed += 1
                except FileNotFoundError:
                    pass
            elif depth > 0 and entry.is_dir(follow_symlinks=False):
                try:
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # replaced by a link or removed meanwhile: not ours to visit
                try:
                    removed += _clean_in(child, depth - 1)
                finally:
                    os.close(child)
    return removed


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
