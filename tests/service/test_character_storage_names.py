"""A character's flat storage entries (`time_indexed_<name>`, `semantic_memory_<name>`) can
share a name with another character's folder. New names with those prefixes are refused;
for characters registered before that rule, an entry named exactly like a registered
character is that character's folder and never moves with anyone else's rename."""

from __future__ import annotations

import json
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
    violated_fields,
)
from conftest import ServerHandle

from memsvc.v1 import memory_pb2 as pb

C = grpc.StatusCode
NEIGHBOURS = ["time_indexed_Mia", "semantic_memory_Mia"]


@pytest.fixture
def handle(tmp_path: Path) -> Iterator[ServerHandle]:
    with character_server(tmp_path, project=False) as h:
        yield h


def registry(handle: ServerHandle) -> dict:
    return json.loads((handle.config.config_dir / "characters.json").read_text(encoding="utf-8"))


def historical(handle: ServerHandle, *names: str) -> None:
    """Characters an older version registered, each with a history in its folder."""
    handle.config.config_dir.mkdir(parents=True, exist_ok=True)
    (handle.config.config_dir / "characters.json").write_text(
        json.dumps({"猫娘": {n: {} for n in names}, "当前猫娘": names[0]}, ensure_ascii=False), encoding="utf-8"
    )
    for name in names:
        path = runtime(handle) / name / "recent.json"
        path.parent.mkdir(parents=True)
        path.write_text(render([message("human", f"I am {name}")]), encoding="utf-8")


def content(mem, name: str) -> list:
    return json.loads(mem.GetRecentFile(pb.GetRecentFileRequest(filename=f"recent_{name}.json")).content)


def rename(mem, old: str, new: str) -> pb.RenameCharacterResponse:
    return mem.RenameCharacter(pb.RenameCharacterRequest(old_name=old, new_name=new))


@pytest.mark.parametrize("name", NEIGHBOURS + ["Time_Indexed_Mia"])
def test_names_of_another_characters_storage_are_refused_for_appends(handle, mem, name):
    err = error(
        mem.AppendRecentMessages, pb.AppendRecentMessagesRequest(character=name, messages=items(("human", "hi")))
    )
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"character"}
    assert "must not start with 'semantic_memory_' or 'time_indexed_'" in err.details()
    assert not (handle.config.config_dir / "characters.json").exists()
    assert handle.app.characters.store.pending(name) == []


@pytest.mark.parametrize("new", NEIGHBOURS)
def test_names_of_another_characters_storage_are_refused_for_renames(handle, mem, new):
    historical(handle, "Bob")
    before = snapshot_files(handle.config.data_dir)
    err = error(mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Bob", new_name=new))
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"new_name"}
    assert snapshot_files(handle.config.data_dir) == before


def test_renaming_mia_leaves_the_folders_of_registered_neighbours_in_place(handle, mem):
    historical(handle, "Mia", *NEIGHBOURS)
    response = rename(mem, "Mia", "Nia")
    assert response.success and response.memory_renamed
    assert content(mem, "Nia") == [message("human", "I am Mia")]
    for neighbour in NEIGHBOURS:
        assert (runtime(handle) / neighbour / "recent.json").is_file()
        assert content(mem, neighbour) == [message("human", f"I am {neighbour}")]
    assert not (runtime(handle) / "time_indexed_Nia").exists()
    assert not (runtime(handle) / "semantic_memory_Nia").exists()
    assert set(registry(handle)["猫娘"]) == {"Nia", *NEIGHBOURS}


def test_an_unregistered_time_indexed_folder_still_moves_with_its_character(handle, mem):
    historical(handle, "Mia")
    (runtime(handle) / "time_indexed_Mia").mkdir()
    (runtime(handle) / "time_indexed_Mia" / "index.db").write_bytes(b"\x00index")
    rename(mem, "Mia", "Nia")
    assert (runtime(handle) / "time_indexed_Nia" / "index.db").read_bytes() == b"\x00index"
    assert not (runtime(handle) / "time_indexed_Mia").exists()


def test_renaming_the_neighbour_itself_moves_only_its_own_folder(handle, mem):
    historical(handle, "Mia", "time_indexed_Mia")
    response = rename(mem, "time_indexed_Mia", "Zed")
    assert response.success and response.memory_renamed
    assert content(mem, "Zed") == [message("human", "I am time_indexed_Mia")]
    assert content(mem, "Mia") == [message("human", "I am Mia")]
    assert not (runtime(handle) / "time_indexed_Mia").exists()
    # ... and Mia, renamed afterwards, takes nothing of Zed's.
    rename(mem, "Mia", "Nia")
    assert content(mem, "Zed") == [message("human", "I am time_indexed_Mia")]
    assert content(mem, "Nia") == [message("human", "I am Mia")]


def test_a_neighbours_folder_is_not_the_storage_of_a_rename_target(handle, mem):
    historical(handle, "Bob", "time_indexed_Mia")
    response = rename(mem, "Bob", "Mia")  # time_indexed_Mia is a character, not Mia's storage
    assert response.success and response.memory_renamed
    assert content(mem, "Mia") == [message("human", "I am Bob")]
    assert content(mem, "time_indexed_Mia") == [message("human", "I am time_indexed_Mia")]


def test_a_rename_that_would_move_storage_into_a_neighbours_folder_is_refused(handle, mem):
    historical(handle, "Bob", "time_indexed_Mia")
    (runtime(handle) / "time_indexed_Bob").mkdir()
    (runtime(handle) / "time_indexed_Bob" / "index.db").write_bytes(b"\x00bob")
    before = snapshot_files(handle.config.data_dir)
    err = error(mem.RenameCharacter, pb.RenameCharacterRequest(old_name="Bob", new_name="Mia"))
    assert err.code() == C.ABORTED and error_info(err).reason == "RENAME_TARGET_EXISTS"
    assert "time_indexed_Mia" in err.details()
    assert snapshot_files(handle.config.data_dir) == before
