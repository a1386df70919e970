"""The conversation signals of retrieval, through the real gRPC server (no vector tier): the
turn next to a matching turn of a session comes back with it, and a date the question names
favours what happened then, whether the question's words found it or not, and the turns of a
speaker the question names gain on the others without any being dropped.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from memsvc.core.retrieval.conversation_signals import DATE_WEIGHT, NEIGHBOUR_WEIGHT, SPEAKER_WEIGHT
from tests.service.test_engine_retrieval import create, enable, ids, retrieve, struct

JAN_7 = datetime(2024, 1, 7, 18, 30, tzinfo=UTC)


def at(moment: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def turn(stubs, content: str, session: str, moment: datetime, type_: str = "episodic") -> str:
    return create(stubs, content, session_id=session, type=type_, occurred_at=at(moment))


def kate_fillers(stubs, n: int = 4) -> list[str]:
    """Turns that share only "Kate" with the questions below, in other sessions, stored last
    (so, without a signal, they win every tie as the newest)."""
    return [
        turn(stubs, f"Kate: the weather is nice over here, day {i}", f"other-{i}", JAN_7 - timedelta(days=3 + i))
        for i in range(n)
    ]


def test_the_answer_next_to_a_matching_question_turn_is_lent_its_score(server, stubs):
    enable(stubs)
    asked = turn(stubs, "Elise: what did you cook for dinner on your trip?", "s1", JAN_7)
    answer = turn(stubs, "Kate: carbonara with guanciale", "s1", JAN_7 + timedelta(minutes=1))
    fillers = kate_fillers(stubs)
    resp = retrieve(stubs, "What did Kate cook for dinner?", strategy="hybrid", min_score=0)  # fillers included
    order = ids(resp)
    assert order[0] == asked
    assert order.index(answer) < min(order.index(f) for f in fillers), [m.content for m in resp.memories]
    lent = resp.memories[order.index(answer)].score - resp.memories[order.index(fillers[0])].score
    assert lent == pytest.approx(NEIGHBOUR_WEIGHT * resp.memories[0].score, rel=0.05)


def test_a_neighbour_outside_the_keyword_matches_joins_the_results(server, stubs):
    enable(stubs)
    turn(stubs, "Elise: what did you cook for dinner on your trip?", "s1", JAN_7)
    answer = turn(stubs, "Kate: carbonara with guanciale", "s1", JAN_7 + timedelta(minutes=1))
    resp = retrieve(stubs, "What did Paola's friend cook for dinner?", strategy="hybrid")
    assert answer in ids(resp)
    assert {m.tier for m in resp.memories if m.id == answer} == {"context"}


def test_only_conversation_turns_of_the_same_session_are_neighbours(server, stubs):
    enable(stubs)
    turn(stubs, "Elise: what did you cook for dinner on your trip?", "s1", JAN_7)
    fact = turn(stubs, "User likes hiking", "s1", JAN_7 + timedelta(minutes=1), type_="factual")
    elsewhere = turn(stubs, "Kate: carbonara with guanciale", "s2", JAN_7 + timedelta(minutes=1))
    resp = retrieve(stubs, "What did Paola's friend cook for dinner?", strategy="hybrid")
    assert fact not in ids(resp) and elsewhere not in ids(resp)


def test_a_named_date_favours_what_happened_that_day(server, stubs):
    enable(stubs)
    lamp = turn(stubs, "Kate: I made a lamp shade", "d7", JAN_7)
    cake = turn(stubs, "Kate: I made a cake", "d3", JAN_7 - timedelta(days=4))
    resp = retrieve(stubs, "What did Kate make on 7 Jan 2024?", strategy="hybrid")
    assert ids(resp)[:2] == [lamp, cake]
    # Without its date the question ranks the two on their words alone; with it, the lamp
    # gains DATE_WEIGHT x the best of those scores and the cake nothing.
    undated = retrieve(stubs, "What did Kate make?", strategy="hybrid")
    own = {m.id: m.score for m in undated.memories}
    assert resp.memories[0].score == pytest.approx(own[lamp] + DATE_WEIGHT * max(own.values()), rel=0.01)
    assert resp.memories[1].score == pytest.approx(own[cake], rel=0.01)


@pytest.mark.parametrize(
    "question",
    [
        "What did Elise buy on 7 Jan 2024?",
        "What did Elise buy on 07.01.2024?",
        "What did Elise buy on January 7th, 2024?",
    ],
)
def test_a_memory_of_the_named_day_is_found_without_a_shared_word(server, stubs, question):
    enable(stubs)
    bought = turn(stubs, "Kate: finally got that new lamp", "d7", JAN_7)
    turn(stubs, "Kate: finally got that new rug", "d2", JAN_7 - timedelta(days=5))
    turn(stubs, "Elise: I like shopping on weekends", "d1", JAN_7 - timedelta(days=6))
    resp = retrieve(stubs, question, strategy="hybrid")
    assert bought in ids(resp)
    assert "finally got that new rug" not in [m.content for m in resp.memories]


def test_a_relative_date_counts_from_the_request_and_reads_when_it_happened(server, stubs):
    """`yesterday` is the day before the request; a memory stored today about yesterday
    (occurredAt yesterday) is what it finds, not one stored yesterday about last month."""
    enable(stubs)
    now = datetime.now(UTC)
    yesterday = turn(stubs, "Kevin: pizza night with the team", "a", now - timedelta(days=1))
    create(
        stubs,
        "Kevin: pizza at the old place",
        session_id="b",
        type="episodic",
        occurred_at=at(now - timedelta(days=30)),
    )
    resp = retrieve(stubs, "Where did Kevin eat pizza yesterday?", strategy="hybrid")
    assert ids(resp)[0] == yesterday


def test_exact_retrieval_is_left_as_it_is(server, stubs):
    """exact (recent) is newest first by substring relevance: no signal changes it."""
    enable(stubs)
    lamp = turn(stubs, "Kate: I made a lamp shade", "d7", JAN_7)
    cake = turn(stubs, "Kate: I made a cake", "d3", JAN_7 - timedelta(days=4))
    assert ids(retrieve(stubs, "What did Kate make on 7 Jan 2024?", strategy="exact", min_score=0))[:2] == [cake, lamp]


def test_the_relevance_floor_lets_through_what_a_passing_turn_or_the_named_date_brought_in(server, stubs):
    """The answer next to a matching question and the memory of the day asked about share
    too few words with the question to pass a floor on their own; they pass through what
    lent them relevance, while a turn next to nothing that passed does not. (minScore 0.3:
    the fillers share one word of three with the question, 0.25.)"""
    enable(stubs)
    turn(stubs, "Elise: what did you cook for dinner on your trip?", "s1", JAN_7)
    answer = turn(stubs, "Kate: carbonara with guanciale", "s1", JAN_7 + timedelta(minutes=1))
    fillers = kate_fillers(stubs)
    resp = retrieve(stubs, "What did Kate cook for dinner?", strategy="hybrid", min_score=0.3)
    assert answer in ids(resp) and not set(fillers) & set(ids(resp))
    assert resp.resolution.below_min_score >= len(fillers) and resp.resolution.keyword_floor == 0.3

    lamp = turn(stubs, "Kate: finally got that new lamp", "d7", JAN_7 + timedelta(hours=2))
    dated = retrieve(stubs, "What did Elise buy on 7 Jan 2024?", strategy="hybrid", min_score=0.3)
    assert lamp in ids(dated)
    undated = retrieve(stubs, "What did Elise buy?", strategy="hybrid", min_score=0.3)
    assert lamp not in ids(undated)


def test_the_turns_of_a_speaker_the_question_names_gain_a_share_of_the_best_score(server, stubs):
    enable(stubs)
    # Each memory's metadata holds "Kevin" once, so the question's words score the three alike.
    kevin = create(stubs, "I play tennis every weekend", metadata=struct({"speaker": "Kevin"}))
    paola = create(stubs, "I play tennis every weekend", metadata=struct({"speaker": "Paola", "with": "Kevin"}))
    unsaid = create(stubs, "I play tennis every weekend", metadata=struct({"with": "Kevin"}))  # no speaker
    resp = retrieve(stubs, "What does Kevin play every weekend?", strategy="hybrid")
    assert ids(resp)[0] == kevin
    scores = {m.id: m.score for m in resp.memories}
    # A boost, never a filter: the other speaker's turn and the unsaid memory stay, as they scored.
    assert scores[paola] == pytest.approx(scores[unsaid])
    assert scores[kevin] - scores[paola] == pytest.approx(SPEAKER_WEIGHT * scores[paola], rel=0.01)


def test_the_speaker_of_a_turn_is_the_name_its_content_starts_with(server, stubs):
    enable(stubs)
    # Both turns hold both names once; Fahim's is one word longer, which bm25 weighs down a little.
    fahim = turn(stubs, "Fahim Khan: Akib, I listen to a lot of classical music", "s1", JAN_7)
    akib = turn(stubs, "Akib: Fahim, I listen to a lot of classical music", "s2", JAN_7)
    resp = retrieve(stubs, "What music does Fahim listen to?", strategy="hybrid")
    scores = {m.id: m.score for m in resp.memories}
    assert ids(resp)[:2] == [fahim, akib]
    assert scores[fahim] - scores[akib] > 0.8 * SPEAKER_WEIGHT * scores[akib]


@pytest.mark.parametrize(
    "question",
    [
        "What do they play every weekend?",  # names nobody
        "What do Kevin and Paola play every weekend?",
    ],
)  # names everyone
def test_no_speaker_gains_when_the_question_names_none_or_all_of_them(server, stubs, question):
    enable(stubs)
    said = [
        create(stubs, "I play tennis every weekend", metadata=struct({"speaker": name, "with": "Kevin Paola"}))
        for name in ("Kevin", "Paola")
    ]
    # As many of the names as the others' metadata holds, but said by nobody.
    unsaid = create(stubs, "I play tennis every weekend", metadata=struct({"with": "Kevin Paola", "by": "Kevin"}))
    scores = {m.id: m.score for m in retrieve(stubs, question, strategy="hybrid").memories}
    assert scores[said[0]] == pytest.approx(scores[unsaid]) and scores[said[1]] == pytest.approx(scores[unsaid])


def test_a_fact_s_own_prefix_names_no_speaker(server, stubs):
    enable(stubs)
    note = create(stubs, "Note: the tennis court opens every weekend", type="factual")
    kevin = create(stubs, "I play tennis every weekend", metadata=struct({"speaker": "Kevin", "with": "Note"}))
    scores = {m.id: m.score for m in retrieve(stubs, "Note what Kevin plays every weekend", strategy="hybrid").memories}
    bare = {m.id: m.score for m in retrieve(stubs, "Note what Ann plays every weekend", strategy="hybrid").memories}
    # Kevin's memory gains; the note is not said by a "note" speaker the question names.
    assert scores[note] == pytest.approx(bare[note])
    assert scores[kevin] > bare[kevin]
