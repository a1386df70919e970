"""Recent-history files over gRPC: resolution and listing,
stored format, snapshot tokens, validation limits, the two kinds of 409, concurrent savers,
theater capsules, appends with their flush, and the shielded commit."""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from character_helpers import (  # noqa: F401 - fixtures
    error,
    error_info,
    handle,
    identity,
    items,
    mem,
    message,
    render,
    runtime,
    sha,
    violated_fields,
)
from conftest import ServerHandle, make_config, start_server

from memsvc.v1 import memory_pb2 as pb

C = grpc.StatusCode


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def get(mem, name: str) -> pb.GetRecentFileResponse:
    return mem.GetRecentFile(pb.GetRecentFileRequest(filename=f"recent_{name}.json"))


def save(mem, name: str, snap, chat, **kwargs) -> pb.SaveRecentFileResponse:
    return mem.SaveRecentFile(
        pb.SaveRecentFileRequest(
            filename=f"recent_{name}.json", fingerprint=snap.fingerprint, identity_token=snap.identity_token, chat=chat
        ),
        **kwargs,
    )


def append(mem, name: str, *pairs) -> pb.AppendRecentMessagesResponse:
    return mem.AppendRecentMessages(pb.AppendRecentMessagesRequest(character=name, messages=items(*pairs)))


def seed(handle: ServerHandle, name: str, messages: list, flat: bool = False) -> Path:
    path = runtime(handle) / (f"recent_{name}.json" if flat else f"{name}/recent.json")
    write(path, render(messages))
    return path


# ---- reading ---------------------------------------------------------------------------------


def test_get_returns_the_file_text_with_its_tokens(handle, mem):
    path = seed(handle, "小天", [message("human", "こんにちは！"), message("ai", "こんばんは！")])
    snap = get(mem, "小天")
    assert snap.content == path.read_text(encoding="utf-8")
    assert snap.fingerprint == sha(snap.content)
    assert snap.identity_token == identity(path, 1)
    again = get(mem, "小天")  # reading changes nothing
    assert (again.fingerprint, again.identity_token) == (snap.fingerprint, snap.identity_token)


def test_generations_persist_across_restarts(tmp_path):
    config = make_config(tmp_path, recent_flush_s=3600.0)
    first = start_server(config)
    try:
        path = seed(first, "Mia", [message("human", "hi")])
        stubs = first.stubs().memory
        get(stubs, "Mia")
        # Re-activate once: delete (noticed by a GET), then create again.
        os.unlink(path)
        assert error(stubs.GetRecentFile, pb.GetRecentFileRequest(filename="recent_Mia.json")).code() == C.NOT_FOUND
        write(path, render([message("human", "hi")]))
        assert get(stubs, "Mia").identity_token == identity(path, 2)
    finally:
        first.stop()
    second = start_server(config)
    try:
        assert get(second.stubs().memory, "Mia").identity_token == identity(path, 2)
    finally:
        second.stop()


@pytest.mark.parametrize(
    "filename",
    [
        "",
        "a/recent_x.json",
        "recent_a\\b.json",
        "recent_..json",
        "recent_a..b.json",
        "x.json",
        "recent_.txt",
        "recent_x.json.bak",
        "Recent_x.json",
        "recent_.json",
        "recent_x\x00.json",
        "../recent_x.json",
    ],
)
def test_bad_filenames_are_400(mem, filename):
    err = error(mem.GetRecentFile, pb.GetRecentFileRequest(filename=filename))
    assert err.code() == C.INVALID_ARGUMENT, err.details()
    assert violated_fields(err) == {"filename"}
    err = error(mem.SaveRecentFile, pb.SaveRecentFileRequest(filename=filename, fingerprint="f", identity_token="i"))
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"filename"}


def test_missing_file_is_404(mem):
    err = error(mem.GetRecentFile, pb.GetRecentFileRequest(filename="recent_Nobody.json"))
    assert err.code() == C.NOT_FOUND


def test_resolution_order_first_real_file_wins(handle, mem, tmp_path):
    project = tmp_path / "project"
    write(project / "recent_A.json", render([message("human", "project flat")]))
    assert json.loads(get(mem, "A").content)[0]["data"]["content"] == "project flat"
    write(project / "A" / "recent.json", render([message("human", "project folder")]))
    assert json.loads(get(mem, "A").content)[0]["data"]["content"] == "project folder"
    write(runtime(handle) / "recent_A.json", render([message("human", "runtime flat")]))
    assert json.loads(get(mem, "A").content)[0]["data"]["content"] == "runtime flat"
    # A symlinked folder does not count, even though it holds a recent.json.
    (runtime(handle) / "A").symlink_to(project / "A", target_is_directory=True)
    assert json.loads(get(mem, "A").content)[0]["data"]["content"] == "runtime flat"
    (runtime(handle) / "A").unlink()
    write(runtime(handle) / "A" / "recent.json", render([message("human", "runtime folder")]))
    assert json.loads(get(mem, "A").content)[0]["data"]["content"] == "runtime folder"


def test_legacy_layout_is_edited_in_place_and_listing_skips_symlinks(handle, mem, tmp_path):
    project = tmp_path / "project"
    role_file = project / "recent_Role.json"
    write(role_file, render([message("human", "old line")]))
    before_runtime = sorted(p.name for p in runtime(handle).iterdir()) if runtime(handle).exists() else []
    snap = get(mem, "Role")
    saved = save(mem, "Role", snap, items(("human", "edited line")))
    assert json.loads(role_file.read_text(encoding="utf-8"))[0]["data"]["content"] == "edited line"
    assert (sorted(p.name for p in runtime(handle).iterdir()) if runtime(handle).exists() else []) == before_runtime
    assert not (runtime(handle) / "Role").exists() and not (runtime(handle) / "recent_Role.json").exists()
    assert saved.identity_token == snap.identity_token == identity(role_file, 1)

    # Listing: real Real/recent.json and recent_Legacy.json; symlinked Ghost/ and
    # recent_Phantom.json are not histories.
    write(project / "Real" / "recent.json", render([]))
    write(project / "recent_Legacy.json", render([]))
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere / "Ghost" / "recent.json", render([]))
    write(elsewhere / "phantom.json", render([]))
    (project / "Ghost").symlink_to(elsewhere / "Ghost", target_is_directory=True)
    (project / "recent_Phantom.json").symlink_to(elsewhere / "phantom.json")
    write(runtime(handle) / "semantic_memory_Sem" / "recent.json", render([]))
    files = mem.ListRecentFiles(pb.ListRecentFilesRequest()).files
    assert list(files) == ["recent_Legacy.json", "recent_Real.json", "recent_Role.json"]
    for name in ("Ghost", "Phantom"):
        assert error(mem.GetRecentFile, pb.GetRecentFileRequest(filename=f"recent_{name}.json")).code() == C.NOT_FOUND


def test_listing_deduplicates_and_sorts(handle, mem, tmp_path):
    seed(handle, "b", [])
    seed(handle, "a", [], flat=True)
    write(tmp_path / "project" / "b" / "recent.json", render([]))
    assert list(mem.ListRecentFiles(pb.ListRecentFilesRequest()).files) == ["recent_a.json", "recent_b.json"]


# ---- saving ----------------------------------------------------------------------------------


def test_save_writes_the_stored_format_and_returns_the_next_gets_tokens(handle, mem):
    path = seed(handle, "Mia", [message("human", "hi")])
    snap = get(mem, "Mia")
    chat = items(("human", "こんにちは！"), ("ai", "こんばんは！"), ("system", None))
    chat[0].source_index = 0
    saved = save(mem, "Mia", snap, chat)
    expected = render([message("human", "こんにちは！"), message("ai", "こんばんは！"), message("system", "")])
    assert path.read_bytes() == expected.encode("utf-8")  # 2-space indent, raw UTF-8, no newline
    assert not expected.endswith("\n") and '"content": "こんにちは！"' in expected
    assert saved.success and saved.need_refresh and saved.catgirl_name == "Mia"
    after = get(mem, "Mia")
    assert saved.fingerprint == after.fingerprint == sha(expected)
    assert saved.identity_token == after.identity_token == snap.identity_token


def test_ai_messages_carry_the_tool_call_fields_in_order(handle, mem):
    seed(handle, "Mia", [])
    save(mem, "Mia", get(mem, "Mia"), items(("ai", "x"), ("user", "y")))
    stored = json.loads(get(mem, "Mia").content)
    assert list(stored[0]["data"]) == [
        "content",
        "additional_kwargs",
        "response_metadata",
        "type",
        "name",
        "id",
        "example",
        "tool_calls",
        "invalid_tool_calls",
        "usage_metadata",
    ]
    assert list(stored[0]) == ["type", "data"]
    assert stored[1]["type"] == "user" and "tool_calls" not in stored[1]["data"]  # roles stored as given


def _save_chat(mem, name, snap, chat):
    return mem.SaveRecentFile(
        pb.SaveRecentFileRequest(
            filename=f"recent_{name}.json", fingerprint=snap.fingerprint, identity_token=snap.identity_token, chat=chat
        )
    )


def test_text_limits_are_inclusive(handle, mem):
    seed(handle, "Mia", [])
    snap = get(mem, "Mia")
    err = error(
        mem.SaveRecentFile,
        pb.SaveRecentFileRequest(
            filename="recent_Mia.json",
            fingerprint=snap.fingerprint,
            identity_token=snap.identity_token,
            chat=items(("human", "x" * 32_769)),
        ),
    )
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"chat[0].text"}
    assert "32768" in err.details()
    saved = _save_chat(mem, "Mia", snap, items(("human", "é" * 32_768)))
    assert json.loads(get(mem, "Mia").content)[0]["data"]["content"] == "é" * 32_768
    assert saved.fingerprint == get(mem, "Mia").fingerprint


def test_item_count_and_total_limits(handle, mem):
    seed(handle, "Mia", [])
    snap = get(mem, "Mia")
    err = error(
        mem.SaveRecentFile,
        pb.SaveRecentFileRequest(
            filename="recent_Mia.json",
            fingerprint=snap.fingerprint,
            identity_token=snap.identity_token,
            chat=items(*[("human", "")] * 10_001),
        ),
    )
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"chat"} and "10000" in err.details()
    # 64 texts of 32,768 = 2,097,152 exactly passes; one more character fails.
    exact = items(*[("human", "t" * 32_768)] * 64)
    over = items(*[("human", "t" * 32_768)] * 64, ("ai", "t"))
    err = error(
        mem.SaveRecentFile,
        pb.SaveRecentFileRequest(
            filename="recent_Mia.json", fingerprint=snap.fingerprint, identity_token=snap.identity_token, chat=over
        ),
    )
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"chat"} and "2097152" in err.details()
    assert get(mem, "Mia").fingerprint == snap.fingerprint  # nothing written
    _save_chat(mem, "Mia", snap, exact)
    assert len(json.loads(get(mem, "Mia").content)) == 64
    snap = get(mem, "Mia")
    _save_chat(mem, "Mia", snap, items(*[("human", "")] * 10_000))
    assert len(json.loads(get(mem, "Mia").content)) == 10_000


def test_empty_chat_and_a_role_without_text_pass(handle, mem):
    seed(handle, "Mia", [message("human", "x")])
    _save_chat(mem, "Mia", get(mem, "Mia"), [])
    assert get(mem, "Mia").content == "[]"
    _save_chat(mem, "Mia", get(mem, "Mia"), items(("system", None)))
    assert json.loads(get(mem, "Mia").content) == [message("system", "")]


def test_a_missing_role_is_400(handle, mem):
    seed(handle, "Mia", [])
    snap = get(mem, "Mia")
    err = error(
        mem.SaveRecentFile,
        pb.SaveRecentFileRequest(
            filename="recent_Mia.json",
            fingerprint=snap.fingerprint,
            identity_token=snap.identity_token,
            chat=[pb.ChatItem(role="human", text="a"), pb.ChatItem(text="no role")],
        ),
    )
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"chat[1].role"}


def test_validation_comes_before_the_token_check(handle, mem):
    err = error(
        mem.SaveRecentFile, pb.SaveRecentFileRequest(filename="recent_Mia.json", chat=items(("human", "x" * 32_769)))
    )
    assert err.code() == C.INVALID_ARGUMENT


@pytest.mark.parametrize("missing", ["fingerprint", "identity_token", "both"])
def test_missing_token_is_409_without_reason(handle, mem, missing):
    seed(handle, "Mia", [message("human", "x")])
    snap = get(mem, "Mia")
    request = pb.SaveRecentFileRequest(filename="recent_Mia.json", chat=items(("human", "y")))
    if missing != "fingerprint" and missing != "both":
        request.fingerprint = snap.fingerprint
    if missing != "identity_token" and missing != "both":
        request.identity_token = snap.identity_token
    err = error(mem.SaveRecentFile, request)
    assert err.code() == C.ABORTED and "reload" in err.details()
    assert error_info(err) is None  # no reason code
    assert get(mem, "Mia").fingerprint == snap.fingerprint


def test_conflict_after_an_append_keeps_the_pending_batch(handle, mem):
    path = seed(handle, "Mia", [message("human", "one")])
    snap = get(mem, "Mia")
    append(mem, "Mia", ("human", "two"), ("ai", "three"))
    current = get(mem, "Mia")
    assert json.loads(current.content) == [message("human", "one"), message("human", "two"), message("ai", "three")]
    assert current.identity_token == snap.identity_token and current.fingerprint != snap.fingerprint
    err = error(
        mem.SaveRecentFile,
        pb.SaveRecentFileRequest(
            filename="recent_Mia.json",
            fingerprint=snap.fingerprint,
            identity_token=snap.identity_token,
            chat=items(("human", "edited")),
        ),
    )
    assert err.code() == C.ABORTED
    info = error_info(err)
    assert info.reason == "RECENT_FILE_CONFLICT"
    assert dict(info.metadata) == {"fingerprint": current.fingerprint, "identity_token": current.identity_token}
    assert json.loads(path.read_text(encoding="utf-8")) == [message("human", "one")]  # nothing written
    assert get(mem, "Mia").content == current.content  # pending intact
    # The flush writes exactly what GET showed, so the tokens stay valid across it.
    handle.app.characters.flush_now()
    assert path.read_text(encoding="utf-8") == current.content
    assert get(mem, "Mia").fingerprint == current.fingerprint
    saved = save(mem, "Mia", current, items(("human", "merged")))
    assert saved.fingerprint == get(mem, "Mia").fingerprint


def test_save_clears_the_pending_batch_it_saw(handle, mem):
    path = seed(handle, "Mia", [message("human", "one")])
    append(mem, "Mia", ("human", "two"))
    snap = get(mem, "Mia")
    save(mem, "Mia", snap, items(("human", "only this")))
    handle.app.characters.flush_now()
    assert json.loads(path.read_text(encoding="utf-8")) == [message("human", "only this")]


def test_same_bytes_under_a_new_identity_is_a_conflict(handle, mem):
    path = seed(handle, "Mia", [message("human", "same")])
    snap = get(mem, "Mia")
    original = path.read_bytes()
    path.unlink()
    assert error(mem.GetRecentFile, pb.GetRecentFileRequest(filename="recent_Mia.json")).code() == C.NOT_FOUND
    path.write_bytes(original)  # re-activated with the very same bytes
    again = get(mem, "Mia")
    assert again.fingerprint == snap.fingerprint and again.identity_token != snap.identity_token
    err = error(
        mem.SaveRecentFile,
        pb.SaveRecentFileRequest(
            filename="recent_Mia.json",
            fingerprint=snap.fingerprint,
            identity_token=snap.identity_token,
            chat=items(("human", "stale")),
        ),
    )
    assert err.code() == C.ABORTED and error_info(err).reason == "RECENT_FILE_CONFLICT"
    assert error_info(err).metadata["identity_token"] == again.identity_token
    assert path.read_bytes() == original


def test_a_file_replaced_by_another_writer_changes_identity(handle, mem):
    path = seed(handle, "Mia", [message("human", "same")])
    snap = get(mem, "Mia")
    original = path.read_bytes()
    tmp = path.with_name("other")
    tmp.write_bytes(original)
    os.replace(tmp, path)  # same bytes, another file
    err = error(
        mem.SaveRecentFile,
        pb.SaveRecentFileRequest(
            filename="recent_Mia.json",
            fingerprint=snap.fingerprint,
            identity_token=snap.identity_token,
            chat=items(("human", "stale")),
        ),
    )
    assert error_info(err).reason == "RECENT_FILE_CONFLICT"


def test_a_stale_save_does_not_recreate_a_deleted_character(handle, mem):
    path = seed(handle, "Mia", [message("human", "x")])
    snap = get(mem, "Mia")
    import shutil

    shutil.rmtree(path.parent)
    err = error(
        mem.SaveRecentFile,
        pb.SaveRecentFileRequest(
            filename="recent_Mia.json",
            fingerprint=snap.fingerprint,
            identity_token=snap.identity_token,
            chat=items(("human", "zombie")),
        ),
    )
    assert err.code() == C.ABORTED and error_info(err).reason == "RECENT_FILE_CONFLICT"
    assert not path.parent.exists()


def test_fifty_concurrent_savers_one_wins(handle, mem):
    path = seed(handle, "Mia", [message("human", "base")])
    snap = get(mem, "Mia")
    chats = {i: items(("human", f"saver {i} " + "x" * i), ("ai", f"reply {i}")) for i in range(50)}
    barrier = threading.Barrier(50)

    def attempt(i: int):
        stub = handle.stubs().memory
        barrier.wait()
        try:
            return i, save(stub, "Mia", snap, chats[i]), None
        except grpc.RpcError as err:
            return i, None, err

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(attempt, range(50)))
    winners = [(i, r) for i, r, e in results if r is not None]
    losers = [e for _, r, e in results if e is not None]
    assert len(winners) == 1 and len(losers) == 49
    assert all(e.code() == C.ABORTED and error_info(e).reason == "RECENT_FILE_CONFLICT" for e in losers)
    winner, response = winners[0]
    expected = render([message("human", f"saver {winner} " + "x" * winner), message("ai", f"reply {winner}")])
    assert path.read_bytes() == expected.encode("utf-8")
    assert response.fingerprint == sha(expected)


def test_storage_read_only_or_maintenance_is_409(tmp_path):
    for mode, reason in (("read-only", "STORAGE_READ_ONLY"), ("maintenance", "STORAGE_MAINTENANCE")):
        h = start_server(make_config(tmp_path / mode, storage_mode=mode))
        try:
            seed(h, "Mia", [message("human", "x")])
            stub = h.stubs().memory
            snap = get(stub, "Mia")  # reads still work
            err = error(
                stub.SaveRecentFile,
                pb.SaveRecentFileRequest(
                    filename="recent_Mia.json", fingerprint=snap.fingerprint, identity_token=snap.identity_token
                ),
            )
            assert err.code() == C.ABORTED and error_info(err).reason == reason
            err = error(
                stub.AppendRecentMessages,
                pb.AppendRecentMessagesRequest(character="Mia", messages=items(("human", "x"))),
            )
            assert err.code() == C.ABORTED and error_info(err).reason == reason
        finally:
            h.stop()


# ---- theater capsules ------------------------------------------------------------------------


def capsule(text: str) -> dict:
    m = message("ai", text)
    m["data"]["additional_kwargs"] = {"theater": {"scene": 3, "actors": ["a", "b"]}}
    return m


def test_an_omitted_capsule_is_restored_in_place(handle, mem):
    stored = [
        message("human", "h0"),
        message("ai", "a1"),
        capsule("🎭 scene"),
        message("human", "h3"),
        message("ai", "a4"),
    ]
    path = seed(handle, "Mia", stored)
    snap = get(mem, "Mia")
    chat = items(("human", "h0"), ("ai", "a1 edited"), ("human", "h3"), ("ai", "a4"))
    chat[1].source_index = 1
    save(mem, "Mia", snap, chat)
    assert json.loads(path.read_text(encoding="utf-8")) == [
        message("human", "h0"),
        message("ai", "a1 edited"),
        capsule("🎭 scene"),
        message("human", "h3"),
        message("ai", "a4"),
    ]


def test_a_capsule_sent_back_unchanged_is_kept_verbatim(handle, mem):
    stored = [message("human", "h0"), capsule("scene"), message("ai", "a2")]
    path = seed(handle, "Mia", stored)
    chat = items(("human", "h0"), ("ai", "scene"), ("ai", "a2"))
    chat[1].theater = True
    save(mem, "Mia", get(mem, "Mia"), chat)
    assert json.loads(path.read_text(encoding="utf-8")) == stored


def test_editing_a_capsule_is_409_and_changes_nothing(handle, mem):
    stored = [message("human", "h0"), capsule("scene"), message("ai", "a2")]
    path = seed(handle, "Mia", stored)
    before = path.read_bytes()
    snap = get(mem, "Mia")
    for edit in (dict(source_index=1, theater=True), dict(source_index=1), dict(theater=True)):
        chat = items(("human", "h0"), ("ai", "rewritten scene"), ("ai", "a2"))
        for key, value in edit.items():
            setattr(chat[1], key, value)
        err = error(
            mem.SaveRecentFile,
            pb.SaveRecentFileRequest(
                filename="recent_Mia.json", fingerprint=snap.fingerprint, identity_token=snap.identity_token, chat=chat
            ),
        )
        assert err.code() == C.ABORTED and error_info(err).reason == "RECENT_FILE_THEATER_READONLY", edit
        assert path.read_bytes() == before


def test_a_theater_flagged_item_is_never_written_as_text(handle, mem):
    path = seed(handle, "Mia", [message("human", "h0")])
    chat = items(("human", "h0"), ("ai", "fake capsule"))
    chat[1].theater = True
    save(mem, "Mia", get(mem, "Mia"), chat)
    assert json.loads(path.read_text(encoding="utf-8")) == [message("human", "h0")]


# ---- appends ---------------------------------------------------------------------------------


def test_append_registers_an_unknown_character_and_flushes_in_order(handle, mem):
    first = append(mem, "Nova", ("human", "1"), ("ai", "2"))
    assert (first.success, first.accepted, first.pending) == (True, 2, 2)
    second = append(mem, "Nova", ("human", "3"))
    assert second.pending == 3
    registry = json.loads((handle.config.config_dir / "characters.json").read_text(encoding="utf-8"))
    assert "Nova" in registry["猫娘"]
    assert "recent_Nova.json" in mem.ListRecentFiles(pb.ListRecentFilesRequest()).files
    before = get(mem, "Nova")
    assert json.loads(before.content) == [message("human", "1"), message("ai", "2"), message("human", "3")]
    path = runtime(handle) / "Nova" / "recent.json"
    assert not path.exists()
    assert handle.app.characters.flush_now() == 3
    assert path.read_text(encoding="utf-8") == before.content
    after = get(mem, "Nova")
    assert (after.fingerprint, after.identity_token) == (before.fingerprint, before.identity_token)


def test_append_validation(handle, mem):
    for request, field in (
        (pb.AppendRecentMessagesRequest(character="Nova"), "messages"),
        (pb.AppendRecentMessagesRequest(messages=items(("human", "x"))), "character"),
        (pb.AppendRecentMessagesRequest(character="a/b", messages=items(("human", "x"))), "character"),
        (pb.AppendRecentMessagesRequest(character="api", messages=items(("human", "x"))), "character"),
        (pb.AppendRecentMessagesRequest(character="Nova", messages=[pb.ChatItem(text="x")]), "messages[0].role"),
        (pb.AppendRecentMessagesRequest(character="Nova", messages=items(("human", "x" * 32_769))), "messages[0].text"),
    ):
        err = error(mem.AppendRecentMessages, request)
        assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {field}, request
    assert not (handle.config.config_dir / "characters.json").exists()


def test_flush_happens_on_the_timer(tmp_path):
    h = start_server(make_config(tmp_path, recent_flush_s=0.2))
    try:
        append(h.stubs().memory, "Tick", ("human", "tock"))
        path = h.config.runtime_memory_dir / "Tick" / "recent.json"
        deadline = time.monotonic() + 10
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads(path.read_text(encoding="utf-8")) == [message("human", "tock")]
    finally:
        h.stop()


def test_flush_happens_on_size(tmp_path):
    h = start_server(make_config(tmp_path, recent_flush_s=3600.0, recent_flush_messages=3))
    try:
        stub = h.stubs().memory
        append(stub, "Big", ("human", "1"), ("ai", "2"))
        path = h.config.runtime_memory_dir / "Big" / "recent.json"
        time.sleep(0.3)
        assert not path.exists()
        append(stub, "Big", ("human", "3"))
        deadline = time.monotonic() + 10
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(json.loads(path.read_text(encoding="utf-8"))) == 3
    finally:
        h.stop()


def test_pending_appends_are_flushed_at_shutdown(tmp_path):
    h = start_server(make_config(tmp_path, recent_flush_s=3600.0))
    append(h.stubs().memory, "Bye", ("human", "last words"))
    path = h.config.runtime_memory_dir / "Bye" / "recent.json"
    assert not path.exists()
    h.stop()
    assert json.loads(path.read_text(encoding="utf-8")) == [message("human", "last words")]


def test_a_crash_between_write_and_journal_delete_does_not_duplicate(handle, mem):
    """The write lands, the process dies before the journal rows are deleted: the rows are
    recognised as already written (consumed_by = the file's fingerprint)."""
    append(mem, "Dup", ("human", "once"))
    store = handle.app.characters.store

    def crash(step: str) -> None:
        if step == "flush.commit.written":
            raise RuntimeError("killed between the file write and the journal delete")

    handle.app.characters.step_hook = crash
    handle.app.characters.flush_now()
    handle.app.characters.step_hook = None
    assert len(store.pending("Dup")) == 1
    assert json.loads(get(mem, "Dup").content) == [message("human", "once")]
    assert store.pending("Dup") == []


# ---- shielded commit and review cancellation ------------------------------------------------


def test_a_cancelled_save_still_completes(handle, mem):
    path = seed(handle, "Mia", [message("human", "x")])
    snap = get(mem, "Mia")
    entered = threading.Event()

    def slow(step: str) -> None:
        if step == "save.commit":
            entered.set()
            time.sleep(1.0)

    handle.app.characters.step_hook = slow
    err = error(
        mem.SaveRecentFile,
        pb.SaveRecentFileRequest(
            filename="recent_Mia.json",
            fingerprint=snap.fingerprint,
            identity_token=snap.identity_token,
            chat=items(("human", "committed anyway")),
        ),
        timeout=0.3,
    )
    assert err.code() == C.DEADLINE_EXCEEDED and entered.is_set()
    deadline = time.monotonic() + 10
    while json.loads(path.read_text(encoding="utf-8"))[0]["data"]["content"] != "committed anyway":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    handle.app.characters.step_hook = None


def test_a_manual_save_cancels_the_running_review(handle, mem):
    chars = handle.app.characters
    in_review, release = threading.Event(), threading.Event()

    def hook(step: str) -> None:
        if step == "review.message":
            in_review.set()
            assert release.wait(10)

    chars.step_hook = hook
    append(mem, "Rev", ("human", "I love green tea"), ("human", "I love green tea"))
    chars.flush_now()
    assert in_review.wait(10)
    save(mem, "Rev", get(mem, "Rev"), items(("human", "rewritten")))
    release.set()
    deadline = time.monotonic() + 10
    while chars.reviews.busy("Rev"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    chars.step_hook = None
    assert chars.reviews.cancelled >= 1
    assert chars.reflections.store.of_character("Rev") == []
