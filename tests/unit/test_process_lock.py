"""ProcessLock: the flock under the character files. Another process holding it keeps us out;
its death by SIGKILL frees it at once (no expiry to wait out); re-entrant in one thread,
with the file lock held until the outermost release."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from memsvc.characters.process_lock import ProcessLock, lock_path

HOLDER = """
import sys, time
from pathlib import Path
from memsvc.characters.process_lock import ProcessLock
ProcessLock(Path(sys.argv[1])).acquire()
print("locked", flush=True)
time.sleep(600)
"""


def _locked_elsewhere(path: Path) -> bool:
    """Whether some other open file description holds the flock of `path` now."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_a_lock_held_by_another_process_is_freed_the_moment_that_process_is_killed(tmp_path):
    path = lock_path(tmp_path / "locks", "characters", "Lan")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert _locked_elsewhere(path)
        acquired = threading.Event()
        lock = ProcessLock(path)

        def take() -> None:
            with lock:
                acquired.set()

        waiter = threading.Thread(target=take, daemon=True)
        waiter.start()
        assert not acquired.is_set()  # the holder is alive: we are kept out
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        waiter.join(30)
        assert acquired.is_set()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)


def test_re_entrant_in_one_thread_and_released_with_the_outermost_release(tmp_path):
    path = tmp_path / "locks" / "x.lock"
    lock = ProcessLock(path)
    with lock:
        with lock:
            assert _locked_elsewhere(path)
        assert _locked_elsewhere(path)  # the outer hold still has it
    assert not _locked_elsewhere(path)


def test_lock_files_are_named_by_a_hash_so_any_character_name_is_a_plain_file_name(tmp_path):
    names = ["Lan", "../../etc/passwd", "猫娘 with spaces", "a" * 300]
    paths = {lock_path(tmp_path, "characters", n) for n in names}
    assert len(paths) == len(names)
    assert all(p.parent == tmp_path / "characters" and len(p.name) == 37 for p in paths)
