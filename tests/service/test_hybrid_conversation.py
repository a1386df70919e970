"""Hybrid retrieval of conversation turns through the real gRPC server, on a static model: the
conversation signals add turns on the fused ranking's scale, whatever the query's language.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf.timestamp_pb2 import Timestamp

from memsvc.core.retrieval.conversation_signals import NEIGHBOUR_WEIGHT
from memsvc.v1 import engine_pb2 as epb
from tests.support.vectors import create, set_memory, static_model, warm  # noqa: F401 - fixture

OWNER = "key-chat"
START = datetime(2024, 3, 1, 20, 0, tzinfo=UTC)


def turns(stubs, session: str, lines: list[str]) -> list[str]:
    out = []
    for i, line in enumerate(lines):
        at = Timestamp()
        at.FromDatetime(START + timedelta(minutes=i))
        out.append(create(stubs, OWNER, line, session_id=session, type="episodic", occurred_at=at))
    return out


def test_a_neighbour_of_a_keyword_style_query_ranks_on_the_fused_scale(boot, static_model):
    # Vector lists of one: the neighbours are brought in by the signal, not found by a list.
    server, stubs = boot(static_model=str(static_model), vec_top_k=1)
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True)
    warm(server)
    # The question has no function word (a keyword-style query): a neighbour's own relevance
    # is counted in points (健太 occurs in it), the fused items' scores near 0..1.
    said = turns(
        stubs, "s1", ["健太: 実は4月から大阪の支社に異動することになった", "健太: 慎重に決めなよ", "美咲: えっ、急だね"]
    )
    resp = stubs.engine.Retrieve(
        epb.RetrieveRequest(
            api_key_id=OWNER, query="健太は4月からどこの支社に異動する？", strategy="hybrid", max_tokens=4000
        )
    )
    assert resp.resolution.strategy_used == "hybrid-gated-convex", resp.resolution.fallback_reason
    order = [m.id for m in resp.memories]
    assert order[0] == said[0], [(m.content, m.score, m.tier) for m in resp.memories]
    scores = {m.id: m.score for m in resp.memories}
    assert {m.tier for m in resp.memories if m.id == said[1]} == {"context"}, [
        (m.content, m.score, m.tier) for m in resp.memories
    ]
    # The neighbour's own score is a share of the answer's, not points: it stays below
    # what the answer lends plus the answer's own score.
    assert scores[said[1]] < (1 + NEIGHBOUR_WEIGHT) * scores[said[0]]
