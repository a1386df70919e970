"""The folder of a run's multiprocess metrics files: private, off the data disk (on the RAM
filesystem where there is one), and the folders left by a parent that was killed are removed
when the next run starts; those of a parent still running are not touched."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from memsvc.metrics import RUNTIME_BASES, ProcessesMetrics, StateSources, runtime_directory


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.fixture
def base() -> Path:
    found = next((Path(b) for b in RUNTIME_BASES if os.path.isdir(b) and os.access(b, os.W_OK)), None)
    if found is None:
        pytest.skip(f"none of {RUNTIME_BASES} is a writable folder here")
    return found


def test_a_runs_folder_is_private_on_the_ram_filesystem_and_leftovers_of_dead_parents_go(base):
    dead = base / f"memsvc-metrics-{_dead_pid()}-left"
    running = base / f"memsvc-metrics-{os.getppid()}-other"
    for leftover in (dead, running):
        leftover.mkdir()
        (leftover / "counter_1.db").write_bytes(b"\0" * 64)
    try:
        made = runtime_directory()
        assert made.parent == base and made.name.startswith(f"memsvc-metrics-{os.getpid()}-")
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
        assert not dead.exists() and (running / "counter_1.db").exists()
        metrics = ProcessesMetrics.private(StateSources())
        assert metrics.directory.is_dir() and metrics.directory != made
        metrics.close()
        assert not metrics.directory.exists()
        made.rmdir()
    finally:
        for leftover in (dead, running):
            if leftover.exists():
                (leftover / "counter_1.db").unlink()
                leftover.rmdir()
