"""Leases over a real SQLite file: acquire, takeover only after expiry, renew and release by
the holder only, the heartbeat that keeps a held lease alive, and a reindex followed from
another process's lease row. Two Database objects on
one file stand for two processes (each has its own connections, as a process does); the
clock is a value the test moves, so expiry is decided without waiting."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memsvc.core.leases import Lease, LeaseTiming
from memsvc.core.reindex import FollowedJob, Progress, encode_progress
from memsvc.storage.database import Database
from memsvc.storage.leases import SqliteLeaseStore
from memsvc.storage.migrations import apply_migrations


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def stores(tmp_path: Path, clock: Clock):
    """Two stores on one database file, as two server processes have."""
    first = Database(tmp_path / "memsvc.db")
    apply_migrations(first)
    second = Database(tmp_path / "memsvc.db")
    yield SqliteLeaseStore(first, clock), SqliteLeaseStore(second, clock)
    first.close()
    second.close()


def test_the_first_caller_gets_the_lease_and_a_second_holder_does_not(stores):
    a, b = stores
    assert a.acquire("job", "holder-a", 10)
    assert not b.acquire("job", "holder-b", 10)
    record = b.read("job")
    assert record.holder == "holder-a" and record.live
    assert a.acquire("job", "holder-a", 10)  # the holder itself may acquire again
    assert b.acquire("other-job", "holder-b", 10)  # leases are per name


def test_no_takeover_before_expiry_and_takeover_after_it(stores, clock):
    a, b = stores
    assert a.acquire("job", "holder-a", 10)
    clock.now += 9.999
    assert not b.acquire("job", "holder-b", 10)
    assert b.read("job").holder == "holder-a"
    clock.now += 0.001  # expires_at reached
    assert not b.read("job").live
    assert b.acquire("job", "holder-b", 10)
    record = a.read("job")
    assert record.holder == "holder-b" and record.live


def test_renew_by_the_holder_extends_and_by_anyone_else_is_refused_changing_nothing(stores, clock):
    a, b = stores
    assert a.acquire("job", "holder-a", 10)
    before = a.read("job")
    assert not b.renew("job", "holder-b", 60, payload="not mine")
    after = a.read("job")
    assert (after.holder, after.expires_at, after.payload, after.seq) == (
        before.holder,
        before.expires_at,
        before.payload,
        before.seq,
    )
    clock.now += 8
    assert a.renew("job", "holder-a", 10)
    clock.now += 8  # 16 s after acquiring, 8 after the renewal: still held
    assert not b.acquire("job", "holder-b", 10)
    assert not b.renew("missing", "holder-b", 10)


def test_a_holder_that_lost_its_lease_cannot_renew_or_release_it(stores, clock):
    a, b = stores
    assert a.acquire("job", "holder-a", 10)
    clock.now += 11
    assert b.acquire("job", "holder-b", 10)
    assert not a.renew("job", "holder-a", 10, payload="late")
    assert not a.release("job", "holder-a", payload="late")
    record = b.read("job")
    assert record.holder == "holder-b" and record.live and record.payload is None


def test_publish_bumps_seq_and_release_frees_the_lease_keeping_the_last_payload(stores):
    a, b = stores
    assert a.acquire("job", "holder-a", 10)
    seq = b.read("job").seq
    assert a.renew("job", "holder-a", 10, payload="step 1")
    assert b.read("job").payload == "step 1" and b.read("job").seq == seq + 1
    assert a.release("job", "holder-a", payload="final")
    record = b.read("job")
    assert record.payload == "final" and record.seq == seq + 2 and not record.live
    assert b.acquire("job", "holder-b", 10)  # free at once, no expiry to wait for
    assert b.read("job").payload is None  # a new holder starts with nothing published


def test_a_lease_object_heartbeats_while_held_and_release_lets_another_take_it(stores, clock):
    a, b = stores
    timing = LeaseTiming(ttl_s=0.3)
    lease = Lease.try_acquire(a, "job", timing)
    assert lease is not None and Lease.try_acquire(b, "job", timing) is None
    first = a.read("job").expires_at
    clock.now += 0.2  # the heartbeat (every 0.1 s) moves expires_at with the clock
    _wait(lambda: a.read("job").expires_at > first)
    assert not lease.lost
    lease.release("done")
    other = Lease.try_acquire(b, "job", timing)
    assert other is not None and b.read("job").holder == other.holder != lease.holder
    other.release()


def test_a_lease_object_whose_row_was_taken_over_knows_it_lost(stores, clock):
    a, b = stores
    timing = LeaseTiming(ttl_s=0.3)
    lease = Lease.try_acquire(a, "job", timing)
    lease._stop.set()  # a stalled holder: no heartbeat
    lease._thread.join(5)
    clock.now += 1
    assert b.acquire("job", "holder-b", 10)
    assert not lease.publish("progress")
    assert lease.lost
    lease.release("final")  # a lost lease is not released under the new holder
    assert b.read("job").holder == "holder-b" and b.read("job").live and b.read("job").payload is None


def _wait(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


# ---- following another process's reindex from its lease row ----------------------------------


def _publish(store: SqliteLeaseStore, holder: str, **progress) -> None:
    assert store.renew("reindex", holder, 10, encode_progress("sqlite-vec", Progress(**progress)))


def _follow(store: SqliteLeaseStore):
    return FollowedJob(store, store.read("reindex"), poll_s=0.001)


def test_a_follower_sees_each_published_message_once_and_the_final_one(stores):
    a, b = stores
    assert a.acquire("reindex", "holder-a", 10)
    _publish(a, "holder-a", started=True, pending=10)
    job = _follow(b)
    assert [p.pending for p in job.wait_events(0)] == [10]
    _publish(a, "holder-a", processed=4, pending=6)
    assert [p.processed for p in job.wait_events(1)] == [4]
    assert a.release("reindex", "holder-a", encode_progress("sqlite-vec", Progress(processed=10, state="done")))
    events = job.wait_events(2)
    # The target's earlier name, as a process of an older version publishes it, is read as today's.
    assert [p.state for p in events] == ["done"] and job.finished and job.target == "local"


def test_a_follower_of_a_holder_that_died_ends_failed_once_its_lease_expires(stores, clock):
    a, b = stores
    assert a.acquire("reindex", "holder-a", 10)
    _publish(a, "holder-a", processed=3, pending=7)
    job = _follow(b)
    assert job.wait_events(0, timeout_s=0.05)[-1].state == "running"
    assert job.wait_events(1, timeout_s=0.05) == []  # alive, silent: nothing new
    clock.now += 10
    last = job.wait_events(1)[-1]
    assert last.state == "failed" and "stopped" in last.error and last.processed == 3


def test_a_follower_that_missed_the_end_says_so_when_a_new_job_holds_the_row(stores, clock):
    a, b = stores
    assert a.acquire("reindex", "holder-a", 10)
    _publish(a, "holder-a", processed=1)
    job = _follow(b)
    assert a.release("reindex", "holder-a")
    assert b.acquire("reindex", "holder-b", 10)
    last = job.wait_events(1)[-1]
    assert last.state == "failed" and "new one" in last.error


# ---- the TTL option ----------------------------------------------------------------------------


def test_the_lease_ttl_comes_from_the_environment_and_out_of_range_values_do_not_start():
    from memsvc.config import Config, ConfigError, load

    assert load(env={"MEMSVC_LEASE_TTL_S": "2.5"}).lease_ttl_s == 2.5
    assert load(env={}).lease_ttl_s == 15.0
    for bad in (0.0, 0.29, 3601.0):
        with pytest.raises(ConfigError, match=r"MEMSVC_LEASE_TTL_S must be 0\.3\.\.3600"):
            Config(lease_ttl_s=bad).validate()
    with pytest.raises(ConfigError, match="MEMSVC_LEASE_TTL_S"):
        load(env={"MEMSVC_LEASE_TTL_S": "soon"})
