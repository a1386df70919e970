"""Reading a character's chat needs its owner, as writing it does: GetRecentFile is checked in
the rule table against `character:<name>`, and ListRecentFiles names only the characters the
token covers (an admin or a `*` token: all). A refusal depends on the name and the token
alone: reading a forbidden character that has a history and one that has none are refused
with the same status, reason and message (but for the name), so a refusal reveals nothing
about another tenant's characters. Through the real gRPC server."""

from __future__ import annotations

import grpc
from character_helpers import error, error_info
from test_character_tenancy import ADMIN, _append, _assert_denied, _stubs, handle  # noqa: F401 - the server

from memsvc.v1 import memory_pb2 as pb


def _get(stubs, character: str) -> pb.GetRecentFileResponse:
    return stubs.memory.GetRecentFile(pb.GetRecentFileRequest(filename=f"recent_{character}.json"), timeout=10)


def _listed(stubs) -> list[str]:
    return list(stubs.memory.ListRecentFiles(pb.ListRecentFilesRequest(), timeout=10).files)


def _refusal(stubs, character: str) -> tuple[grpc.StatusCode, str, str, dict[str, str]]:
    """What a refused read tells, with the character's name taken out."""
    err = error(stubs.memory.GetRecentFile, pb.GetRecentFileRequest(filename=f"recent_{character}.json"), timeout=10)
    _assert_denied(err, f"character:{character}")
    info = error_info(err)
    return err.code(), err.details().replace(character, "<name>"), info.reason, dict(info.metadata)


def test_reading_a_characters_chat_needs_its_owner(handle):
    admin = handle.stubs(ADMIN)
    _append(admin, "Mia", "I love green tea")
    other = _stubs(handle, "other", ["character:Other", "Mia"])
    _assert_denied(
        error(other.memory.GetRecentFile, pb.GetRecentFileRequest(filename="recent_Mia.json"), timeout=10),
        "character:Mia",
    )
    mia = _stubs(handle, "mia", ["character:Mia"])
    assert "I love green tea" in _get(mia, "Mia").content
    everyone = _stubs(handle, "everyone", ["*"])
    assert _get(everyone, "Mia").content == _get(mia, "Mia").content == _get(admin, "Mia").content


def test_a_refused_read_does_not_tell_whether_the_character_has_a_history(handle):
    """Mia has a history (flushed to disk), Mio only pending appends, Ghost nothing: a token
    covering none of them gets the same answer for each; its own missing character is
    NOT_FOUND, which tells it only about itself."""
    admin = handle.stubs(ADMIN)
    _append(admin, "Mia", "I love green tea")
    handle.app.characters.flush_now()
    _append(admin, "Mio", "still pending")
    other = _stubs(handle, "other", ["character:Other"])
    answers = {name: _refusal(other, name) for name in ("Mia", "Mio", "Ghost")}
    assert answers["Mia"] == answers["Mio"] == answers["Ghost"], answers
    err = error(other.memory.GetRecentFile, pb.GetRecentFileRequest(filename="recent_Other.json"), timeout=10)
    assert err.code() is grpc.StatusCode.NOT_FOUND
    bad = error(other.memory.GetRecentFile, pb.GetRecentFileRequest(filename="Mia.json"), timeout=10)
    assert bad.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_the_listing_names_only_the_characters_the_token_covers(handle):
    admin = handle.stubs(ADMIN)
    for name in ("Mia", "Nia", "Other"):
        _append(admin, name, f"hello from {name}")
    handle.app.characters.flush_now()
    _append(admin, "Mio", "only pending so far")
    everything = ["recent_Mia.json", "recent_Mio.json", "recent_Nia.json", "recent_Other.json"]
    assert _listed(admin) == everything
    assert _listed(_stubs(handle, "everyone", ["*"])) == everything
    assert _listed(_stubs(handle, "two", ["character:Mia", "character:Mio", "Nia"])) == [
        "recent_Mia.json",
        "recent_Mio.json",
    ]
    assert _listed(_stubs(handle, "none", ["alice"])) == []
