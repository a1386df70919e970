"""Memory backends through the real gRPC server, against loopback stand-ins of Obsidian's
Local REST API and Notion's API (real HTTP, their published request and answer shapes):
settings (keys write-only and masked, every violation listed), the routing rules (create
and list on the primary, get falling back while not found, update/delete replayed on the
fallbacks in the background and retried while one is down, search falling back on error,
Retrieve and Inject on the backend's search with the backend named in the resolution,
the owner filter applied to whatever a backend answers), keep (no age limit) stored the
way each store holds it and honoured by retention, and each backend's health in engine
status."""

from __future__ import annotations

import re
import ssl
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import make_config, start_server
from google.protobuf import json_format, struct_pb2, timestamp_pb2
from support.backend_fixtures import notion, obsidian  # noqa: F401 - fixtures
from support.fake_notion import FakeNotion
from support.fake_obsidian import FakeObsidian, frontmatter
from support.rpc_errors import error, error_info, violated_fields

from memsvc.core.backend_manager import SEARCH_LIMIT
from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb

C = grpc.StatusCode
OWNER = "alice"


# ---- helpers ---------------------------------------------------------------------------------


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def put_settings(stubs, **values: Any) -> dict[str, Any]:
    answer = stubs.settings.UpdateMemorySettings(spb.UpdateMemorySettingsRequest(settings=struct(values)))
    return json_format.MessageToDict(answer)


def obsidian_config(api: FakeObsidian, **extra: Any) -> dict[str, Any]:
    return {"baseUrl": api.base_url, "apiKey": api.api_key, "timeoutMs": 2000, **extra}


def notion_config(api: FakeNotion, **extra: Any) -> dict[str, Any]:
    return {"baseUrl": api.base_url, "apiKey": api.token, "databaseId": api.database_id, "timeoutMs": 2000, **extra}


def use(
    stubs, obsidian: FakeObsidian, notion: FakeNotion, primary: str, fallbacks: list[str], **values: Any
) -> dict[str, Any]:
    return put_settings(
        stubs,
        primaryBackend=primary,
        fallbackBackends=fallbacks,
        backendConfigs={"obsidian": obsidian_config(obsidian), "notion": notion_config(notion)},
        **values,
    )


def create(stubs, content: str, owner: str = OWNER, **fields: Any) -> str:
    return stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id=owner, content=content, **fields)).id


def statuses(stubs) -> dict[str, epb.BackendStatus]:
    return {b.name: b for b in stubs.engine.GetEngineStatus(epb.GetEngineStatusRequest()).backends}


def wait_for(condition: Callable[[], Any], what: str, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")


def note_for(memory_id: str, owner: str, content: str) -> str:
    """A memory note as a vault holds it (what a mirror of the memory would have written)."""
    return (
        f"---\nmemsvc: 1\nid: {memory_id}\napiKeyId: {owner}\ntype: factual\nmetadata: '{{}}'\n"
        f"createdAt: '2026-01-01T00:00:00Z'\n---\n{content}"
    )


@pytest.fixture
def server(tmp_path):
    handle = start_server(make_config(tmp_path, backend_health_s=0.2, backend_retry_s=0.05))
    yield handle
    handle.stop()


# ---- settings --------------------------------------------------------------------------------


def test_a_backend_key_is_write_only_masked_and_kept_when_left_out(stubs, obsidian, notion):
    answer = use(stubs, obsidian, notion, "obsidian", [])
    shown = answer["backendConfigs"]["obsidian"]
    assert (
        "apiKey" not in shown and shown["hasApiKey"] is True and shown["apiKeyMasked"] == "***" + obsidian.api_key[-4:]
    )
    got = json_format.MessageToDict(stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest()))
    assert got["backendConfigs"] == answer["backendConfigs"] and obsidian.api_key not in str(got)
    # Sending back what GET returned keeps the key: the vault still accepts the calls.
    put_settings(stubs, backendConfigs=got["backendConfigs"])
    assert statuses(stubs)["obsidian"].healthy
    removed = put_settings(stubs, backendConfigs={"obsidian": {**obsidian_config(obsidian), "apiKey": ""}})
    assert removed["backendConfigs"]["obsidian"]["hasApiKey"] is False
    assert "did not accept the API key" in statuses(stubs)["obsidian"].error


def test_invalid_backend_settings_list_every_violation_and_save_nothing(stubs, obsidian):
    before = stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest())
    err = error(
        stubs.settings.UpdateMemorySettings,
        spb.UpdateMemorySettingsRequest(
            settings=struct(
                {
                    "primaryBackend": "vault",
                    "fallbackBackends": ["notion", "nowhere"],
                    "backendConfigs": {
                        "obsidian": {
                            "baseUrl": "http://169.254.169.254/",
                            "apiKey": "has space",
                            "timeoutMs": 1,
                            "bogus": 1,
                        },
                        "notion": {"databaseId": "not-an-id"},
                        "custom": {"type": "http", "endpoints": {"get": "memories"}, "queryParams": {"limit": "a b"}},
                        "other": {"type": "ftp"},
                    },
                }
            )
        ),
    )
    assert err.code() == C.INVALID_ARGUMENT
    assert violated_fields(err) >= {
        "primaryBackend",
        "fallbackBackends",
        "backendConfigs.obsidian.baseUrl",
        "backendConfigs.obsidian.apiKey",
        "backendConfigs.obsidian.timeoutMs",
        "backendConfigs.obsidian.bogus",
        "backendConfigs.notion.databaseId",
        "backendConfigs.custom.baseUrl",
        "backendConfigs.custom.endpoints.get",
        "backendConfigs.custom.queryParams.limit",
        "backendConfigs.other.type",
    }
    assert "has space" not in err.details()
    assert stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest()) == before
    assert not obsidian.requests


# ---- routing ---------------------------------------------------------------------------------


def test_create_and_list_go_to_the_primary_only(stubs, obsidian, notion):
    use(stubs, obsidian, notion, "obsidian", ["notion"])
    memory_id = create(stubs, "User prefers dark mode", key="pref:theme", session_id="s1", metadata=struct({"n": 1}))
    note = obsidian.note(f"memsvc/{memory_id}.md")
    assert note is not None and note.endswith("\nUser prefers dark mode") and "apiKeyId: alice" in note
    assert notion.live_pages() == []
    listed = stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id=OWNER))
    assert [m.id for m in listed.data] == [memory_id] and listed.total == 1 and listed.data[0].session_id == "s1"
    # The same key upserts the same note.
    again = stubs.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id=OWNER, content="User prefers light mode", key="pref:theme")
    )
    assert again.id == memory_id and not again.created
    assert stubs.memory.GetMemory(mpb.GetMemoryRequest(id=memory_id)).content == "User prefers light mode"


def test_get_tries_each_fallback_while_not_found(stubs, obsidian, notion):
    use(stubs, obsidian, notion, "notion", [])
    in_notion = create(stubs, "Lives in Lisbon")
    use(stubs, obsidian, notion, "obsidian", ["local", "notion"])
    got = stubs.memory.GetMemory(mpb.GetMemoryRequest(id=in_notion))
    assert got.content == "Lives in Lisbon" and got.api_key_id == OWNER
    assert obsidian.calls("GET", "/vault/memsvc/")  # the primary was asked first
    obsidian.fault = "500"  # a failing primary: the fallback still answers
    assert stubs.memory.GetMemory(mpb.GetMemoryRequest(id=in_notion)).content == "Lives in Lisbon"
    err = error(stubs.memory.GetMemory, mpb.GetMemoryRequest(id="0b3c2a5e-0000-4000-8000-000000000000"))
    assert err.code() == C.UNAVAILABLE and "obsidian" in err.details()
    obsidian.fault = None
    assert error(stubs.memory.GetMemory, mpb.GetMemoryRequest(id="no-such-memory")).code() == C.NOT_FOUND


def test_update_and_delete_are_replayed_on_the_fallbacks(stubs, obsidian, notion):
    use(stubs, obsidian, notion, "local", ["obsidian"])
    memory_id = create(stubs, "Drinks coffee")
    obsidian.put_note(f"memsvc/{memory_id}.md", note_for(memory_id, OWNER, "Drinks coffee"))
    stubs.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=memory_id, content="Drinks tea"))
    wait_for(lambda: (obsidian.note(f"memsvc/{memory_id}.md") or "").endswith("\nDrinks tea"), "the replayed update")
    stubs.memory.DeleteMemory(mpb.DeleteMemoryRequest(id=memory_id))
    wait_for(lambda: obsidian.note(f"memsvc/{memory_id}.md") is None, "the replayed delete")
    assert wait_for(lambda: statuses(stubs)["obsidian"].pending_syncs == 0 or None, "no pending replays") is True


def test_a_fallback_down_during_a_delete_receives_it_when_it_comes_back(stubs, obsidian, notion):
    use(stubs, obsidian, notion, "local", ["obsidian"])
    memory_id = create(stubs, "Plays chess on Sundays")
    obsidian.put_note(f"memsvc/{memory_id}.md", note_for(memory_id, OWNER, "Plays chess on Sundays"))
    obsidian.down()
    stubs.memory.DeleteMemory(mpb.DeleteMemoryRequest(id=memory_id))
    assert error(stubs.memory.GetMemory, mpb.GetMemoryRequest(id=memory_id)).code() == C.NOT_FOUND
    status = statuses(stubs)["obsidian"]
    assert not status.healthy and status.pending_syncs == 1 and "could not reach" in status.error
    assert obsidian.note(f"memsvc/{memory_id}.md") is not None
    obsidian.up()
    wait_for(
        lambda: obsidian.note(f"memsvc/{memory_id}.md") is None, "the delete replayed after the fallback came back"
    )
    status = statuses(stubs)["obsidian"]
    assert status.healthy and status.pending_syncs == 0


def test_retrieve_and_inject_use_the_primary_search_then_the_fallbacks(stubs, obsidian, notion):
    use(stubs, obsidian, notion, "notion", [], enabled=True)
    create(stubs, "The user likes green tea in the morning")
    use(stubs, obsidian, notion, "obsidian", ["notion"], enabled=True)
    in_vault = create(stubs, "The user likes jasmine tea")
    answer = stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="which tea does the user like"))
    assert [m.id for m in answer.memories] == [in_vault] and answer.memories[0].tier == "backend"
    assert (answer.resolution.backend, answer.resolution.strategy_used, answer.resolution.fallback_reason) == (
        "obsidian",
        "backend-search",
        "",
    )
    obsidian.fault = "500"
    answer = stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="green tea"))
    assert [m.content for m in answer.memories] == ["The user likes green tea in the morning"]
    assert answer.resolution.backend == "notion" and "'obsidian' failed" in answer.resolution.fallback_reason
    injected = stubs.engine.Inject(
        epb.InjectRequest(
            api_key_id=OWNER,
            provider="openai",
            request=struct({"model": "gpt-4o", "messages": [{"role": "user", "content": "recommend me a green tea"}]}),
        )
    )
    assert injected.injected and "green tea in the morning" in json_format.MessageToJson(injected.request)
    notion.down()
    answer = stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="green tea"))
    assert not answer.memories and "no backend answered" in answer.resolution.fallback_reason


def test_a_backend_search_never_returns_another_owners_memories(stubs, obsidian, notion):
    use(stubs, obsidian, notion, "obsidian", [], enabled=True)
    create(stubs, "Alice keeps bees", owner="alice")
    hits = stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id="bob", query="bees"))
    assert obsidian.calls("POST", "/search/simple/") and not hits.memories  # the vault search is vault-wide


def test_extracted_facts_are_stored_on_the_primary(stubs, obsidian, notion):
    use(stubs, obsidian, notion, "notion", [], enabled=True)
    out = stubs.engine.Extract(epb.ExtractRequest(api_key_id=OWNER, user_message="I prefer window seats.", wait=True))
    assert out.stored == 1
    assert [notion.text_of(p, "Content") for p in notion.live_pages()] == [out.facts[0].content]


def test_a_primary_that_times_out_leaves_retrieval_to_the_sqlite_fallback(stubs, obsidian):
    put_settings(stubs, enabled=True, primaryBackend="local", backendConfigs={"obsidian": obsidian_config(obsidian)})
    kept = create(stubs, "The user rides a red bicycle")
    put_settings(
        stubs,
        primaryBackend="obsidian",
        fallbackBackends=["local"],
        backendConfigs={"obsidian": obsidian_config(obsidian, timeoutMs=300)},
    )
    obsidian.fault = "timeout"
    answer = stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="red bicycle"))
    assert [m.id for m in answer.memories] == [kept] and answer.resolution.backend == "sqlite"
    assert "did not answer in time" in answer.resolution.fallback_reason


# ---- keep: no age limit, stored the way each store holds it ---------------------------------

PLUGGABLE = ("notion", "obsidian")


def get(stubs, memory_id: str) -> mpb.Memory:
    return stubs.memory.GetMemory(mpb.GetMemoryRequest(id=memory_id))


def stored_keep(kind: str, obsidian: FakeObsidian, notion: FakeNotion, memory_id: str) -> bool:
    """What the store itself holds: the page's Keep checkbox, or `keep: true` in the note."""
    if kind == "notion":
        page = next(p for p in notion.live_pages() if p["id"] == memory_id)
        return page["properties"]["Keep"]["checkbox"]
    return frontmatter(obsidian.note(f"memsvc/{memory_id}.md") or "").get("keep") is True


def backdate(kind: str, obsidian: FakeObsidian, notion: FakeNotion, memory_id: str, days: int) -> None:
    """Make a memory `days` old in the store, as the SQLite tests do with direct SQL."""
    when = datetime.now(UTC) - timedelta(days=days)
    if kind == "notion":
        notion.backdate(memory_id, when)
        return
    path = f"memsvc/{memory_id}.md"
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    obsidian.put_note(path, re.sub(r"(?m)^createdAt: .*$", f"createdAt: '{stamp}'", obsidian.note(path) or ""))


@pytest.mark.parametrize("kind", PLUGGABLE)
def test_keep_round_trips_through_a_pluggable_primary(stubs, obsidian, notion, kind):
    use(stubs, obsidian, notion, kind, [])
    kept = create(stubs, "The user's name is Ada", keep=True)
    plain = create(stubs, "Ada mentioned a dentist appointment")
    assert get(stubs, kept).keep and not get(stubs, plain).keep
    assert stored_keep(kind, obsidian, notion, kept) and not stored_keep(kind, obsidian, notion, plain)
    listed = stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id=OWNER)).data
    assert {m.id: m.keep for m in listed} == {kept: True, plain: False}

    answer = stubs.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=plain, keep=True))
    assert answer.memory.keep and get(stubs, plain).keep and stored_keep(kind, obsidian, notion, plain)
    stubs.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=plain, content="Ada moved her dentist appointment"))
    assert get(stubs, plain).keep, "an update that does not say keep leaves it as it was"
    answer = stubs.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=kept, keep=False))
    assert not answer.memory.keep and not get(stubs, kept).keep and not stored_keep(kind, obsidian, notion, kept)


@pytest.mark.parametrize("kind", PLUGGABLE)
def test_an_upsert_by_key_through_a_pluggable_primary_keeps_keep_unless_it_says_it(stubs, obsidian, notion, kind):
    use(stubs, obsidian, notion, kind, [])
    memory_id = create(stubs, "The user's name is Ada", key="profile:name", keep=True)
    assert create(stubs, "The user's name is Ada Lovelace", key="profile:name") == memory_id
    assert get(stubs, memory_id).keep
    create(stubs, "The user's name is Ada Lovelace", key="profile:name", keep=False)
    assert not get(stubs, memory_id).keep and not stored_keep(kind, obsidian, notion, memory_id)


@pytest.mark.parametrize("kind", PLUGGABLE)
def test_retention_hides_an_old_memory_of_a_pluggable_primary_unless_it_is_kept(stubs, obsidian, notion, kind):
    use(stubs, obsidian, notion, kind, [], enabled=True, retentionDays=30)
    kept = create(stubs, "The user's name is Ximena", keep=True)
    old = create(stubs, "Ximena mentioned a dentist appointment")
    fresh = create(stubs, "Ximena likes herons")
    for memory_id in (kept, old):
        backdate(kind, obsidian, notion, memory_id, 400)
    answer = stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="Ximena"))
    assert {m.id for m in answer.memories} == {kept, fresh} and answer.resolution.backend == kind

    stubs.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=kept, keep=False))
    backdate(kind, obsidian, notion, kept, 400)
    answer = stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="Ximena"))
    assert [m.id for m in answer.memories] == [fresh], "released, the old memory is hidden again"


@pytest.mark.parametrize("kind", PLUGGABLE)
def test_old_memories_hidden_by_retention_take_no_place_in_a_pluggable_search(stubs, obsidian, notion, kind):
    """More old unkept matches than a backend search returns, all ranked above the kept one
    by the store (Notion: the newest of equal relevance; the vault: the note whose match
    comes earliest, and a kept note's frontmatter is one line longer): the kept memory is
    still found."""
    use(stubs, obsidian, notion, kind, [], enabled=True, retentionDays=30)
    kept = create(stubs, "The user's name is Ximena", keep=True)
    old = [create(stubs, "The user's name is Ximena") for _ in range(SEARCH_LIMIT)]
    for memory_id in (kept, *old):
        backdate(kind, obsidian, notion, memory_id, 400)
    answer = stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="Ximena"))
    assert [m.id for m in answer.memories] == [kept]


# ---- occurredAt: when the recorded thing happened, stored the way each store holds it ------


def stamp(text: str) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromJsonString(text)
    return out


def stored_occurred_at(kind: str, obsidian: FakeObsidian, notion: FakeNotion, memory_id: str) -> str | None:
    """What the store itself holds: the page's Occurred date, or `occurredAt` in the note."""
    if kind == "notion":
        page = next(p for p in notion.live_pages() if p["id"] == memory_id)
        return (page["properties"]["Occurred"]["date"] or {}).get("start")
    return frontmatter(obsidian.note(f"memsvc/{memory_id}.md") or "").get("occurredAt")


@pytest.mark.parametrize("kind", PLUGGABLE)
def test_occurred_at_round_trips_through_a_pluggable_primary(stubs, obsidian, notion, kind):
    use(stubs, obsidian, notion, kind, [])
    said = create(stubs, "Ada said she adopted a cat", key="turn:1", occurred_at=stamp("2023-12-31T18:30:00Z"))
    unknown = create(stubs, "Ada mentioned a dentist appointment")
    assert get(stubs, said).occurred_at.ToJsonString() == "2023-12-31T18:30:00Z"
    assert not get(stubs, unknown).HasField("occurred_at")
    assert stored_occurred_at(kind, obsidian, notion, said) == "2023-12-31T18:30:00Z"
    assert stored_occurred_at(kind, obsidian, notion, unknown) is None
    listed = stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id=OWNER)).data
    assert {m.id: m.occurred_at.ToJsonString() for m in listed if m.HasField("occurred_at")} == {
        said: "2023-12-31T18:30:00Z"
    }

    create(stubs, "Ada said she adopted a black cat", key="turn:1")
    assert get(stubs, said).occurred_at.ToJsonString() == "2023-12-31T18:30:00Z", "an upsert without it keeps it"
    answer = stubs.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=unknown, occurred_at=stamp("2024-03-02T09:15:00Z")))
    assert answer.memory.occurred_at.ToJsonString() == "2024-03-02T09:15:00Z"
    assert stored_occurred_at(kind, obsidian, notion, unknown) == "2024-03-02T09:15:00Z"
    stubs.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=unknown, content="Ada moved her dentist appointment"))
    assert get(stubs, unknown).occurred_at.ToJsonString() == "2024-03-02T09:15:00Z", "an update without it keeps it"


def test_a_note_written_by_hand_may_say_keep_and_occurred_at_in_either_spelling(stubs, obsidian, notion):
    use(stubs, obsidian, notion, "obsidian", [])
    memory_id = "hand-written-note"
    note = note_for(memory_id, OWNER, "Ada adopted a cat").replace(
        "\n---\n", "\nkeep: true\noccurred_at: '2023-12-31T18:30:00Z'\n---\n", 1
    )
    obsidian.put_note(f"memsvc/{memory_id}.md", note)
    got = get(stubs, memory_id)
    assert got.keep and got.occurred_at.ToJsonString() == "2023-12-31T18:30:00Z"


# ---- TLS: the Obsidian plugin's own https port, with its self-signed certificate ------------


def self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=Obsidian Local REST API",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_obsidian_over_https_trusts_the_given_certificate_only(stubs, tmp_path):
    cert, key = self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with FakeObsidian(tls=context) as vault:
        config = {"baseUrl": vault.base_url, "apiKey": vault.api_key}
        put_settings(stubs, primaryBackend="obsidian", backendConfigs={"obsidian": config})
        status = statuses(stubs)["obsidian"]
        assert not status.healthy and "could not reach 127.0.0.1" in status.error  # not in the system store
        put_settings(stubs, backendConfigs={"obsidian": {**config, "caCertificate": cert.read_text()}})
        assert statuses(stubs)["obsidian"].healthy
        memory_id = create(stubs, "Works from Porto")
        assert vault.note(f"memsvc/{memory_id}.md").endswith("\nWorks from Porto")


# ---- health ----------------------------------------------------------------------------------


def test_engine_status_shows_each_backends_health(stubs, obsidian, notion):
    use(stubs, obsidian, notion, "obsidian", ["notion", "local"])
    status = statuses(stubs)
    assert [(b.name, b.type, b.role, b.healthy) for b in status.values()] == [
        ("obsidian", "obsidian", "primary", True),
        ("notion", "notion", "fallback", True),
        ("local", "sqlite", "fallback", True),
    ]
    assert all(b.latency_ms > 0 and b.checked_at.seconds > 0 for b in status.values())
    notion.fault = "timeout"
    obsidian.fault = "500"
    status = statuses(stubs)
    assert "HTTP 500" in status["obsidian"].error and not status["obsidian"].healthy
    assert "did not answer in time" in status["notion"].error and status["local"].healthy
    notion.fault = None
    notion.schema.pop("Session")
    assert "the database lacks the properties Session (rich_text)" in statuses(stubs)["notion"].error


def test_a_primary_that_is_down_makes_memory_calls_unavailable_with_the_reason(stubs, obsidian, notion):
    use(stubs, obsidian, notion, "obsidian", [])
    obsidian.down()
    err = error(stubs.memory.CreateMemory, mpb.CreateMemoryRequest(api_key_id=OWNER, content="x"))
    assert err.code() == C.UNAVAILABLE and "could not reach 127.0.0.1" in err.details()
    assert obsidian.api_key not in err.details()
    assert error(stubs.memory.ListMemories, mpb.ListMemoriesRequest(api_key_id=OWNER)).code() == C.UNAVAILABLE


def test_facts_over_time_need_the_built_in_store_as_primary(stubs, obsidian, notion):
    """History, the change feed and asOf read the built-in store's own tables: with a vault as
    primary they answer FAILED_PRECONDITION (NO_HISTORY) instead of a silently empty past, and
    a repeated create is stored (the duplicate check needs the built-in store's indexes)."""
    use(stubs, obsidian, notion, "obsidian", [], enabled=True)
    memory_id = create(stubs, "User drinks oolong tea")
    assert (
        stubs.memory.CreateMemory(
            mpb.CreateMemoryRequest(api_key_id=OWNER, content="User drinks oolong tea")
        ).merged_into
        == ""
    )
    at = timestamp_pb2.Timestamp()
    at.GetCurrentTime()
    calls = (
        lambda: stubs.memory.GetMemoryHistory(mpb.GetMemoryHistoryRequest(id=memory_id)),
        lambda: list(stubs.memory.WatchMemories(mpb.WatchMemoriesRequest(api_key_id=OWNER, stop_when_caught_up=True))),
        lambda: stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="tea", as_of=at)),
    )
    for call in calls:
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_info(err.value).reason == "NO_HISTORY"
