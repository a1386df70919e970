"""The character-memory routes through the real Envoy gateway: the documented snake_case
JSON, the transcoder's own refusals (a number for a string field), snapshot conflicts with
their tokens in the error details, both rename routes told apart by the path Envoy
forwards, legacy scan/purge and the strict-boolean switches."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Rest, ServerHandle, make_config, start_gateway, start_server

from tests.support.chat_history import message as msg

pytestmark = pytest.mark.e2e

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"


class Env:
    def __init__(self, server: ServerHandle, rest: Rest, legacy: Path):
        self.server, self.rest, self.legacy = server, rest, legacy

    @property
    def runtime(self) -> Path:
        return self.server.config.runtime_memory_dir

    def seed(self, name: str, messages: list) -> Path:
        path = self.runtime / name / "recent.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(messages, indent=2, ensure_ascii=False), encoding="utf-8")
        return path

    def get(self, filename: str) -> tuple[int, Any]:
        return self.rest.call("GET", "/api/memory/recent_file?" + urllib.parse.urlencode({"filename": filename}))

    def snapshot(self, name: str) -> dict[str, Any]:
        status, body = self.get(f"recent_{name}.json")
        assert status == 200, body
        return body

    def save(self, name: str, snap: dict[str, Any] | None, chat: Any, raw: bytes | None = None) -> tuple[int, Any]:
        body: dict[str, Any] = {"filename": f"recent_{name}.json", "chat": chat}
        if snap is not None:
            body.update(fingerprint=snap["fingerprint"], identity_token=snap["identity_token"])
        return self.rest.call("POST", "/api/memory/recent_file/save", body, raw=raw)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("rest-characters")
    legacy_app = root / "old-app"
    (legacy_app / "memory" / "Relic").mkdir(parents=True)
    (legacy_app / "memory" / "Relic" / "recent.json").write_bytes(b"[]")
    handle = start_server(make_config(root, legacy_app_roots=(str(legacy_app),), recent_flush_s=3600.0))
    gateway = start_gateway(handle)
    try:
        yield Env(handle, Rest(f"http://127.0.0.1:{gateway.settings.listen_port}"), legacy_app / "memory")
    finally:
        gateway.stop()
        handle.stop()


def details(body: Any, kind: str) -> list[dict[str, Any]]:
    return [d for d in body.get("details", []) if d.get("@type") == kind]


def reason(body: Any) -> str | None:
    infos = details(body, ERROR_INFO)
    return infos[0]["reason"] if infos else None


def bad_fields(body: Any) -> set[str]:
    return {v["field"] for d in details(body, BAD_REQUEST) for v in d.get("fieldViolations", [])}


# ---- recent files ----------------------------------------------------------------------------


def test_get_and_save_speak_snake_case(env):
    path = env.seed("小天", [msg("human", "こんにちは！")])
    status, body = env.get("recent_小天.json")
    assert status == 200 and set(body) == {"content", "fingerprint", "identity_token"}, body
    assert body["content"] == path.read_text(encoding="utf-8")
    status, saved = env.save(
        "小天", body, [{"role": "human", "text": "こんにちは！"}, {"role": "ai", "text": "こんばんは！"}]
    )
    assert status == 200, saved
    assert saved == {
        "success": True,
        "need_refresh": True,
        "catgirl_name": "小天",
        "fingerprint": env.snapshot("小天")["fingerprint"],
        "identity_token": body["identity_token"],
    }
    assert json.loads(path.read_text(encoding="utf-8")) == [msg("human", "こんにちは！"), msg("ai", "こんばんは！")]


def test_list_recent_files(env):
    env.seed("Listed", [])
    status, body = env.rest.call("GET", "/api/memory/recent_files")
    assert status == 200 and "recent_Listed.json" in body["files"] and body["files"] == sorted(body["files"])


@pytest.mark.parametrize("field, value", [("role", 123), ("text", 123), ("role", True), ("text", ["x"])])
def test_a_non_string_role_or_text_is_refused_by_the_transcoder(env, field, value):
    path = env.seed("Typed", [msg("human", "x")])
    before = path.read_bytes()
    item: dict[str, Any] = {"role": "human", "text": "ok"}
    item[field] = value
    status, body = env.save("Typed", env.snapshot("Typed"), [item])
    assert status == 400, body
    assert body["code"] == 3, body
    assert path.read_bytes() == before


def test_limits_over_rest(env):
    env.seed("Limits", [])
    status, body = env.save("Limits", env.snapshot("Limits"), [{"role": "human", "text": "x" * 32_769}])
    assert status == 400 and bad_fields(body) == {"chat[0].text"}, body
    status, body = env.save("Limits", env.snapshot("Limits"), [{"role": "human"}] * 10_001)
    assert status == 400 and bad_fields(body) == {"chat"}, body
    status, body = env.save("Limits", env.snapshot("Limits"), [{"role": "human", "text": "x" * 32_768}])
    assert status == 200, body
    status, body = env.save("Limits", env.snapshot("Limits"), [])
    assert status == 200 and env.snapshot("Limits")["content"] == "[]"
    status, body = env.save("Limits", env.snapshot("Limits"), [{"role": "system"}])
    assert status == 200 and json.loads(env.snapshot("Limits")["content"]) == [msg("system", "")]


def test_unknown_item_fields_are_not_stored(env):
    path = env.seed("Extra", [])
    status, body = env.save(
        "Extra", env.snapshot("Extra"), [{"role": "human", "text": "x", "mood": "happy", "data": {"injected": True}}]
    )
    assert status == 200, body
    assert json.loads(path.read_text(encoding="utf-8")) == [msg("human", "x")]


@pytest.mark.parametrize(
    "filename", ["a/recent_x.json", "recent_a\\b.json", "recent_..json", "notes.json", "recent_x.txt", ""]
)
def test_bad_filenames_are_400(env, filename):
    status, body = env.get(filename)
    assert status == 400 and bad_fields(body) == {"filename"}, body


def test_missing_token_is_409_without_reason(env):
    env.seed("NoToken", [msg("human", "x")])
    status, body = env.save("NoToken", None, [{"role": "human", "text": "y"}])
    assert status == 409 and body["code"] == 10, body
    assert reason(body) is None and "reload" in body["message"], body


def test_conflict_carries_the_current_tokens(env):
    path = env.seed("Clash", [msg("human", "one")])
    old = env.snapshot("Clash")
    status, appended = env.rest.call(
        "POST", "/api/memory/recent_file/append", {"character": "Clash", "messages": [{"role": "ai", "text": "two"}]}
    )
    assert status == 200 and appended == {"success": True, "accepted": 1, "pending": 1}, appended
    current = env.snapshot("Clash")
    status, body = env.save("Clash", old, [{"role": "human", "text": "mine"}])
    assert status == 409, body
    [info] = details(body, ERROR_INFO)
    assert info["reason"] == "RECENT_FILE_CONFLICT"
    assert info["metadata"] == {"fingerprint": current["fingerprint"], "identity_token": current["identity_token"]}
    assert json.loads(path.read_text(encoding="utf-8")) == [msg("human", "one")]
    assert env.snapshot("Clash") == current  # the pending batch is intact


def test_missing_file_is_404(env):
    status, body = env.get("recent_NobodyHere.json")
    assert status == 404 and body["code"] == 5, body


# ---- rename: two routes, one RPC -------------------------------------------------------------


def _register(env: Env, *names: str) -> None:
    registry = env.server.config.config_dir / "characters.json"
    data = json.loads(registry.read_text(encoding="utf-8")) if registry.exists() else {"猫娘": {}}
    for name in names:
        data["猫娘"][name] = {}
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def test_both_rename_routes_and_the_alias_no_op(env):
    _register(env, "旧名")
    env.seed("旧名", [msg("human", "hi")])
    status, body = env.rest.call("POST", "/api/memory/update_catgirl_name", {"old_name": "旧名", "new_name": "新名"})
    assert status == 200 and body == {"success": True, "memory_renamed": True, "memory_server_reloaded": True}, body
    assert (env.runtime / "新名" / "recent.json").exists() and not (env.runtime / "旧名").exists()
    # Through the alias the duplicate is an idempotent no-op...
    status, body = env.rest.call("POST", "/api/memory/update_catgirl_name", {"old_name": "旧名", "new_name": "新名"})
    assert status == 200 and body == {
        "success": True,
        "changed": False,
        "already_renamed": True,
        "exists_after": True,
    }, body
    # ...through the canonical route (same RPC) it is not: Envoy's x-envoy-original-path
    # tells the server which route was called.
    status, body = env.rest.call(
        "POST", "/api/characters/catgirl/" + urllib.parse.quote("旧名") + "/rename", {"new_name": "新名"}
    )
    assert status == 404 and body["code"] == 5, body
    # The canonical route takes old_name from the path.
    status, body = env.rest.call(
        "POST", "/api/characters/catgirl/" + urllib.parse.quote("新名") + "/rename", {"new_name": "最新"}
    )
    assert status == 200 and body["memory_renamed"] is True, body
    assert (env.runtime / "最新" / "recent.json").exists()


def test_partial_rename_through_the_alias_is_409(env):
    _register(env, "Published")
    (env.runtime / "Leftover").mkdir(parents=True)
    status, body = env.rest.call(
        "POST", "/api/memory/update_catgirl_name", {"old_name": "Leftover", "new_name": "Published"}
    )
    assert status == 409 and reason(body) == "PARTIAL_RENAME", body


@pytest.mark.parametrize("new_name", ["api", "CON", "a/b", "x.", "中" * 61])
def test_bad_new_names_are_400(env, new_name):
    _register(env, "Namer")
    status, body = env.rest.call("POST", "/api/characters/catgirl/Namer/rename", {"new_name": new_name})
    assert status == 400 and bad_fields(body) == {"new_name"}, body


# ---- legacy ----------------------------------------------------------------------------------


def test_legacy_scan_and_purge_speak_snake_case(env):
    status, scan = env.rest.call("GET", "/api/memory/legacy/scan")
    assert status == 200, scan
    assert set(scan) == {"success", "legacy_roots", "runtime_memory_dir", "total_entries", "total_size_bytes"}
    [root] = scan["legacy_roots"]
    assert set(root) == {"root", "source", "exists", "entries"} and root["source"] == "legacy_app_root"
    [entry] = root["entries"]
    assert entry == {
        "name": "Relic",
        "path": str(env.legacy / "Relic"),
        "is_dir": True,
        "size_bytes": 2,
        "is_unlinked": True,
        "runtime_has_same_name": False,
    }
    status, body = env.rest.call("POST", "/api/memory/legacy/purge", {"paths": [entry["path"], "relative/x", 5]})
    assert status == 200, body
    assert body["success"] is True and body["removed"] == [entry["path"]]
    assert [e["path"] for e in body["errors"]] == ["relative/x", "5"]
    status, body = env.rest.call("POST", "/api/memory/legacy/purge", {"paths": []})
    assert status == 400 and bad_fields(body) == {"paths"}, body


# ---- switches --------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ["review_config", "powerful_memory_config"])
def test_switches_take_only_json_booleans(env, route):
    config = env.server.config.config_dir / "core_config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(b'{"other": "kept", "recent_memory_auto_review": true}')
    for bad in ("yes", 1, "true", None, [True], {"v": True}):
        status, body = env.rest.call("POST", f"/api/memory/{route}", {"enabled": bad})
        assert status == 400, (bad, body)
        assert config.read_bytes() == b'{"other": "kept", "recent_memory_auto_review": true}'
    status, body = env.rest.call("POST", f"/api/memory/{route}", {"enabled": False})
    assert status == 200 and body == {"success": True, "enabled": False}, body
    status, body = env.rest.call("GET", f"/api/memory/{route}")
    assert status == 200 and body == {"enabled": False}, body  # false is printed
    assert json.loads(config.read_text(encoding="utf-8"))["other"] == "kept"
    status, body = env.rest.call("POST", f"/api/memory/{route}", {"enabled": True})
    assert status == 200 and body == {"success": True, "enabled": True}, body


def test_an_unparseable_switch_file_is_503(env):
    config = env.server.config.config_dir / "core_config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(b"{broken")
    try:
        status, body = env.rest.call("GET", "/api/memory/review_config")
        assert status == 503 and body["code"] == 14, body
    finally:
        config.write_bytes(b"{}")
