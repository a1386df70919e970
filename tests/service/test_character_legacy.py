"""ScanLegacy and PurgeLegacy over gRPC: configured legacy roots, entry fields and size
rules, and every per-path rejection rule of the purge, with idempotent retries."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from character_helpers import error, error_info, violated_fields
from conftest import ServerHandle, make_config, start_server
from google.protobuf import struct_pb2

from memsvc.v1 import memory_pb2 as pb

C = grpc.StatusCode


def _file(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    app_a, app_b = tmp_path / "old-app", tmp_path / "never-installed"
    legacy = app_a / "memory"
    _file(legacy / "小天" / "recent.json", 100)
    _file(legacy / "小天" / "deep" / "more" / "x.bin", 23)
    _file(legacy / "recent_Gone.json", 7)
    _file(legacy / ".hidden", 5)
    _file(legacy / "_internal" / "f", 5)
    outside = tmp_path / "outside"
    _file(outside / "precious.txt", 11)
    (legacy / "escape").symlink_to(outside, target_is_directory=True)
    (legacy / "小天" / "link-out").symlink_to(outside, target_is_directory=True)  # not followed by sizes
    (tmp_path / "alias-of-old-app").symlink_to(app_a, target_is_directory=True)
    return {"app_a": app_a, "app_b": app_b, "legacy": legacy, "outside": outside, "tmp": tmp_path}


@pytest.fixture
def handle(tmp_path: Path, layout) -> Iterator[ServerHandle]:
    data = tmp_path / "data"
    roots = (
        str(layout["app_a"]),
        str(layout["app_a"]) + "/",
        str(tmp_path / "alias-of-old-app"),
        str(layout["app_b"]),
        str(data),
    )  # data/memory is the runtime root: excluded
    h = start_server(make_config(tmp_path, legacy_app_roots=roots))
    h.config.runtime_memory_dir.mkdir(parents=True, exist_ok=True)
    (h.config.runtime_memory_dir / "小天").mkdir()
    (h.config.runtime_memory_dir / "keep.json").write_text("{}")
    h.config.config_dir.mkdir(parents=True, exist_ok=True)
    (h.config.config_dir / "characters.json").write_text(json.dumps({"猫娘": {"小天": {}}}), encoding="utf-8")
    yield h
    h.stop()


@pytest.fixture
def mem(handle: ServerHandle):
    return handle.stubs().memory


def purge(mem, *paths) -> pb.PurgeLegacyResponse:
    values = []
    for p in paths:
        v = struct_pb2.Value()
        if isinstance(p, str):
            v.string_value = p
        elif isinstance(p, bool):
            v.bool_value = p
        elif isinstance(p, (int, float)):
            v.number_value = p
        else:
            v.null_value = 0
        values.append(v)
    return mem.PurgeLegacy(pb.PurgeLegacyRequest(paths=values))


def test_scan_lists_roots_and_entries(handle, mem, layout):
    scan = mem.ScanLegacy(pb.ScanLegacyRequest())
    assert scan.success is True
    assert scan.runtime_memory_dir == str(handle.config.runtime_memory_dir.resolve())
    assert [(r.root, r.source, r.exists) for r in scan.legacy_roots] == [
        (str(layout["legacy"]), "legacy_app_root", True),
        (str(layout["app_b"] / "memory"), "legacy_app_root", False),
    ]
    entries = {e.name: e for e in scan.legacy_roots[0].entries}
    assert list(entries) == ["recent_Gone.json", "小天"]  # no ".", "_" or symlinked entries
    tian = entries["小天"]
    assert (tian.path, tian.is_dir, tian.size_bytes) == (str(layout["legacy"] / "小天"), True, 123)
    assert tian.is_unlinked is False and tian.runtime_has_same_name is True
    gone = entries["recent_Gone.json"]
    assert (gone.is_dir, gone.size_bytes, gone.is_unlinked, gone.runtime_has_same_name) == (False, 7, True, False)
    assert scan.total_entries == 2 and scan.total_size_bytes == 130
    assert list(scan.legacy_roots[1].entries) == []


def test_size_is_minus_one_past_50000_entries(handle, mem, layout):
    big = layout["legacy"] / "big"
    big.mkdir()
    for i in range(50_001):
        os.close(os.open(big / f"{i}", os.O_CREAT | os.O_WRONLY, 0o644))
    scan = mem.ScanLegacy(pb.ScanLegacyRequest())
    entries = {e.name: e for e in scan.legacy_roots[0].entries}
    assert entries["big"].size_bytes == -1
    assert scan.total_size_bytes == 130  # only positive sizes are summed


def test_scan_changes_nothing(handle, mem, layout):
    before = sorted(str(p) for p in layout["tmp"].rglob("*"))
    mem.ScanLegacy(pb.ScanLegacyRequest())
    assert sorted(str(p) for p in layout["tmp"].rglob("*")) == before


def test_purge_rejects_each_bad_path_and_removes_the_good_ones(handle, mem, layout):
    legacy, runtime = layout["legacy"], handle.config.runtime_memory_dir
    good = [str(legacy / "小天"), str(legacy / "recent_Gone.json")]
    bad = {
        "memory/小天": "absolute",
        str(legacy / ".." / "memory" / "小天"): "'..'",
        str(legacy).replace("/", "\\") + "\\..\\x": "'..'",
        str(legacy): "strictly inside",
        str(legacy) + "/": "strictly inside",
        str(runtime): "runtime",
        str(runtime / "小天"): "runtime",
        str(legacy / "escape"): "symbolic link",
        str(legacy / "escape" / "precious.txt"): "strictly inside",
        str(layout["outside"] / "precious.txt"): "strictly inside",
        "   ": "non-blank",
        "": "non-blank",
    }
    response = purge(mem, *good, *bad, 123, None)
    assert response.success is True
    assert list(response.removed) == [str(legacy.resolve() / "小天"), str(legacy.resolve() / "recent_Gone.json")]
    errors = {e.path: e.error for e in response.errors}
    assert len(response.errors) == len(bad) + 2
    for path, why in bad.items():
        assert why in errors[path], (path, errors[path])
    assert "non-blank" in errors["123"] and "non-blank" in errors["null"]
    assert not (legacy / "小天").exists() and not (legacy / "recent_Gone.json").exists()
    assert (layout["outside"] / "precious.txt").read_bytes() == b"x" * 11  # nothing outside touched
    assert (legacy / "escape").is_symlink() and (runtime / "小天").is_dir() and (runtime / "keep.json").exists()

    again = purge(mem, *good, *bad, 123, None)  # an identical retry: removed again, same errors
    assert list(again.removed) == list(response.removed)
    assert [(e.path, e.error) for e in again.errors] == [(e.path, e.error) for e in response.errors]


def test_a_symlink_inside_the_root_pointing_inside_is_unlinked_not_followed(handle, mem, layout):
    legacy = layout["legacy"]
    (legacy / "inner-link").symlink_to(legacy / "小天", target_is_directory=True)
    response = purge(mem, str(legacy / "inner-link"))
    assert list(response.removed) == [str(legacy.resolve() / "inner-link")] and not response.errors
    assert (legacy / "小天" / "recent.json").exists()


def test_a_permission_error_is_retried_once_after_300_ms(handle, mem, layout):
    failures = []

    def flaky(step: str) -> None:
        if step == "legacy.remove" and not failures:
            failures.append(time.monotonic())
            raise PermissionError(13, "Permission denied")

    handle.app.characters.step_hook = flaky
    started = time.monotonic()
    response = purge(mem, str(layout["legacy"] / "小天"))
    elapsed = time.monotonic() - started
    handle.app.characters.step_hook = None
    assert list(response.removed) == [str(layout["legacy"].resolve() / "小天")] and not response.errors
    assert elapsed >= 0.3 and len(failures) == 1


def test_a_lasting_permission_error_is_reported(handle, mem, layout):
    def denied(step: str) -> None:
        if step == "legacy.remove":
            raise PermissionError(13, "Permission denied")

    handle.app.characters.step_hook = denied
    response = purge(mem, str(layout["legacy"] / "小天"), str(layout["legacy"] / "recent_Gone.json"))
    handle.app.characters.step_hook = None
    assert list(response.removed) == []
    assert [e.error for e in response.errors] == ["permission denied: Permission denied"] * 2
    assert (layout["legacy"] / "小天").exists()


def test_purge_needs_a_non_empty_list(handle, mem):
    err = error(mem.PurgeLegacy, pb.PurgeLegacyRequest())
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"paths"}


def test_purge_without_legacy_roots_is_409(tmp_path):
    h = start_server(make_config(tmp_path))
    try:
        err = error(h.stubs().memory.PurgeLegacy, pb.PurgeLegacyRequest(paths=[struct_pb2.Value(string_value="/x")]))
        assert err.code() == C.ABORTED and error_info(err).reason == "NO_LEGACY_ROOTS"
        scan = h.stubs().memory.ScanLegacy(pb.ScanLegacyRequest())
        assert list(scan.legacy_roots) == [] and scan.total_entries == 0
    finally:
        h.stop()
