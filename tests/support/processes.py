"""What the kernel says about processes (Linux /proc): alive or not, children, listening TCP
ports. Used to prove that Envoy and `memsvc serve` never outlive what started them."""

from __future__ import annotations

import os
import time
from pathlib import Path


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


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def descendants(root: int) -> set[int]:
    """Every live process below `root`, at any depth."""
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
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


def leftovers(root: int, marker: str, names: tuple[str, ...] = ("envoy", "memsvc")) -> dict[int, str]:
    """Live envoy/memsvc processes that `root` started: its descendants, and orphans
    (re-parented to init) whose command line mentions `marker` (the run's temp dir)."""
    mine = descendants(root)
    out = {}
    for pid in _all_pids():
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
        a == "-m" and b.split(".")[0] == name for a, b in zip(words, words[1:]))


def listening_tcp_ports(pid: int) -> set[int]:
    """The TCP ports `pid` listens on (its socket inodes matched against /proc/net/tcp*)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports
