"""Typed fuzzing of the character-memory RPCs: hostile names, file names, chat items and
paths never crash the server (INTERNAL/UNKNOWN) and never write outside the memory roots."""

from __future__ import annotations

import json

import grpc
from google.protobuf import struct_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsvc.v1 import memory_pb2 as pb

C = grpc.StatusCode
ALLOWED = {None, C.INVALID_ARGUMENT, C.NOT_FOUND, C.ABORTED}
NAMES = st.one_of(
    st.sampled_from(
        [
            "Mia",
            "小天",
            "api",
            "CON",
            "a/b",
            "..",
            ".",
            "x.",
            " Mia ",
            "a\x00b",
            "中" * 31,
            "a" * 300,
            "recent_",
            "semantic_memory_x",
            "\u202e",
            "🧠",
            "O'Neil",
            "a\\b",
            "\n",
            "",
        ]
    ),
    st.text(max_size=20),
)
FILENAMES = st.one_of(
    NAMES.map(lambda n: f"recent_{n}.json"),
    st.text(max_size=30),
    st.sampled_from(["recent_Mia.json", "recent_../x.json", "recent_.json", "/etc/passwd"]),
)
ITEMS = st.lists(
    st.builds(
        lambda role, text, index, theater: pb.ChatItem(
            **{k: v for k, v in dict(role=role, text=text, source_index=index).items() if v is not None},
            theater=theater,
        ),
        st.one_of(st.none(), st.sampled_from(["human", "ai", "system", ""]), st.text(max_size=5)),
        st.one_of(st.none(), st.text(max_size=40)),
        st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
        st.booleans(),
    ),
    max_size=8,
)


def _call(fn, request):
    try:
        fn(request, timeout=10)
        return None, ""
    except grpc.RpcError as err:
        return err.code(), err.details() or ""


def _fuzz_settings(n: int) -> settings:
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_fuzz_recent_files(server, stubs, tmp_path):
    mem = stubs.memory
    runtime = server.config.runtime_memory_dir
    (runtime / "Mia").mkdir(parents=True)
    (runtime / "Mia" / "recent.json").write_text(
        json.dumps(
            [
                {"type": "ai", "data": {"content": "scene", "additional_kwargs": {"theater": {}}}},
                {"type": "human", "data": {"content": "x"}},
            ]
        )
    )

    @_fuzz_settings(200)
    @given(filename=FILENAMES, chat=ITEMS, character=NAMES, tokens=st.booleans())
    def run(filename, chat, character, tokens):
        code, details = _call(mem.GetRecentFile, pb.GetRecentFileRequest(filename=filename))
        assert code in ALLOWED, (code, details)
        request = pb.SaveRecentFileRequest(filename=filename, chat=chat)
        if tokens:
            try:
                snap = mem.GetRecentFile(pb.GetRecentFileRequest(filename=filename), timeout=10)
                request.fingerprint, request.identity_token = snap.fingerprint, snap.identity_token
            except grpc.RpcError:
                request.fingerprint, request.identity_token = "f", "i"
        code, details = _call(mem.SaveRecentFile, request)
        assert code in ALLOWED, (code, details)
        code, details = _call(
            mem.AppendRecentMessages, pb.AppendRecentMessagesRequest(character=character, messages=chat)
        )
        assert code in ALLOWED, (code, details)

    run()
    server.app.characters.flush_now()
    # Nothing escaped the data dir.
    assert not (tmp_path / "etc").exists() and not (tmp_path / "x.json").exists()
    code, _ = _call(mem.ListRecentFiles, pb.ListRecentFilesRequest())
    assert code is None


def test_fuzz_rename_and_purge(server, stubs):
    mem = stubs.memory
    server.config.config_dir.mkdir(parents=True, exist_ok=True)
    (server.config.config_dir / "characters.json").write_text(json.dumps({"猫娘": {"Mia": {}, "v1.api": {}}}))

    @_fuzz_settings(150)
    @given(
        old=NAMES,
        new=NAMES,
        alias=st.booleans(),
        paths=st.lists(st.one_of(st.text(max_size=20), st.sampled_from(["/", "/tmp", "..", "C:\\x"])), max_size=3),
    )
    def run(old, new, alias, paths):
        code, details = _call(
            mem.RenameCharacter, pb.RenameCharacterRequest(old_name=old, new_name=new, compat_alias=alias)
        )
        assert code in ALLOWED, (code, details)
        values = [struct_pb2.Value(string_value=p) for p in paths]
        code, details = _call(mem.PurgeLegacy, pb.PurgeLegacyRequest(paths=values))
        assert code in ALLOWED, (code, details)

    run()
