"""The review and Powerful Memory switches (core_config.json) and the reflection lifecycle
they control: review → pending → confirmed → promoted (by evidence or by age), denial by
contradiction, and the ON → OFF migration."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from character_helpers import character_server, error, items, violated_fields
from conftest import ServerHandle, make_config, start_server
from google.protobuf import struct_pb2

from memsvc.v1 import memory_pb2 as pb
from memsvc.v1 import settings_pb2 as spb

C = grpc.StatusCode
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def handle(tmp_path: Path) -> Iterator[ServerHandle]:
    with character_server(tmp_path, project=False) as h:
        yield h


@pytest.fixture
def stubs(handle: ServerHandle):
    return handle.stubs()


def core_config(handle: ServerHandle) -> Path:
    return handle.config.config_dir / "core_config.json"


def value(**kind) -> struct_pb2.Value:
    return struct_pb2.Value(**kind)


def set_powerful(stubs, enabled: bool) -> spb.SetToggleResponse:
    return stubs.settings.SetPowerfulMemoryConfig(spb.SetToggleRequest(enabled=value(bool_value=enabled)))


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock(handle: ServerHandle) -> Clock:
    c = Clock(T0)
    handle.app.characters.clock = c
    return c


def say(handle: ServerHandle, stubs, character: str, *texts: str) -> None:
    """Human messages through the real path: append, flush, wait for the review."""
    for text in texts:
        stubs.memory.AppendRecentMessages(
            pb.AppendRecentMessagesRequest(character=character, messages=items(("human", text)))
        )
        handle.app.characters.flush_now()
        deadline = time.monotonic() + 10
        while handle.app.characters.reviews.busy(character):
            assert time.monotonic() < deadline
            time.sleep(0.01)


def reflections(handle: ServerHandle, character: str) -> dict[str, object]:
    return {(r.fact_key, r.polarity): r for r in handle.app.characters.reflections.store.of_character(character)}


def memories_of(stubs, character: str) -> list[pb.Memory]:
    return list(stubs.memory.ListMemories(pb.ListMemoriesRequest(api_key_id=f"character:{character}")).data)


# ---- switches --------------------------------------------------------------------------------


def test_switches_default_to_true(stubs, handle):
    assert stubs.settings.GetReviewConfig(spb.GetToggleRequest()).enabled is True
    assert stubs.settings.GetPowerfulMemoryConfig(spb.GetToggleRequest()).enabled is True
    assert not core_config(handle).exists()


def test_set_writes_the_key_and_keeps_the_others(stubs, handle):
    core_config(handle).parent.mkdir(parents=True)
    core_config(handle).write_text(
        json.dumps({"api_key": "x", "nested": {"a": [1, "二"]}, "powerful_memory_enabled": True}), encoding="utf-8"
    )
    response = stubs.settings.SetReviewConfig(spb.SetToggleRequest(enabled=value(bool_value=False)))
    assert response.success is True and response.enabled is False
    assert stubs.settings.GetReviewConfig(spb.GetToggleRequest()).enabled is False
    assert json.loads(core_config(handle).read_text(encoding="utf-8")) == {
        "api_key": "x",
        "nested": {"a": [1, "二"]},
        "powerful_memory_enabled": True,
        "recent_memory_auto_review": False,
    }
    set_powerful(stubs, False)
    assert stubs.settings.GetPowerfulMemoryConfig(spb.GetToggleRequest()).enabled is False
    assert json.loads(core_config(handle).read_text(encoding="utf-8"))["api_key"] == "x"


@pytest.mark.parametrize(
    "bad",
    [
        dict(string_value="yes"),
        dict(string_value="true"),
        dict(number_value=1),
        dict(number_value=0),
        dict(null_value=0),
        None,
        dict(list_value=struct_pb2.ListValue()),
    ],
)
def test_enabled_must_be_a_json_boolean(stubs, handle, bad):
    core_config(handle).parent.mkdir(parents=True)
    core_config(handle).write_bytes(b'{"recent_memory_auto_review": true, "other": 1}')
    for call in (stubs.settings.SetReviewConfig, stubs.settings.SetPowerfulMemoryConfig):
        request = spb.SetToggleRequest() if bad is None else spb.SetToggleRequest(enabled=value(**bad))
        err = error(call, request)
        assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"enabled"}
        assert core_config(handle).read_bytes() == b'{"recent_memory_auto_review": true, "other": 1}'


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"recent_memory_auto_review": "yes"}', b"\xff\xfe"])
def test_an_unparseable_config_is_503(stubs, handle, content):
    core_config(handle).parent.mkdir(parents=True)
    core_config(handle).write_bytes(content)
    err = error(stubs.settings.GetReviewConfig, spb.GetToggleRequest())
    assert err.code() == C.UNAVAILABLE
    if content != b'{"recent_memory_auto_review": "yes"}':
        err = error(stubs.settings.SetPowerfulMemoryConfig, spb.SetToggleRequest(enabled=value(bool_value=True)))
        assert err.code() == C.UNAVAILABLE
    assert core_config(handle).read_bytes() == content


def test_concurrent_sets_are_serialized(stubs, handle):
    def flip(i: int) -> None:
        if i % 2:
            stubs.settings.SetReviewConfig(spb.SetToggleRequest(enabled=value(bool_value=bool(i % 4 == 1))))
        else:
            set_powerful(stubs, True)

    threads = [threading.Thread(target=flip, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    data = json.loads(core_config(handle).read_text(encoding="utf-8"))
    assert set(data) == {"recent_memory_auto_review", "powerful_memory_enabled"}
    assert not [p for p in core_config(handle).parent.iterdir() if p.name.startswith(".tmp")]


def test_set_in_maintenance_is_409(tmp_path):
    h = start_server(make_config(tmp_path, storage_mode="maintenance"))
    try:
        err = error(h.stubs().settings.SetReviewConfig, spb.SetToggleRequest(enabled=value(bool_value=False)))
        assert err.code() == C.ABORTED
        assert h.stubs().settings.GetReviewConfig(spb.GetToggleRequest()).enabled is True
    finally:
        h.stop()


# ---- reflections -----------------------------------------------------------------------------


def test_pending_then_confirmed_then_promoted_by_evidence(handle, stubs, clock):
    say(handle, stubs, "Mia", "I love green tea")
    r = reflections(handle, "Mia")[("preference:green_tea", 1)]
    assert (r.status, r.seen_count, r.confirmed_at) == ("pending", 1, None)
    clock.now = T0 + timedelta(hours=1)
    say(handle, stubs, "Mia", "Honestly, I love green tea!")
    r = reflections(handle, "Mia")[("preference:green_tea", 1)]
    assert (r.status, r.seen_count, r.confirmed_at) == ("confirmed", 2, T0 + timedelta(hours=1))
    assert memories_of(stubs, "Mia") == []
    say(handle, stubs, "Mia", "I love green tea, as always")
    r = reflections(handle, "Mia")[("preference:green_tea", 1)]
    assert r.status == "promoted" and r.memory_id
    [memory] = memories_of(stubs, "Mia")
    assert (memory.id, memory.key, memory.content, memory.type) == (
        r.memory_id,
        "preference:green_tea",
        "User loves green tea",
        "factual",
    )
    assert memory.metadata["source"] == "reflection" and memory.metadata["polarity"] == "positive"


def test_the_memory_type_comes_from_the_fact(handle, stubs, clock):
    say(handle, stubs, "Mia", "I will use PostgreSQL", "I will use PostgreSQL", "I will use PostgreSQL")
    [memory] = memories_of(stubs, "Mia")
    assert memory.type == "episodic" and memory.key == "decision:postgresql"


def test_ai_messages_are_not_reviewed(handle, stubs):
    stubs.memory.AppendRecentMessages(
        pb.AppendRecentMessagesRequest(character="Mia", messages=items(("ai", "I love green tea")))
    )
    handle.app.characters.flush_now()
    time.sleep(0.2)
    assert reflections(handle, "Mia") == {}


def test_review_off_records_nothing(handle, stubs):
    stubs.settings.SetReviewConfig(spb.SetToggleRequest(enabled=value(bool_value=False)))
    say(handle, stubs, "Mia", "I love green tea")
    assert reflections(handle, "Mia") == {}


def test_without_powerful_memory_evidence_does_not_promote_but_age_does(handle, stubs, clock):
    set_powerful(stubs, False)
    say(handle, stubs, "Mia", "I love green tea", "I love green tea", "I love green tea", "I love green tea")
    r = reflections(handle, "Mia")[("preference:green_tea", 1)]
    assert r.status == "confirmed" and r.seen_count == 4
    clock.now = T0 + timedelta(days=13, hours=23)
    assert handle.app.characters.sweep_now() == 0
    clock.now = T0 + timedelta(days=14)
    assert handle.app.characters.sweep_now() == 1
    assert reflections(handle, "Mia")[("preference:green_tea", 1)].status == "promoted"
    assert [m.key for m in memories_of(stubs, "Mia")] == ["preference:green_tea"]


def test_age_promotion_also_runs_when_a_review_runs(handle, stubs, clock):
    set_powerful(stubs, False)
    say(handle, stubs, "Mia", "I love green tea", "I love green tea")
    clock.now = T0 + timedelta(days=15)
    say(handle, stubs, "Mia", "nothing to learn here")
    assert reflections(handle, "Mia")[("preference:green_tea", 1)].status == "promoted"


def test_a_contradiction_denies_the_older_reflection(handle, stubs, clock):
    say(handle, stubs, "Mia", "I love cilantro")
    clock.now = T0 + timedelta(minutes=5)
    say(handle, stubs, "Mia", "Actually I hate cilantro")
    found = reflections(handle, "Mia")
    assert found[("preference:cilantro", 1)].status == "denied"
    assert found[("preference:cilantro", 1)].denied_at == T0 + timedelta(minutes=5)
    newer = found[("preference:cilantro", -1)]
    assert newer.status == "pending" and newer.evidence == "Actually I hate cilantro"
    # Promoted, the negative fact is stored as what was said, not as "cilantro".
    say(handle, stubs, "Mia", "I hate cilantro", "I really hate cilantro")
    [memory] = memories_of(stubs, "Mia")
    assert memory.content == "Actually I hate cilantro" and memory.metadata["polarity"] == "negative"


@pytest.mark.parametrize(
    "first, second",
    [
        ("私は緑茶が好き", "私は緑茶が嫌い"),
        ("我喜欢香菜", "我不喜欢香菜"),
        ("Я люблю чай", "Я не люблю чай"),
        ("I like tabs", "I don't like tabs"),
    ],
)
def test_contradictions_in_other_languages(handle, stubs, first, second):
    say(handle, stubs, "Mia", first, second)
    statuses = sorted((r.polarity, r.status) for r in reflections(handle, "Mia").values())
    assert statuses == [(-1, "pending"), (1, "denied")]


def test_without_powerful_memory_a_contradiction_denies_nothing(handle, stubs):
    set_powerful(stubs, False)
    say(handle, stubs, "Mia", "I love cilantro", "I hate cilantro")
    assert sorted(r.status for r in reflections(handle, "Mia").values()) == ["pending", "pending"]


def test_powerful_off_resets_confirmed_at_and_nothing_is_promoted_at_once(handle, stubs, clock):
    set_powerful(stubs, False)
    say(handle, stubs, "Mia", "I love green tea", "I love green tea")
    say(handle, stubs, "Kai", "I prefer vim", "I prefer vim")
    set_powerful(stubs, True)
    clock.now = T0 + timedelta(days=30)  # both confirmed 30 days ago: due by age
    response = set_powerful(stubs, False)
    assert response.success and response.enabled is False
    for name in ("Mia", "Kai"):
        [r] = reflections(handle, name).values()
        assert r.status == "confirmed" and r.confirmed_at == T0 + timedelta(days=30)
    assert handle.app.characters.sweep_now() == 0
    say(handle, stubs, "Mia", "nothing new")
    assert memories_of(stubs, "Mia") == [] and memories_of(stubs, "Kai") == []
    clock.now = T0 + timedelta(days=44)
    assert handle.app.characters.sweep_now() == 2


def test_off_to_off_and_on_to_on_migrate_nothing(handle, stubs, clock):
    say(handle, stubs, "Mia", "I love green tea", "I love green tea")
    set_powerful(stubs, True)
    clock.now = T0 + timedelta(days=3)
    set_powerful(stubs, True)
    assert reflections(handle, "Mia")[("preference:green_tea", 1)].confirmed_at == T0


def test_a_failing_reset_leaves_the_setting_on(handle, stubs, clock):
    core_config(handle).parent.mkdir(parents=True)
    core_config(handle).write_bytes(b'{"powerful_memory_enabled": true, "x": 1}')
    say(handle, stubs, "Mia", "I love green tea", "I love green tea")

    def fail(step: str) -> None:
        if step == "powerful_memory.reset":
            raise OSError("database is locked")

    handle.app.characters.step_hook = fail
    clock.now = T0 + timedelta(days=3)
    err = error(stubs.settings.SetPowerfulMemoryConfig, spb.SetToggleRequest(enabled=value(bool_value=False)))
    handle.app.characters.step_hook = None
    assert err.code() == C.INTERNAL and "migration failed" in err.details() and "not saved" in err.details()
    assert core_config(handle).read_bytes() == b'{"powerful_memory_enabled": true, "x": 1}'
    assert stubs.settings.GetPowerfulMemoryConfig(spb.GetToggleRequest()).enabled is True
    assert reflections(handle, "Mia")[("preference:green_tea", 1)].confirmed_at == T0
