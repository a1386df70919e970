"""A real, small filesystem to fill: an 8 MiB tmpfs mounted for one test, and a filler file
that takes every byte left on it. Mounting needs root (CAP_SYS_ADMIN); without it the test
is skipped and says why (CI runs as root)."""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from support.rpc_errors import error_info

SIZE = "8m"
FILLER_CHUNK = b"\0" * 65536


def mounted(tmp_path: Path) -> Iterator[Path]:
    """Yield the mount point of a fresh tmpfs under `tmp_path`, unmounted afterwards (the
    body of a fixture; skips the test when it cannot mount)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root / CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "--lazy", str(mount_point)], check=False)


def fill(path: Path) -> None:
    """Write `path` until the filesystem refuses: nothing is left for anyone."""
    with open(path, "wb", buffering=0) as handle:
        while True:
            try:
                handle.write(FILLER_CHUNK)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        for size in (4096, 512, 1):  # the last partial blocks
            try:
                while True:
                    handle.write(b"\0" * size)
            except OSError:
                continue


def until_refused(call: Callable[[int], object], limit: int = 4000) -> tuple[list[int], grpc.RpcError]:
    """Call `call(i)` until it fails; the indexes that were acknowledged, and the failure."""
    acknowledged = []
    for i in range(limit):
        try:
            call(i)
        except grpc.RpcError as err:
            return acknowledged, err
        acknowledged.append(i)
    pytest.fail(f"no refusal in {limit} writes on a full disk")


def assert_storage_full(err: grpc.RpcError) -> None:
    """`err` is the documented full-disk refusal: RESOURCE_EXHAUSTED, reason STORAGE_FULL."""
    assert err.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, (err.code(), err.details())
    info = error_info(err)
    assert info is not None and info.reason == "STORAGE_FULL"
    assert err.details().startswith("storage is full (no space left in the data directory)")
