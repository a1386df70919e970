"""RenameCharacter over gRPC: the canonical transaction (everything moves, or a failure at
any step leaves the state byte-identical), the alias's idempotent no-op and partial-rename
409, name rules, and writers redirected after the commit."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from character_helpers import error, error_info, handle, items, mem, message, render, snapshot_files, violated_fields  # noqa: F401 - fixtures
from conftest import ServerHandle, make_config, start_server

from memsvc.v1 import memory_pb2 as pb

C = grpc.StatusCode
STEPS = [
    "backup",
    "move_folder",
    "move_flat_files",
    "memories",
    "reflections",
    "pending",
    "generations",
    "registry",
    "reload",
]


def registry_path(handle: ServerHandle) -> Path:
    return handle.config.config_dir / "characters.json"


def registry(handle: ServerHandle) -> dict[str, Any]:
    return json.loads(registry_path(handle).read_text(encoding="utf-8"))


def wait_reviews(handle: ServerHandle, name: str) -> None:
    deadline = time.monotonic() + 10
    while handle.app.characters.reviews.busy(name):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def populate(handle: ServerHandle, mem, name: str = "Old") -> None:
    """A character with every kind of storage: folder, flat files, semantic_memory_<name>,
    memories rows, reflections, pending appends; registered and current."""
    runtime = handle.config.runtime_memory_dir
    registry_path(handle).parent.mkdir(parents=True, exist_ok=True)
    registry_path(handle).write_text(
        json.dumps(
            {"猫娘": {name: {"档案名": name}, "Other": {}}, "当前猫娘": name, "keep": [1, 2]},
            ensure_ascii=False,
            indent=2,
        ),
        encoding="utf-8",
    )
    mem.AppendRecentMessages(
        pb.AppendRecentMessagesRequest(
            character=name,
            messages=items(
                ("human", "I love green tea"), ("ai", "Noted."), ("human", "I love green tea. I prefer quiet evenings")
            ),
        )
    )
    handle.app.characters.flush_now()
    wait_reviews(handle, name)
    (runtime / f"settings_{name}.json").write_text('{"voice": "soft"}', encoding="utf-8")
    (runtime / f"semantic_memory_{name}").mkdir(parents=True)
    (runtime / f"semantic_memory_{name}" / "index.bin").write_bytes(b"\x00\x01binary")
    (runtime / name / "notes.txt").write_text("folder content", encoding="utf-8")
    for i in range(3):
        mem.CreateMemory(pb.CreateMemoryRequest(api_key_id=f"character:{name}", key=f"k{i}", content=f"fact {i}"))
    mem.CreateMemory(pb.CreateMemoryRequest(api_key_id="someone-else", key="k0", content="not moved"))
    mem.AppendRecentMessages(pb.AppendRecentMessagesRequest(character=name, messages=items(("human", "still pending"))))


def sql_rows(handle: ServerHandle) -> dict[str, list[tuple]]:
    out = {}
    with handle.app.database.read() as conn:
        for table in ("memories", "reflections", "recent_pending"):
            out[table] = [tuple(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()]
    return out


def state(handle: ServerHandle) -> tuple[dict, dict]:
    return snapshot_files(handle.config.data_dir), sql_rows(handle)


def rename(mem, old: str, new: str, alias: bool = False) -> pb.RenameCharacterResponse:
    return mem.RenameCharacter(pb.RenameCharacterRequest(old_name=old, new_name=new, compat_alias=alias))


def test_rename_moves_everything(handle, mem):
    populate(handle, mem)
    runtime = handle.config.runtime_memory_dir
    before_reflections = handle.app.characters.reflections.store.of_character("Old")
    assert len(before_reflections) == 2
    old_content = mem.GetRecentFile(pb.GetRecentFileRequest(filename="recent_Old.json")).content
    response = rename(mem, "Old", "New")
    assert response.success and response.memory_renamed and response.memory_server_reloaded
    assert not response.HasField("changed") and not response.HasField("already_renamed")

    assert not (runtime / "Old").exists() and (runtime / "New" / "notes.txt").read_text() == "folder content"
    assert (runtime / "settings_New.json").read_text() == '{"voice": "soft"}'
    assert (runtime / "semantic_memory_New" / "index.bin").read_bytes() == b"\x00\x01binary"
    assert not (runtime / "settings_Old.json").exists() and not (runtime / "semantic_memory_Old").exists()
    rows = sql_rows(handle)
    owners = sorted(r[2] for r in rows["memories"])
    assert owners == ["character:New"] * 3 + ["someone-else"]
    assert [r.id for r in handle.app.characters.reflections.store.of_character("New")] == [
        r.id for r in before_reflections
    ]
    assert handle.app.characters.reflections.store.of_character("Old") == []

    data = registry(handle)
    assert list(data["猫娘"]) == ["New", "Other"] and data["猫娘"]["New"] == {"档案名": "Old"}
    assert data["当前猫娘"] == "New" and data["keep"] == [1, 2]
    assert data["rename_history"][-1]["old"] == "Old" and data["rename_history"][-1]["new"] == "New"

    # The pending append moved with the character; the old name is gone.
    assert mem.GetRecentFile(pb.GetRecentFileRequest(filename="recent_New.json")).content == old_content
    assert error(mem.GetRecentFile, pb.GetRecentFileRequest(filename="recent_Old.json")).code() == C.NOT_FOUND
    # A writer still using the old name is redirected to the new one.
    redirected = mem.AppendRecentMessages(
        pb.AppendRecentMessagesRequest(character="Old", messages=items(("ai", "late")))
    )
    assert redirected.pending == 2
    content = json.loads(mem.GetRecentFile(pb.GetRecentFileRequest(filename="recent_New.json")).content)
    assert content[-2:] == [message("human", "still pending"), message("ai", "late")]
    assert "Old" not in registry(handle)["猫娘"]
    handle.app.characters.flush_now()
    assert not (runtime / "Old").exists()


def test_rename_history_keeps_the_last_20(handle, mem):
    registry_path(handle).parent.mkdir(parents=True, exist_ok=True)
    registry_path(handle).write_text(json.dumps({"猫娘": {"n0": {}}, "当前猫娘": "n0"}), encoding="utf-8")
    for i in range(22):
        rename(mem, f"n{i}", f"n{i + 1}")
    history = registry(handle)["rename_history"]
    assert len(history) == 20 and history[-1]["new"] == "n22" and history[0]["old"] == "n2"
    assert list(registry(handle)["猫娘"]) == ["n22"]


@pytest.mark.parametrize("step", STEPS)
def test_a_failure_at_any_step_leaves_everything_as_it_was(handle, mem, step):
    populate(handle, mem)
    before = state(handle)

    def fail(name: str) -> None:
        if name == f"rename.{step}":
            raise RuntimeError(f"injected failure at {step}")

    handle.app.characters.step_hook = fail
    err = error(mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Old", new_name="New"))
    handle.app.characters.step_hook = None
    assert err.code() == C.INTERNAL, err.details()
    assert f"failed at step {step}" in err.details() and "injected failure" in err.details()
    assert "rolled back" in err.details() or "nothing was changed" in err.details()
    after = state(handle)
    assert after[0] == before[0]  # every file, byte for byte (registry included)
    assert after[1] == before[1]  # memories, reflections, pending rows
    # Still fully usable under the old name; the rename can be retried.
    assert json.loads(mem.GetRecentFile(pb.GetRecentFileRequest(filename="recent_Old.json")).content)[-1] == message(
        "human", "still pending"
    )
    assert rename(mem, "Old", "New").memory_renamed


def test_a_restored_file_gets_a_new_identity(handle, mem):
    populate(handle, mem)
    before = mem.GetRecentFile(pb.GetRecentFileRequest(filename="recent_Old.json"))

    def fail(name: str) -> None:
        if name == "rename.registry":
            raise RuntimeError("boom")

    handle.app.characters.step_hook = fail
    error(mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Old", new_name="New"))
    handle.app.characters.step_hook = None
    after = mem.GetRecentFile(pb.GetRecentFileRequest(filename="recent_Old.json"))
    assert after.content == before.content and after.identity_token != before.identity_token


def test_drain_failure_is_503_and_the_reviews_resume(handle, mem):
    populate(handle, mem)
    before = state(handle)

    def fail(name: str) -> None:
        if name == "rename.drain":
            raise RuntimeError("review would not stop")

    handle.app.characters.step_hook = fail
    err = error(mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Old", new_name="New"))
    handle.app.characters.step_hook = None
    assert err.code() == C.UNAVAILABLE and error_info(err).reason == "MEMORY_SERVER_RELEASE_FAILED"
    assert state(handle) == before
    # Reviews of Old run again: a new flushed message becomes a reflection.
    mem.AppendRecentMessages(
        pb.AppendRecentMessagesRequest(character="Old", messages=items(("human", "I prefer rainy days")))
    )
    handle.app.characters.flush_now()
    wait_reviews(handle, "Old")
    keys = {r.fact_key for r in handle.app.characters.reflections.store.of_character("Old")}
    assert "preference:rainy_days" in keys


def test_the_alias_duplicate_is_an_idempotent_no_op(handle, mem):
    populate(handle, mem)
    assert rename(mem, "Old", "New", alias=True).memory_renamed
    before = state(handle)
    again = rename(mem, "Old", "New", alias=True)
    assert again.success and again.HasField("changed") and again.changed is False
    assert again.already_renamed is True and again.exists_after is True
    assert not again.HasField("memory_renamed")
    assert state(handle) == before
    # The canonical route does not pretend: the old name is simply not registered.
    assert error(mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Old", new_name="New")).code() == C.NOT_FOUND


def test_exists_after_is_false_without_new_storage(handle, mem):
    registry_path(handle).parent.mkdir(parents=True, exist_ok=True)
    registry_path(handle).write_text(json.dumps({"猫娘": {"New": {}}}), encoding="utf-8")
    again = rename(mem, "Old", "New", alias=True)
    assert again.changed is False and again.already_renamed is True and again.exists_after is False


@pytest.mark.parametrize("leftover", ["folder", "flat", "semantic", "memories"])
def test_config_renamed_but_old_storage_left_is_409(handle, mem, leftover):
    registry_path(handle).parent.mkdir(parents=True, exist_ok=True)
    registry_path(handle).write_text(json.dumps({"猫娘": {"New": {}}}), encoding="utf-8")
    runtime = handle.config.runtime_memory_dir
    runtime.mkdir(parents=True, exist_ok=True)
    if leftover == "folder":
        (runtime / "Old").mkdir()
    elif leftover == "flat":
        (runtime / "recent_Old.json").write_text("[]")
    elif leftover == "semantic":
        (runtime / "semantic_memory_Old").mkdir()
    else:
        mem.CreateMemory(pb.CreateMemoryRequest(api_key_id="character:Old", content="left behind"))
    err = error(mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Old", new_name="New", compat_alias=True))
    assert err.code() == C.ABORTED and error_info(err).reason == "PARTIAL_RENAME"
    assert "/api/characters/catgirl/" in err.details()


@pytest.mark.parametrize(
    "new_name",
    [
        "api",
        "API",
        "CON",
        "con.txt",
        "COM1",
        "LPT9",
        "CLOCK$",
        "a/b",
        "a\\b",
        "x.",
        ".",
        "a..b",
        "中" * 31,
        "a" * 61,
        "bad!",
        "tab\tname",
        "  ",
        "health",
        "ws",
    ],
)
def test_bad_new_names_are_400(handle, mem, new_name):
    populate(handle, mem)
    before = state(handle)
    err = error(mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Old", new_name=new_name))
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"new_name"}, err.details()
    assert state(handle) == before


@pytest.mark.parametrize("new_name", ["中" * 30, "a" * 60, "Mia (old)", "小天・改", "O'Neil", "Ада 2"])
def test_good_new_names(handle, mem, new_name):
    populate(handle, mem)
    assert rename(mem, "Old", new_name).memory_renamed
    assert new_name in registry(handle)["猫娘"]


def test_names_are_trimmed_and_the_alias_caps_at_100(handle, mem):
    populate(handle, mem)
    err = error(
        mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Old", new_name=" " * 95 + "abcdef", compat_alias=True)
    )
    assert err.code() == C.INVALID_ARGUMENT and "100" in err.details()
    assert rename(mem, "Old", "  Trimmed  ").memory_renamed
    assert "Trimmed" in registry(handle)["猫娘"]


def test_old_name_may_be_historical_but_not_a_path(handle, mem):
    registry_path(handle).parent.mkdir(parents=True, exist_ok=True)
    registry_path(handle).write_text(json.dumps({"猫娘": {"v1.api": {}}}), encoding="utf-8")
    assert rename(mem, "v1.api", "Modern").memory_renamed
    for bad in ("", "../x", "a/b", ".."):
        err = error(mem.RenameCharacter, pb.RenameCharacterRequest(old_name=bad, new_name="Fine"))
        assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"old_name"}


def test_unknown_old_is_404_and_registered_new_is_400(handle, mem):
    populate(handle, mem)
    assert error(mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Ghost", new_name="New")).code() == C.NOT_FOUND
    err = error(mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Old", new_name="Other"))
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"new_name"}


def test_existing_storage_of_the_new_name_is_409(handle, mem):
    populate(handle, mem)
    (handle.config.runtime_memory_dir / "New").mkdir()
    before = state(handle)
    err = error(mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Old", new_name="New"))
    assert err.code() == C.ABORTED and error_info(err).reason == "RENAME_TARGET_EXISTS"
    assert state(handle) == before


def test_rename_in_read_only_storage_is_409(tmp_path):
    h = start_server(make_config(tmp_path, storage_mode="read-only"))
    try:
        err = error(h.stubs().memory.RenameCharacter, pb.RenameCharacterRequest(old_name="Old", new_name="New"))
        assert err.code() == C.ABORTED and error_info(err).reason == "STORAGE_READ_ONLY"
    finally:
        h.stop()


def test_project_root_storage_moves_too(handle, mem, tmp_path):
    registry_path(handle).parent.mkdir(parents=True, exist_ok=True)
    registry_path(handle).write_text(json.dumps({"猫娘": {"Role": {}}}), encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    (project / "recent_Role.json").write_text(render([message("human", "shipped")]), encoding="utf-8")
    assert rename(mem, "Role", "Actor").memory_renamed
    assert (project / "recent_Actor.json").exists() and not (project / "recent_Role.json").exists()
    content = mem.GetRecentFile(pb.GetRecentFileRequest(filename="recent_Actor.json")).content
    assert json.loads(content) == [message("human", "shipped")]
