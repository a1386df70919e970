"""Retries, deadlines and the one-reindex rule through real servers.

- Idempotent calls are retried on UNAVAILABLE and writes are not: counted at a relay in front
  of the real server that refuses a given number of attempts (no timing involved), and seen
  end to end across a real server restart on the same port.
- A call slower than its deadline (the client's default, or the call's own) raises
  DeadlineExceeded: the loopback model server (tests/support/model_server.py) holds the
  server's embedding call.
- A second reindex is refused as Aborted REINDEX_RUNNING; `attach` follows the running one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import ServerHandle, free_port, make_config, start_server
from memsvc_client import Aborted, DeadlineExceeded, Memsvc, RetryPolicy, Unavailable

from tests.sdk.servers import QUICK_RETRY, FlakyRelay, LateServer, address
from tests.support.provider_schemas import chat_body
from tests.support.vectors import models, remote_settings, wait_for  # noqa: F401 - fixture

# Reconnect soon after a refused connection (gRPC's default waits about a second), and retry
# no sooner than gRPC's jitter allows: the first retry lands up to 1 s after the failure, by
# when the restarted server is listening and the channel has reconnected.
FAST_RECONNECT = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 200),
]
PATIENT = RetryPolicy(max_attempts=5, initial_backoff=1.0, max_backoff=4.0)

GET = "/memsvc.v1.MemoryService/GetMemory"
CREATE = "/memsvc.v1.MemoryService/CreateMemory"


@pytest.fixture
def relay(server: ServerHandle) -> Iterator[FlakyRelay]:
    front = FlakyRelay(address(server))
    yield front
    front.stop()


@pytest.fixture
def through_relay(relay: FlakyRelay, owner: str) -> Iterator[Memsvc]:
    with Memsvc(relay.address, api_key_id=owner, retry=QUICK_RETRY, timeout=30) as client:
        client.settings.update(enabled=True)
        yield client


# ---- retries, counted ----------------------------------------------------------------------------


def test_an_idempotent_call_is_retried_until_it_gets_through(relay: FlakyRelay, through_relay: Memsvc) -> None:
    added = through_relay.memories.add("retried read")
    relay.fail_next(2)
    assert through_relay.memories.get(added.id).content == "retried read"
    assert relay.attempts[GET] == 3  # two refused, the third reached the server


@pytest.mark.parametrize(
    "method,call",
    [
        ("MemoryService/ListMemories", lambda c: c.memories.page()),
        ("MemoryService/ListMemories", lambda c: list(c.memories.list())),
        ("EngineService/Retrieve", lambda c: c.retrieve("retried")),
        ("EngineService/Inject", lambda c: c.inject(chat_body("retried"), provider="openai")),
        ("SettingsService/GetMemorySettings", lambda c: c.settings.get()),
    ],
    ids=["page", "list", "retrieve", "inject", "settings.get"],
)
def test_every_read_is_retried(
    relay: FlakyRelay, through_relay: Memsvc, method: str, call: Callable[[Memsvc], Any]
) -> None:
    relay.fail_next(1)
    call(through_relay)
    assert relay.attempts[f"/memsvc.v1.{method}"] == 2


@pytest.mark.parametrize(
    "method,call",
    [
        ("MemoryService/CreateMemory", lambda c, i: c.memories.add("sent once")),
        ("MemoryService/CreateMemories", lambda c, i: c.memories.add_many(["sent once"])),
        ("MemoryService/UpdateMemory", lambda c, i: c.memories.update(i, content="sent once")),
        ("MemoryService/DeleteMemory", lambda c, i: c.memories.delete(i)),
        ("MemoryService/ClearMemories", lambda c, i: c.memories.clear()),
        ("EngineService/Extract", lambda c, i: c.extract("I prefer tea.", wait=True)),
        ("SettingsService/UpdateMemorySettings", lambda c, i: c.settings.update(max_tokens=100)),
    ],
    ids=["add", "add_many", "update", "delete", "clear", "extract", "settings.update"],
)
def test_a_write_is_sent_once_and_its_unavailable_is_raised(
    relay: FlakyRelay, through_relay: Memsvc, method: str, call: Callable[[Memsvc, str], Any]
) -> None:
    existing = through_relay.memories.add("already there")
    relay.fail_next(1)
    with pytest.raises(Unavailable) as info:
        call(through_relay, existing.id)
    assert relay.attempts[f"/memsvc.v1.{method}"] == 1
    assert info.value.message == FlakyRelay.MESSAGE and info.value.reason is None and info.value.status is None
    assert [m.content for m in through_relay.memories.list()] == ["already there"]  # nothing changed
    assert through_relay.settings.get().max_tokens == 2000


def test_retries_stop_after_max_attempts(relay: FlakyRelay, through_relay: Memsvc) -> None:
    added = through_relay.memories.add("never reached")
    relay.fail_next(100)
    with pytest.raises(Unavailable):
        through_relay.memories.get(added.id)
    assert relay.attempts[GET] == QUICK_RETRY.max_attempts


def test_retry_none_sends_every_call_once(relay: FlakyRelay, owner: str) -> None:
    with Memsvc(relay.address, api_key_id=owner, retry=None) as client:
        relay.fail_next(1)
        with pytest.raises(Unavailable):
            client.settings.get()
        assert relay.attempts["/memsvc.v1.SettingsService/GetMemorySettings"] == 1


def test_the_caller_s_channel_options_win_over_the_sdk_s(relay: FlakyRelay, owner: str) -> None:
    with Memsvc(relay.address, api_key_id=owner, retry=QUICK_RETRY, options=[("grpc.enable_retries", 0)]) as client:
        relay.fail_next(1)
        with pytest.raises(Unavailable):
            client.settings.get()
        assert relay.attempts["/memsvc.v1.SettingsService/GetMemorySettings"] == 1


# ---- retries across a real restart -------------------------------------------------------------


class StateWatch:
    """`reached` is set once the channel reports `wanted` (its state when the watch begins
    counts). It never asks the channel to connect: a watch that does (as
    grpc.channel_ready_future) can leave gRPC's polling thread touching the channel after it
    was closed."""

    def __init__(self, channel: grpc.Channel, wanted: grpc.ChannelConnectivity) -> None:
        self.reached = threading.Event()
        self._channel, self._wanted = channel, wanted
        channel.subscribe(self._seen, try_to_connect=False)

    def _seen(self, state: grpc.ChannelConnectivity) -> None:
        if state is self._wanted:
            self.reached.set()

    def close(self) -> None:
        self._channel.unsubscribe(self._seen)


@pytest.mark.parametrize("retry", [PATIENT, None], ids=["retried", "not-retried"])
def test_a_read_made_while_the_server_restarts_gets_its_answer(tmp_path: Path, retry: RetryPolicy | None) -> None:
    """The first attempt finds nobody listening (the channel reports TRANSIENT_FAILURE), then
    the server comes up on the same port over the same data: a retried read gets its answer;
    with retries off the same read fails as Unavailable."""
    config = make_config(tmp_path, grpc_port=free_port())
    first = start_server(config)
    client = Memsvc(f"127.0.0.1:{config.grpc_port}", api_key_id="sdk-restart", retry=retry, options=FAST_RECONNECT)
    watches: list[StateWatch] = []
    restarted: ServerHandle | None = None
    try:
        client.settings.update(enabled=True)
        added = client.memories.add("survives the restart")
        watches.append(idle := StateWatch(client.channel, grpc.ChannelConnectivity.IDLE))
        first.stop()
        assert idle.reached.wait(30), "the channel never noticed the server going away"
        late = LateServer(config)  # the data is open again; the port is not bound yet
        watches.append(refused := StateWatch(client.channel, grpc.ChannelConnectivity.TRANSIENT_FAILURE))
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(client.memories.get, added.id)
            assert refused.reached.wait(30), "the first attempt did not fail"
            restarted = late.start()
            if retry is None:
                with pytest.raises(Unavailable):
                    answer.result(60)
            else:
                assert answer.result(60).content == "survives the restart"
        watches.append(ready := StateWatch(client.channel, grpc.ChannelConnectivity.READY))
        assert ready.reached.wait(30)  # either way, it answers once reconnected
        assert client.memories.get(added.id).content == "survives the restart"
    finally:
        for watch in watches:
            watch.close()
        client.close()
        if restarted is not None:
            restarted.stop()


# ---- deadlines ---------------------------------------------------------------------------------


def stored_contents(client: Memsvc) -> set[str]:
    return {m.content for m in client.memories.list(timeout=30)}


def test_the_default_deadline_ends_a_call_the_server_holds(server: ServerHandle, models: Any, owner: str) -> None:
    with Memsvc(address(server), api_key_id=owner, timeout=0.5) as client:
        client.settings.update(remote_settings(models))
        models.mode, models.delay_s = "slow", 60.0  # the embedder holds each call until reset
        with pytest.raises(DeadlineExceeded) as info:
            client.memories.add("held by the embedder")
        assert info.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
        wait_for(lambda: models.embed_calls == 1, what="the write inside its embedding call")
        # The server only stopped waiting on the client's side: the write lands once embedded.
        models.reset()
        wait_for(lambda: stored_contents(client) == {"held by the embedder"}, what="the held write stored")


def test_a_call_s_own_timeout_wins_over_the_default(server: ServerHandle, models: Any, owner: str) -> None:
    with Memsvc(address(server), api_key_id=owner, timeout=60.0) as patient:
        patient.settings.update(remote_settings(models))
        models.mode, models.delay_s = "slow", 60.0
        with pytest.raises(DeadlineExceeded):
            patient.memories.add("held", timeout=0.5)
        models.reset()
        wait_for(lambda: stored_contents(patient) == {"held"}, what="the held write stored")
    with Memsvc(address(server), api_key_id=owner, timeout=0.5) as hasty:
        models.mode, models.delay_s = "slow", 1.5  # slower than the default deadline
        added = hasty.memories.add("waited for", timeout=60.0)
        assert hasty.memories.get(added.id).content == "waited for"


def test_a_second_reindex_is_aborted_and_attach_follows_the_running_one(
    server: ServerHandle, models: Any, owner: str
) -> None:
    with Memsvc(address(server), api_key_id=owner) as client:
        client.settings.update(enabled=True)
        client.memories.add_many([f"fact {i} to embed" for i in range(5)])  # no source yet: pending
        client.settings.update(remote_settings(models))
        models.mode, models.delay_s = "slow", 60.0

        running = client.reindex()
        opening = next(running)
        assert opening.started and opening.pending == 5
        wait_for(lambda: models.embed_calls == 1, what="the job's first embedding call")

        with pytest.raises(Aborted) as info:
            list(client.reindex())
        assert info.value.reason == "REINDEX_RUNNING" and info.value.message
        with pytest.raises(DeadlineExceeded):  # a deadline on the stream: it stops listening
            list(client.reindex(attach=True, timeout=0.5))

        attached = client.reindex(attach=True)
        assert next(attached).pending == 5  # the running job's own progress
        models.reset()  # the embedder answers: the job finishes
        assert running.wait().state == attached.wait().state == "done"
        assert running.last is not None and running.last.processed == 5
