"""Durable facts outlive the default retention, through the real gRPC server: what
extraction stores about who the user is (name, allergies, family, pets, reply language,
profession, home, lasting preferences) is kept by default, while a decision, a conversation
turn and a note without a key age out after retentionDays (30 by default). The writer's own
`keep: false` and an expiry still apply to a durable fact.

Ages are moved with direct SQL, as the other retention tests do.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf import timestamp_pb2

from memsvc.core.retention import DURABLE_KEY_PREFIXES
from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from tests.service.test_engine_retrieval import OWNER, STRATEGIES, create, enable, retrieve, sql

USER_SAYS = (
    "My name is Ada. I'm allergic to peanuts. I have two daughters. I have a cat named Miso. "
    "Please always reply in French. I work as a nurse. I live in Lyon. I prefer short answers. "
    "I decided to use PostgreSQL for this project."
)
DURABLE = {"name", "diet", "family", "pet", "language", "profession", "location", "preference"}
BACKDATE_DAYS = 40


def extract(stubs, text: str) -> epb.ExtractResponse:
    return stubs.engine.Extract(epb.ExtractRequest(api_key_id=OWNER, user_message=text, wait=True))


def stored(stubs) -> list[mpb.Memory]:
    return list(stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id=OWNER, limit=100)).data)


def backdate_all(server) -> None:
    past = (datetime.now(UTC) - timedelta(days=BACKDATE_DAYS)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    sql(server, "UPDATE memories SET created_at = ?, updated_at = ? WHERE api_key_id = ?", (past, past, OWNER))


def recent_keys(stubs, strategy: str = "recent", query: str = "") -> tuple[set[str], int]:
    """The keys (category part) Retrieve returns, and how many it skipped for their age."""
    resp = retrieve(stubs, query, strategy=strategy, limit=100, max_tokens=16000, min_score=0)  # retention alone
    by_id = {m.id: m for m in stored(stubs)}
    return {
        by_id[m.id].key.split(":")[0] if by_id[m.id].key else m.id for m in resp.memories
    }, resp.resolution.skipped_for_age


def test_the_table_names_every_everyday_category_extraction_stores():
    assert {prefix.rstrip(":") for prefix in DURABLE_KEY_PREFIXES} == DURABLE


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_extracted_identity_facts_outlive_the_default_retention_and_episodes_do_not(server, stubs, strategy):
    enable(stubs)  # retentionDays: the default 30
    out = extract(stubs, USER_SAYS)
    categories = {fact.key.split(":")[0] for fact in out.facts}
    assert DURABLE | {"decision"} <= categories, categories
    turn = create(stubs, "We talked about the trip to Lyon and peanuts", type="episodic", key="turn:1")
    note = create(stubs, "Ada asked about the trip to Lyon")
    memories = stored(stubs)
    kept = {m.key.split(":")[0] for m in memories if m.keep}
    assert kept == DURABLE  # GetMemory/ListMemories show it
    backdate_all(server)

    query = "Ada name peanuts allergic daughters cat Miso reply French nurse Lyon short answers PostgreSQL project trip"
    found, skipped = recent_keys(stubs, strategy, query)
    assert found == DURABLE, found
    aging = [m for m in memories if not m.keep]
    assert {m.id for m in aging} >= {turn, note} and len(aging) == len(memories) - len(DURABLE)
    assert skipped == len(aging)


def test_the_writers_keep_false_and_an_expiry_still_apply_to_a_durable_fact(server, stubs):
    enable(stubs)
    released = create(stubs, "User's name is Ada", key="name:user", keep=False)
    soon = datetime.now(UTC) + timedelta(days=1)
    expiring = create(
        stubs,
        "User is allergic to peanuts",
        key="diet:allergy_peanuts",
        expires_at=timestamp_pb2.Timestamp(seconds=int(soon.timestamp())),
    )
    kept = create(stubs, "User has a cat named Miso", key="pet:miso")
    by_id = {m.id: m for m in stored(stubs)}
    assert not by_id[released].keep and by_id[expiring].keep and by_id[kept].keep
    backdate_all(server)
    sql(server, "UPDATE memories SET expires_at = '2001-01-01T00:00:00.000000Z' WHERE id = ?", (expiring,))

    resp = retrieve(stubs, "Ada peanuts cat Miso", strategy="recent", limit=100, min_score=0)
    assert [m.id for m in resp.memories] == [kept]
    assert resp.resolution.skipped_for_age == 1  # the released name; the expired fact is not counted


def test_an_upsert_of_a_durable_key_keeps_it_and_an_episodic_memory_with_such_a_key_ages(server, stubs):
    enable(stubs)
    episode = create(stubs, "User said their name is Ada", key="name:said_in_turn_3", type="episodic")
    memory_id = create(stubs, "User's name is Ada", key="name:user", keep=False)
    again = create(stubs, "User's name is Ada Lovelace", key="name:user")  # says nothing about keep
    by_id = {m.id: m for m in stored(stubs)}
    assert again == memory_id and by_id[memory_id].keep and not by_id[episode].keep
