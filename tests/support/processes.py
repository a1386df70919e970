"""What the kernel says about processes (Linux /proc): alive or not, children, listening TCP
ports. Used to prove that Envoy and `memsvc serve` never outlive what started them."""

from __future__ import annotations

import os
from pathlib import Path

# One copy of the /proc reading, shared with the package (memsvc cluster stops what it starts).
from memsvc.process_tree import alive, all_pids, descendants, wait_gone  # noqa: F401 - re-exported


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def leftovers(root: int, marker: str, names: tuple[str, ...] = ("envoy", "memsvc")) -> dict[int, str]:
    """Live envoy/memsvc processes that `root` started: its descendants, and orphans
    (re-parented to init) whose command line mentions `marker` (the run's temp dir)."""
    mine = descendants(root)
    out = {}
    for pid in all_pids():
        if pid == root or not alive(pid):
            continue
        line = cmdline(pid)
        if any(runs(line, name) for name in names) and (pid in mine or marker in line):
            out[pid] = line
    return out


def runs(line: str, name: str) -> bool:
    """Whether the command line runs `name`: its program (or one it execs, such as
    `python -m memsvc`) is called that. A name merely inside a path does not count: the
    run's PostgreSQL lives in a folder called memsvc-pg-…, and it is not a memsvc process."""
    words = line.split()
    return any(os.path.basename(word).rstrip(":") == name for word in words) or any(
        a == "-m" and b.split(".")[0] == name for a, b in zip(words, words[1:])
    )


def listening_tcp_ports(pid: int) -> set[int]:
    """The TCP ports `pid` listens on (its socket inodes matched against /proc/net/tcp*)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports
