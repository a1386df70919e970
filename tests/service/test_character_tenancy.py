"""Writing a character's chat is writing its memories: the chat turns an append or a save
stores become memories of `character:<name>` (the reviews promote them), so a token must
cover that owner, as it would an apiKeyId. Through the real gRPC server; what was refused
is checked with an admin's reads."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from character_helpers import error, error_info, items
from conftest import ServerHandle, make_config, start_server

from memsvc.v1 import memory_pb2 as pb

ADMIN = "env-admin-token"
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def handle(tmp_path) -> Iterator[ServerHandle]:
    h = start_server(make_config(tmp_path, api_tokens=(ADMIN,), recent_flush_s=3600.0))
    try:
        yield h
    finally:
        h.stop()


def _stubs(handle: ServerHandle, name: str, tenants: list[str]):
    token = handle.app.credentials.create(name, ["read:memory", "write:memory"], tenants, True).token
    return handle.stubs(token)


def _append(stubs, character: str, text: str) -> pb.AppendRecentMessagesResponse:
    return stubs.memory.AppendRecentMessages(
        pb.AppendRecentMessagesRequest(character=character, messages=items(("human", text))), timeout=10
    )


def _content(admin, character: str) -> str | None:
    try:
        return admin.memory.GetRecentFile(
            pb.GetRecentFileRequest(filename=f"recent_{character}.json"), timeout=10
        ).content
    except grpc.RpcError as err:
        assert err.code() is grpc.StatusCode.NOT_FOUND, err
        return None


def _assert_denied(err: grpc.RpcError, owner: str) -> None:
    assert err.code() is grpc.StatusCode.PERMISSION_DENIED, err
    assert error_info(err).reason == "PERMISSION_DENIED"
    assert repr(owner) in err.details()


def test_an_append_needs_the_characters_owner_among_the_tokens_tenants(handle, caplog):
    """Refused by the rule table, before the call runs: the audit line names the owner."""
    admin = handle.stubs(ADMIN)
    other = _stubs(handle, "other", ["character:Other"])
    caplog.set_level(logging.INFO, logger="memsvc.audit")
    for name in ("Mia", " Mia "):
        err = error(
            other.memory.AppendRecentMessages,
            pb.AppendRecentMessagesRequest(character=name, messages=items(("human", "I love green tea"))),
            timeout=10,
        )
        _assert_denied(err, "character:Mia")
    audited = [(r.token_id, r.tenant, r.status) for r in caplog.records if r.name == "memsvc.audit"]
    assert audited == [("other", "character:Mia", "PERMISSION_DENIED")] * 2
    assert _content(admin, "Mia") is None
    listed = admin.memory.ListRecentFiles(pb.ListRecentFilesRequest(), timeout=10).files
    assert "recent_Mia.json" not in listed, "a refused append registered the character"
    mia = _stubs(handle, "mia", ["character:Mia"])
    assert _append(mia, "Mia", "I love green tea").accepted == 1
    assert "I love green tea" in _content(admin, "Mia")


def test_a_save_needs_the_characters_owner_among_the_tokens_tenants(handle):
    admin = handle.stubs(ADMIN)
    _append(admin, "Mia", "the original line")
    snap = admin.memory.GetRecentFile(pb.GetRecentFileRequest(filename="recent_Mia.json"), timeout=10)
    request = pb.SaveRecentFileRequest(
        filename="recent_Mia.json",
        fingerprint=snap.fingerprint,
        identity_token=snap.identity_token,
        chat=items(("human", "rewritten")),
    )
    other = _stubs(handle, "other", ["character:Other", "Mia"])
    _assert_denied(error(other.memory.SaveRecentFile, request, timeout=10), "character:Mia")
    assert _content(admin, "Mia") == snap.content
    mia = _stubs(handle, "mia", ["character:Mia"])
    assert mia.memory.SaveRecentFile(request, timeout=10).success
    assert "rewritten" in _content(admin, "Mia") and "the original line" not in _content(admin, "Mia")


def test_an_append_to_an_old_name_is_checked_against_the_character_it_lands_on(handle):
    """An append to a renamed character's old name goes to the new name: a token covering
    only the old owner does not write the new one through it."""
    admin = handle.stubs(ADMIN)
    _append(admin, "Old", "hello")
    handle.app.characters.flush_now()
    admin.memory.RenameCharacter(pb.RenameCharacterRequest(old_name="Old", new_name="Mia"), timeout=10)
    before = _content(admin, "Mia")
    old = _stubs(handle, "old", ["character:Old"])
    _assert_denied(
        error(
            old.memory.AppendRecentMessages,
            pb.AppendRecentMessagesRequest(character="Old", messages=items(("human", "smuggled"))),
            timeout=10,
        ),
        "character:Mia",
    )
    assert _content(admin, "Mia") == before and "smuggled" not in before
    both = _stubs(handle, "both", ["character:Old", "character:Mia"])
    assert _append(both, "Old", "allowed now").accepted == 1
    assert "allowed now" in _content(admin, "Mia")


def _say(handle: ServerHandle, stubs, text: str) -> None:
    _append(stubs, "Mia", text)
    handle.app.characters.flush_now()
    deadline = time.monotonic() + 10
    while handle.app.characters.reviews.busy("Mia"):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _memories_of_mia(admin) -> list[str]:
    listing = admin.memory.ListMemories(pb.ListMemoriesRequest(api_key_id="character:Mia"), timeout=10)
    return [m.content for m in listing.data]


def test_refused_appends_never_become_the_characters_memories(handle):
    """Review and Powerful Memory are on (the defaults): three appends of a fact promote it
    into `character:Mia`, but only when the token may write there."""
    admin = handle.stubs(ADMIN)
    clock = {"now": T0}
    handle.app.characters.clock = lambda: clock["now"]
    other = _stubs(handle, "other", ["character:Other"])
    for _ in range(3):
        err = error(
            other.memory.AppendRecentMessages,
            pb.AppendRecentMessagesRequest(character="Mia", messages=items(("human", "I love green tea"))),
            timeout=10,
        )
        _assert_denied(err, "character:Mia")
        handle.app.characters.flush_now()
    assert handle.app.characters.reflections.store.of_character("Mia") == []
    assert _memories_of_mia(admin) == []
    mia = _stubs(handle, "mia", ["character:Mia"])
    for hours, text in enumerate(("I love green tea", "Honestly, I love green tea!", "I love green tea, as always")):
        clock["now"] = T0 + timedelta(hours=hours)
        _say(handle, mia, text)
    assert _memories_of_mia(admin) == ["User loves green tea"]
