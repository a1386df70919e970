"""Helpers shared by the character-memory service tests (real server, generated stubs)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ServerHandle, make_config, start_server

from memsvc.characters.service import LOCK_DIR
from memsvc.v1 import memory_pb2 as pb
from tests.support.chat_history import message  # noqa: F401 - the tests import it from here
from tests.support.rpc_errors import error, error_info, violated_fields  # noqa: F401 - the tests import them from here


@contextlib.contextmanager
def character_server(tmp_path: Path, project: bool = True) -> Iterator[ServerHandle]:
    """A real server whose appends stay pending until a test flushes them (so a test sees
    each step); `project` gives it a project memory folder besides the runtime one."""
    extra = {"project_memory_dir": tmp_path / "project"} if project else {}
    h = start_server(make_config(tmp_path, recent_flush_s=3600.0, **extra))
    try:
        yield h
    finally:
        h.stop()


@pytest.fixture
def handle(tmp_path: Path) -> Iterator[ServerHandle]:
    with character_server(tmp_path) as h:
        yield h


@pytest.fixture
def mem(handle: ServerHandle):
    return handle.stubs().memory


def runtime(handle: ServerHandle) -> Path:
    return handle.config.runtime_memory_dir


def render(messages: list[Any]) -> str:
    return json.dumps(messages, indent=2, ensure_ascii=False)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def identity(path: Path, generation: int) -> str:
    return sha(f"{os.path.normcase(os.path.abspath(path))}\0{generation}")


def items(*pairs: tuple[str, str | None], **extra: Any) -> list[pb.ChatItem]:
    out = []
    for role, text in pairs:
        item = pb.ChatItem(role=role)
        if text is not None:
            item.text = text
        out.append(item)
    return out


def snapshot_files(root: Path, skip_db: bool = True) -> dict[str, bytes | str]:
    """Every entry under `root` (relative path → bytes, or "<dir>"/"-> target"), the SQLite
    files and the lock files (`<data-dir>/locks`, empty files the first lock of a character
    creates) left out: what a rolled-back operation must leave byte for byte as it was."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if skip_db and (name.startswith("memsvc.db") or Path(rel).parts[0] == LOCK_DIR):
                continue
            if path.is_symlink():
                out[rel] = f"-> {os.readlink(path)}"
            elif path.is_dir():
                out[rel] = "<dir>"
            else:
                out[rel] = path.read_bytes()
    return out
