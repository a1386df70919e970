"""Character files never leave their storage folders: a symbolic link planted inside a memory
root or the config folder, at any level and even while a write runs, is refused with
FAILED_PRECONDITION (reason UNSAFE_STORAGE_PATH), accepted appends are kept rather than
dropped, files outside stay byte for byte as they were; a root that is itself a link is the
operator's choice and works. Also: the temporary files of killed writes are removed at
start (ours only, regular files only), and a rewritten file keeps its mode and owner."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from character_helpers import (
    character_server,
    error,
    error_info,
    items,
    mem,  # noqa: F401 - fixture
    message,
    render,
    runtime,
    snapshot_files,
)
from conftest import ServerHandle, make_config, start_server
from google.protobuf import struct_pb2

from memsvc.v1 import memory_pb2 as pb
from memsvc.v1 import settings_pb2 as spb

C = grpc.StatusCode
UNSAFE = "UNSAFE_STORAGE_PATH"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the data dir, with a history-looking file in it."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "recent.json").write_text("precious, not a history", encoding="utf-8")
    (folder / "B").mkdir()
    (folder / "B" / "keep.txt").write_text("keep me", encoding="utf-8")
    return folder


@pytest.fixture
def handle(tmp_path: Path) -> Iterator[ServerHandle]:
    with character_server(tmp_path) as h:
        runtime(h).mkdir(parents=True, exist_ok=True)
        yield h


def append(mem, name: str, *pairs):
    return mem.AppendRecentMessages(pb.AppendRecentMessagesRequest(character=name, messages=items(*pairs)))


def get(mem, name: str) -> pb.GetRecentFileResponse:
    return mem.GetRecentFile(pb.GetRecentFileRequest(filename=f"recent_{name}.json"))


def refused(call, request) -> grpc.RpcError:
    err = error(call, request)
    assert err.code() == C.FAILED_PRECONDITION, err.details()
    assert error_info(err).reason == UNSAFE
    assert "symbolic link" in err.details()
    return err


def registered(handle: ServerHandle) -> set[str]:
    path = handle.config.config_dir / "characters.json"
    return set(json.loads(path.read_text(encoding="utf-8"))["猫娘"]) if path.exists() else set()


def swap_for_link(folder: Path, target: Path) -> None:
    """Move a real folder away and put a link to `target` in its place."""
    folder.rename(folder.with_name(folder.name + ".moved-away"))
    folder.symlink_to(target, target_is_directory=True)


# ---- links inside the roots ----------------------------------------------------------------


def test_an_append_for_a_character_whose_folder_is_a_link_is_refused_and_changes_nothing(handle, mem, outside):
    (runtime(handle) / "Evil").symlink_to(outside, target_is_directory=True)
    before = snapshot_files(outside)
    refused(mem.AppendRecentMessages, pb.AppendRecentMessagesRequest(character="Evil", messages=items(("human", "hi"))))
    assert "Evil" not in registered(handle)  # refused before anything was registered or accepted
    assert handle.app.characters.store.pending("Evil") == []
    handle.app.characters.flush_now()
    assert snapshot_files(outside) == before
    assert error(mem.GetRecentFile, pb.GetRecentFileRequest(filename="recent_Evil.json")).code() == C.NOT_FOUND


@pytest.mark.parametrize("level", ["history file", "character folder in the project root"])
def test_links_at_the_other_levels_are_never_written_through(handle, mem, outside, level):
    if level == "history file":
        (runtime(handle) / "Mia").mkdir()
        (runtime(handle) / "Mia" / "recent.json").symlink_to(outside / "recent.json")
        before = snapshot_files(outside)
        refused(
            mem.AppendRecentMessages, pb.AppendRecentMessagesRequest(character="Mia", messages=items(("human", "hi")))
        )
        assert (runtime(handle) / "Mia" / "recent.json").is_symlink()  # the link is not replaced either
    else:
        # A linked project folder does not count: the history is created in the runtime root.
        project = handle.config.project_memory_dir
        project.mkdir()
        (project / "Mia").symlink_to(outside, target_is_directory=True)
        before = snapshot_files(outside)
        append(mem, "Mia", ("human", "hi"))
        handle.app.characters.flush_now()
        assert json.loads((runtime(handle) / "Mia" / "recent.json").read_text()) == [message("human", "hi")]
    assert snapshot_files(outside) == before


def test_a_flat_history_that_is_a_link_is_ignored_and_the_new_file_is_real(handle, mem, outside):
    (runtime(handle) / "recent_Mia.json").symlink_to(outside / "recent.json")
    before = snapshot_files(outside)
    append(mem, "Mia", ("human", "hi"))
    handle.app.characters.flush_now()
    assert snapshot_files(outside) == before
    assert (runtime(handle) / "recent_Mia.json").is_symlink()
    assert not (runtime(handle) / "Mia").is_symlink()
    assert json.loads(get(mem, "Mia").content) == [message("human", "hi")]


def test_a_folder_swapped_for_a_link_during_a_flush_is_refused_and_the_appends_are_kept(handle, mem, outside):
    append(mem, "Race", ("human", "one"))
    handle.app.characters.flush_now()
    folder = runtime(handle) / "Race"
    append(mem, "Race", ("human", "two"))
    before = snapshot_files(outside)

    def swap(step: str) -> None:
        if step == "flush.commit":
            swap_for_link(folder, outside)

    handle.app.characters.step_hook = swap
    assert handle.app.characters.flush_now() == 0  # logged, not raised: the other characters go on
    handle.app.characters.step_hook = None
    assert snapshot_files(outside) == before
    # Accepted, so kept: still pending (and shown), written once the link is gone.
    assert [r.text for r in handle.app.characters.store.pending("Race")] == ["two"]
    assert json.loads(get(mem, "Race").content) == [message("human", "two")]
    folder.unlink()
    folder.with_name("Race.moved-away").rename(folder)
    assert handle.app.characters.flush_now() == 1
    assert json.loads((folder / "recent.json").read_text()) == [message("human", "one"), message("human", "two")]


def test_pending_appends_behind_a_link_survive_a_restart(tmp_path, outside):
    config = make_config(tmp_path, recent_flush_s=3600.0)
    first = start_server(config)
    append(first.stubs().memory, "Late", ("human", "kept"))
    (config.runtime_memory_dir).mkdir(parents=True, exist_ok=True)
    (config.runtime_memory_dir / "Late").symlink_to(outside, target_is_directory=True)
    before = snapshot_files(outside)
    first.stop()  # the shutdown flush is refused too
    assert snapshot_files(outside) == before
    (config.runtime_memory_dir / "Late").unlink()
    second = start_server(config)
    try:
        second.app.characters.flush_now()  # (or the flush at start got there first)
        assert json.loads((config.runtime_memory_dir / "Late" / "recent.json").read_text()) == [
            message("human", "kept")
        ]
    finally:
        second.stop()


def test_a_save_whose_folder_is_swapped_for_a_link_is_refused(handle, mem, outside):
    append(mem, "Edit", ("human", "one"))
    handle.app.characters.flush_now()
    folder = runtime(handle) / "Edit"
    snap = get(mem, "Edit")
    before = snapshot_files(outside)

    def swap(step: str) -> None:
        if step == "save.commit":
            swap_for_link(folder, outside)

    handle.app.characters.step_hook = swap
    refused(
        mem.SaveRecentFile,
        pb.SaveRecentFileRequest(
            filename="recent_Edit.json",
            fingerprint=snap.fingerprint,
            identity_token=snap.identity_token,
            chat=[pb.ChatItem(role="human", text="edited")],
        ),
    )
    handle.app.characters.step_hook = None
    assert snapshot_files(outside) == before
    assert json.loads((folder.with_name("Edit.moved-away") / "recent.json").read_text()) == [message("human", "one")]


def test_a_memory_root_that_is_itself_a_link_is_the_operators_choice(tmp_path):
    real = tmp_path / "real-memory"
    real.mkdir()
    (tmp_path / "memory-link").symlink_to(real, target_is_directory=True)
    h = start_server(make_config(tmp_path, memory_dir=tmp_path / "memory-link", recent_flush_s=3600.0))
    try:
        mem = h.stubs().memory
        append(mem, "Mia", ("human", "hi"))
        h.app.characters.flush_now()
        assert json.loads((real / "Mia" / "recent.json").read_text()) == [message("human", "hi")]
        assert json.loads(get(mem, "Mia").content) == [message("human", "hi")]
    finally:
        h.stop()


def test_config_files_that_are_links_are_refused_not_replaced(handle, mem, outside):
    config = handle.config.config_dir
    config.mkdir(parents=True, exist_ok=True)
    (outside / "characters.json").write_text(json.dumps({"猫娘": {}}), encoding="utf-8")
    (outside / "core_config.json").write_text("{}", encoding="utf-8")
    (config / "characters.json").symlink_to(outside / "characters.json")
    (config / "core_config.json").symlink_to(outside / "core_config.json")
    before = snapshot_files(outside)
    refused(mem.AppendRecentMessages, pb.AppendRecentMessagesRequest(character="New", messages=items(("human", "hi"))))
    assert handle.app.characters.store.pending("New") == []
    settings = handle.stubs().settings
    refused(settings.SetReviewConfig, spb.SetToggleRequest(enabled=struct_pb2.Value(bool_value=False)))
    assert snapshot_files(outside) == before
    assert (config / "characters.json").is_symlink() and (config / "core_config.json").is_symlink()


def test_a_rename_refuses_a_registry_that_is_a_link(handle, mem, outside):
    config = handle.config.config_dir
    append(mem, "Mia", ("human", "hi"))
    handle.app.characters.flush_now()
    (config / "characters.json").rename(outside / "characters.json")
    (config / "characters.json").symlink_to(outside / "characters.json")
    before = snapshot_files(outside)
    refused(mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Mia", new_name="Nia"))
    assert snapshot_files(outside) == before
    assert (runtime(handle) / "Mia" / "recent.json").is_file() and not (runtime(handle) / "Nia").exists()


def test_a_legacy_purge_never_follows_a_folder_swapped_for_a_link(tmp_path, outside):
    legacy = tmp_path / "old-app" / "memory"
    (legacy / "A" / "B").mkdir(parents=True)
    (legacy / "A" / "B" / "x.txt").write_text("old", encoding="utf-8")
    h = start_server(make_config(tmp_path, legacy_app_roots=(str(tmp_path / "old-app"),)))
    try:
        before = snapshot_files(outside)

        def swap(step: str) -> None:
            if step == "legacy.remove" and not (legacy / "A").is_symlink():
                swap_for_link(legacy / "A", outside)

        h.app.characters.step_hook = swap
        response = h.stubs().memory.PurgeLegacy(
            pb.PurgeLegacyRequest(paths=[struct_pb2.Value(string_value=str(legacy / "A" / "B"))])
        )
        h.app.characters.step_hook = None
        assert list(response.removed) == [] and len(response.errors) == 1
        assert "symbolic link" in response.errors[0].error
        assert snapshot_files(outside) == before  # outside/B is still there
    finally:
        h.stop()


# ---- leftovers of killed writes ------------------------------------------------------------


def test_temp_files_of_killed_writes_are_removed_at_start_and_nothing_else(tmp_path, outside):
    config = make_config(tmp_path, project_memory_dir=tmp_path / "project", recent_flush_s=3600.0)
    runtime_root, project, conf = config.runtime_memory_dir, tmp_path / "project", config.config_dir
    leftovers = [
        runtime_root / "Mia" / ".tmp-recent.json-abc123_z",
        runtime_root / ".tmp-recent_Old.json-k2j4h5g6",
        project / "Nia" / ".tmp-recent.json-00000000",
        conf / ".tmp-characters.json-qwertyui",
        conf / ".tmp-core_config.json-asdfghjk",
    ]
    for path in leftovers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("torn", encoding="utf-8")
    (outside / ".tmp-recent.json-abcdefgh").write_text("outside, not ours to clean", encoding="utf-8")
    kept = {
        runtime_root / "Mia" / "recent.json": "real",  # not a temp file
        runtime_root / "Mia" / ".tmp-notes.txt-abcdefgh": "someone else's pattern",
        runtime_root / ".tmp-recent.json-short": "wrong suffix",
        runtime_root / "Mia" / "deeper" / ".tmp-recent.json-abcdefgh": "below the character folders",
    }
    for path, text in kept.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (runtime_root / "Link").symlink_to(outside, target_is_directory=True)  # never visited
    (runtime_root / ".tmp-recent.json-linklink").symlink_to(outside / "recent.json")  # a link: kept
    (runtime_root / ".tmp-recent.json-dirdirdi").mkdir()  # a folder: kept
    before = snapshot_files(outside)
    h = start_server(config)
    h.stop()
    assert [p for p in leftovers if os.path.lexists(p)] == []
    assert {p: p.read_text(encoding="utf-8") for p in kept} == kept
    assert (runtime_root / ".tmp-recent.json-linklink").is_symlink()
    assert (runtime_root / ".tmp-recent.json-dirdirdi").is_dir()
    assert snapshot_files(outside) == before


# ---- modes and owners ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_saved_history_keeps_its_mode(handle, mem, mode):
    path = runtime(handle) / "Mia" / "recent.json"
    path.parent.mkdir()
    path.write_text(render([message("human", "hi")]), encoding="utf-8")
    os.chmod(path, mode)
    snap = get(mem, "Mia")
    mem.SaveRecentFile(
        pb.SaveRecentFileRequest(
            filename="recent_Mia.json",
            fingerprint=snap.fingerprint,
            identity_token=snap.identity_token,
            chat=[pb.ChatItem(role="human", text="edited")],
        )
    )
    assert json.loads(path.read_text()) == [message("human", "edited")]
    assert stat.S_IMODE(path.stat().st_mode) == mode
    append(mem, "Mia", ("ai", "flushed"))
    handle.app.characters.flush_now()
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_a_new_history_gets_the_default_mode_minus_the_umask(handle, mem):
    append(mem, "Fresh", ("human", "hi"))
    handle.app.characters.flush_now()
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((runtime(handle) / "Fresh" / "recent.json").stat().st_mode) == 0o666 & ~umask


def test_config_files_keep_their_mode(handle, mem):
    conf = handle.config.config_dir
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "core_config.json").write_text("{}", encoding="utf-8")
    os.chmod(conf / "core_config.json", 0o640)
    handle.stubs().settings.SetReviewConfig(spb.SetToggleRequest(enabled=struct_pb2.Value(bool_value=False)))
    assert stat.S_IMODE((conf / "core_config.json").stat().st_mode) == 0o640
    append(mem, "Mia", ("human", "hi"))  # registers Mia: a first registry file
    os.chmod(conf / "characters.json", 0o604)
    append(mem, "Nia", ("human", "hi"))
    assert stat.S_IMODE((conf / "characters.json").stat().st_mode) == 0o604


@pytest.mark.skipif(os.geteuid() != 0, reason="only a privileged process can keep another user's ownership")
def test_a_privileged_server_keeps_the_owner_of_a_rewritten_history(handle, mem):
    path = runtime(handle) / "Mia" / "recent.json"
    path.parent.mkdir()
    path.write_text(render([message("human", "hi")]), encoding="utf-8")
    os.chown(path, 12345, 23456)
    append(mem, "Mia", ("ai", "flushed"))
    handle.app.characters.flush_now()
    assert (path.stat().st_uid, path.stat().st_gid) == (12345, 23456)
    assert json.loads(path.read_text())[-1] == message("ai", "flushed")
