"""One contract for the settings, lease and credential stores, run against SQLite and against
a real PostgreSQL: what the core relies on must hold on both. Each test gets two handles on
one store (`other` opens a second database object on the same file or database, as a second
memsvc process has), so what one writes is checked through the other."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from memsvc.core.credentials import ADMIN, READ, WRITE, Credential, secret_digest, secret_matches
from memsvc.kernel.errors import ConflictError
from memsvc.storage.credentials import SqliteCredentialStore
from memsvc.storage.database import Database
from memsvc.storage.leases import SqliteLeaseStore
from memsvc.storage.settings_store import SqliteSettingsStore


@dataclass
class Stores:
    """The three stores of one database handle."""

    settings: Any
    leases: Any
    credentials: Any


def _sqlite_stores(db: Database) -> Stores:
    return Stores(SqliteSettingsStore(db), SqliteLeaseStore(db), SqliteCredentialStore(db))


def _pg_stores(db) -> Stores:
    from memsvc.storage.postgres.credentials import PgCredentialStore
    from memsvc.storage.postgres.leases import PgLeaseStore
    from memsvc.storage.postgres.settings_store import PgSettingsStore

    return Stores(PgSettingsStore(db), PgLeaseStore(db), PgCredentialStore(db))


def _reopen_sqlite(db: Database) -> Database:
    return Database(db.path)


def _reopen_pg(db):
    return type(db)(db.url)


#: kind -> (fixture of the migrated database, stores of a handle, a second handle on it)
KINDS: dict[str, tuple[str, Callable[[Any], Stores], Callable[[Any], Any]]] = {
    "sqlite": ("sqlite_database", _sqlite_stores, _reopen_sqlite),
    "postgres": ("pg_database", _pg_stores, _reopen_pg),
}


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def opened(kind: str, request: pytest.FixtureRequest):
    """`opened()`: the stores of a new handle on the test's database (closed afterwards);
    the first call's handle is the fixture's database itself."""
    fixture, stores_of, reopen = KINDS[kind]
    first = request.getfixturevalue(fixture)
    handles: list[Any] = []

    def open_stores() -> Stores:
        db = first if not handles else reopen(first)
        handles.append(db)
        return stores_of(db)

    yield open_stores
    for db in handles[1:]:
        db.close()


@pytest.fixture
def this(opened) -> Stores:
    return opened()


@pytest.fixture
def other(this: Stores, opened) -> Stores:
    return opened()


# ---- settings --------------------------------------------------------------------------


def test_settings_of_an_untouched_namespace_are_empty_at_version_zero(this):
    assert this.settings.read_settings("memory") == {}
    assert this.settings.settings_version() == 0


def test_settings_round_trip_as_written_through_another_handle(this, other):
    values = {
        "maxTokens": 1200,
        "enabled": True,
        "strategy": "hybrid",
        "customBaseUrl": None,
        "ratio": 0.25,
        "fallbackBackends": ["mem0", "zep"],
        "name": "Zoë 深色",
        "backendConfigs": {"zep": {"url": "http://z", "apiKey": "k"}, "mem0": {"b": 1, "a": 2}},
    }
    this.settings.write_settings("memory", values)
    read = other.settings.read_settings("memory")
    assert read == values
    assert list(read["backendConfigs"]) == ["zep", "mem0"]  # objects keep their key order
    assert list(read["backendConfigs"]["mem0"]) == ["b", "a"]


def test_settings_are_per_namespace_and_a_write_replaces_only_its_keys(this, other):
    this.settings.write_settings("memory", {"maxTokens": 1, "scope": "session"})
    this.settings.write_settings("memoryx", {"maxTokens": 2})
    this.settings.write_settings("qdrant", {"url": "http://q"})
    this.settings.write_settings("memory", {"maxTokens": 3})
    assert other.settings.read_settings("memory") == {"maxTokens": 3, "scope": "session"}
    assert other.settings.read_settings("memoryx") == {"maxTokens": 2}
    assert other.settings.read_settings("qdrant") == {"url": "http://q"}


def test_every_settings_write_bumps_the_version_once_seen_by_another_handle(this, other):
    this.settings.write_settings("memory", {"a": 1, "b": 2, "c": 3})
    assert other.settings.settings_version() == 1
    other.settings.write_settings("qdrant", {"url": "x"})
    this.settings.write_settings("memory", {"a": 4})
    assert this.settings.settings_version() == other.settings.settings_version() == 3


# ---- leases ----------------------------------------------------------------------------


def test_the_first_caller_gets_the_lease_and_a_second_holder_does_not(this, other):
    assert this.leases.read("job") is None
    assert this.leases.acquire("job", "holder-a", 3600)
    assert not other.leases.acquire("job", "holder-b", 3600)
    record = other.leases.read("job")
    assert (record.name, record.holder, record.payload, record.live) == ("job", "holder-a", None, True)
    assert this.leases.acquire("job", "holder-a", 3600)  # the holder itself may acquire again
    assert other.leases.acquire("other-job", "holder-b", 3600)  # leases are per name


def test_renew_and_release_only_by_the_holder_the_others_change_nothing(this, other):
    assert this.leases.acquire("job", "holder-a", 3600)
    before = other.leases.read("job")
    assert not other.leases.renew("job", "holder-b", 7200, payload="not mine")
    assert not other.leases.release("job", "holder-b", payload="not mine")
    after = other.leases.read("job")
    assert (after.holder, after.expires_at, after.payload, after.seq, after.live) == (
        before.holder,
        before.expires_at,
        before.payload,
        before.seq,
        True,
    )
    assert not other.leases.renew("missing", "holder-b", 10)
    assert this.leases.renew("job", "holder-a", 7200)
    assert other.leases.read("job").expires_at > before.expires_at
    assert this.leases.release("job", "holder-a")
    assert not other.leases.read("job").live
    assert other.leases.acquire("job", "holder-b", 3600)  # released: free for anyone


def test_an_expired_lease_is_taken_over_by_another_holder(this, other):
    assert this.leases.acquire("job", "holder-a", 0)  # expires at once
    assert not other.leases.read("job").live
    assert other.leases.acquire("job", "holder-b", 3600)
    record = this.leases.read("job")
    assert (record.holder, record.live) == ("holder-b", True)
    assert not this.leases.renew("job", "holder-a", 3600)  # the old holder lost it


def test_payloads_round_trip_and_each_publish_bumps_seq(this, other):
    assert this.leases.acquire("job", "holder-a", 3600)
    start = other.leases.read("job").seq
    assert this.leases.renew("job", "holder-a", 3600, payload='{"done": 1, "note": "ünï"}')
    record = other.leases.read("job")
    assert (record.payload, record.seq) == ('{"done": 1, "note": "ünï"}', start + 1)
    assert this.leases.renew("job", "holder-a", 3600)  # a heartbeat keeps the payload
    assert other.leases.read("job").payload == '{"done": 1, "note": "ünï"}'
    assert this.leases.release("job", "holder-a", payload='{"done": 2}')
    record = other.leases.read("job")
    assert (record.payload, record.seq, record.live) == ('{"done": 2}', start + 2, False)
    assert other.leases.acquire("job", "holder-b", 3600)  # a new holder starts without one
    record = this.leases.read("job")
    assert (record.payload, record.seq) == (None, start + 3)


def test_two_threads_racing_for_a_lease_one_wins(this, other):
    """Each round the two handles acquire a new name at the same instant (a barrier): the
    check and the take must be one step, or both would win (or one would fail)."""
    for round_ in range(10):
        name = f"race-{round_}"
        barrier = threading.Barrier(2)
        won: dict[str, bool] = {}
        errors: list[BaseException] = []

        def race(stores: Stores, holder: str) -> None:
            try:
                barrier.wait()
                won[holder] = stores.leases.acquire(name, holder, 3600)
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=race, args=(s, h)) for s, h in ((this, "a"), (other, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert sorted(won.values()) == [False, True], won
        winner = next(h for h, ok in won.items() if ok)
        assert this.leases.read(name).holder == winner


# ---- credentials -----------------------------------------------------------------------


def _credential(
    credential_id: str,
    tenants: frozenset[str] | None = frozenset({"key-a", "key-b"}),
    permissions: frozenset[str] = frozenset({READ, WRITE}),
    characters: bool = False,
) -> Credential:
    return Credential(credential_id, permissions, tenants, characters)


def _is_recent_utc(moment: datetime | None) -> bool:
    return (
        moment is not None
        and moment.utcoffset() == UTC.utcoffset(None)
        and abs((datetime.now(UTC) - moment).total_seconds()) < 3600
    )


def _found(store: Any, lookup: str, secret: str) -> Credential | None:
    """What the API accepts for a token of this lookup and secret, from the row the store
    hands out (the secret's digest is compared by the core, in constant time)."""
    row = store.by_lookup(lookup)
    matched = row is not None and secret_matches(secret, row.digest)
    return row.credential if matched and row.credential.revoked_at is None else None


def test_an_inserted_credential_is_found_by_its_lookup_and_secret_only(this, other):
    stored = this.credentials.insert(_credential("agent-1"), "0123456789ab", "s3cret")
    assert (stored.id, stored.permissions, stored.tenants, stored.characters, stored.revoked_at) == (
        "agent-1",
        frozenset({READ, WRITE}),
        frozenset({"key-a", "key-b"}),
        False,
        None,
    )
    assert _is_recent_utc(stored.created_at)
    row = other.credentials.by_lookup("0123456789ab")
    assert row.credential == stored and row.digest == secret_digest("s3cret")  # never the secret itself
    assert _found(other.credentials, "0123456789ab", "s3cret") == stored
    assert _found(other.credentials, "0123456789ab", "wrong") is None
    assert other.credentials.by_lookup("ba9876543210") is None


def test_every_tenant_and_character_access_round_trip(this, other):
    admin = this.credentials.insert(_credential("ops", None, frozenset({ADMIN}), True), "aaaaaaaaaaaa", "x")
    assert (admin.tenants, admin.permissions, admin.characters) == (None, frozenset({ADMIN}), True)
    assert _found(other.credentials, "aaaaaaaaaaaa", "x") == admin


def test_an_id_taken_is_a_conflict_and_stores_nothing(this, other):
    first = this.credentials.insert(_credential("agent-1"), "0123456789ab", "one")
    with pytest.raises(ConflictError) as caught:
        other.credentials.insert(_credential("agent-1", frozenset({"key-z"})), "ffffffffffff", "two")
    assert caught.value.reason == "CREDENTIAL_EXISTS"
    assert other.credentials.all() == [first]
    assert other.credentials.by_lookup("ffffffffffff") is None


def test_all_lists_every_credential_in_id_order_revoked_ones_too(this, other):
    for credential_id, lookup in (
        ("b-agent", "bbbbbbbbbbbb"),
        ("B-agent", "cccccccccccc"),
        ("a-agent", "dddddddddddd"),
    ):
        this.credentials.insert(_credential(credential_id), lookup, "s")
    this.credentials.revoke("b-agent")
    listed = other.credentials.all()
    assert [c.id for c in listed] == ["B-agent", "a-agent", "b-agent"]  # byte order, as SQLite sorts
    assert [c.revoked_at is not None for c in listed] == [False, False, True]


def test_revoke_ends_finding_keeps_the_first_time_and_unknown_is_none(this, other):
    this.credentials.insert(_credential("agent-1"), "0123456789ab", "s")
    revoked = other.credentials.revoke("agent-1")
    assert _is_recent_utc(revoked.revoked_at)
    assert this.credentials.by_lookup("0123456789ab").credential.revoked_at == revoked.revoked_at
    assert _found(this.credentials, "0123456789ab", "s") is None
    assert this.credentials.revoke("agent-1").revoked_at == revoked.revoked_at
    assert this.credentials.revoke("nobody") is None


def test_exists_once_any_credential_was_created_even_revoked(this, other):
    assert not other.credentials.exists()
    this.credentials.insert(_credential("agent-1"), "0123456789ab", "s")
    assert other.credentials.exists()
    this.credentials.revoke("agent-1")
    assert other.credentials.exists()


# ---- rules the two stores' former copies wrote differently ------------------------------


def test_a_namespace_is_a_literal_prefix_up_to_its_dot(this, other):
    this.settings.write_settings("mem", {"a": 1})
    this.settings.write_settings("memory", {"b": 2})
    this.settings.write_settings("m_m", {"c": 3})
    this.settings.write_settings("m%", {"d": 4})
    assert other.settings.read_settings("mem") == {"a": 1}
    assert other.settings.read_settings("memory") == {"b": 2}
    assert other.settings.read_settings("m_m") == {"c": 3}  # '_' and '%' match only themselves
    assert other.settings.read_settings("m%") == {"d": 4}


def test_a_release_without_a_payload_keeps_the_last_one_and_its_seq(this, other):
    assert this.leases.acquire("job", "holder-a", 3600)
    assert this.leases.renew("job", "holder-a", 3600, payload='{"done": 1}')
    seq = other.leases.read("job").seq
    assert this.leases.release("job", "holder-a")
    record = other.leases.read("job")
    assert (record.payload, record.seq, record.live) == ('{"done": 1}', seq, False)
    assert not this.leases.release("job", "holder-b", payload='{"done": 9}')  # not the holder: nothing changes
    assert other.leases.read("job").payload == '{"done": 1}'
