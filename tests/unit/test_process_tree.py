"""die_with_parent, the preexec_fn that ties a child (the local PostgreSQL of `memsvc cluster`)
to the process that started it: a parent killed by SIGKILL takes its children along, also when
they were started while other threads of the parent were busy allocating (the child runs the
preexec_fn in a copy of that parent, between fork and exec)."""

from __future__ import annotations

import subprocess
import sys
import time

from memsvc.process_tree import alive

PARENT = """
import subprocess, threading
from memsvc.process_tree import die_with_parent

def churn():
    while True:
        [bytearray(1000) for _ in range(100)]

for _ in range(4):
    threading.Thread(target=churn, daemon=True).start()
children = [subprocess.Popen(["sleep", "600"], preexec_fn=die_with_parent) for _ in range(40)]
print(" ".join(str(child.pid) for child in children), flush=True)
threading.Event().wait()
"""


def test_children_started_beside_busy_threads_die_with_their_killed_parent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(pids) == 40 and all(alive(pid) for pid in pids)  # every child started and runs
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if alive(pid)]
