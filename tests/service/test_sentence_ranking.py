"""Keyword ranking of sentence queries through the real gRPC server, with no vector tier: a
question ("What did Kevin cook for his mom's birthday?") ranks the rows by bm25 first, so a
row that repeats the question's commonest word many times no longer outranks the row that
holds its rare words; a keyword query ("kevin") keeps the substring relevance order.
"""

from __future__ import annotations

import pytest

from tests.service.test_engine_retrieval import create, enable, ids, retrieve

ANSWER = "Kevin: I cooked macarons for my mom's birthday last Friday"
CHATTY = "Kevin: Kevin here, kevin again, Kevin Kevin! Kevin says hi, kevin out"
OTHER = "Paola: I went hiking with friends on Sunday"
QUESTION = "What did Kevin cook for his mom's birthday?"


@pytest.mark.parametrize("strategy", ["semantic", "hybrid"])
def test_a_question_ranks_the_row_with_its_rare_words_first(server, stubs, strategy):
    enable(stubs)
    answer, chatty = create(stubs, ANSWER), create(stubs, CHATTY)
    create(stubs, OTHER)
    resp = retrieve(stubs, QUESTION, strategy=strategy, min_score=0)  # the ranking, not the floor
    assert ids(resp)[:2] == [answer, chatty], [m.content for m in resp.memories]
    assert resp.memories[0].score > resp.memories[1].score


def test_a_keyword_query_keeps_the_substring_relevance_order(server, stubs):
    enable(stubs)
    answer, chatty = create(stubs, ANSWER), create(stubs, CHATTY)
    # Seven occurrences of "kevin" (+3 each) and the phrase (+20) outrank one, plus the best
    # bm25 share (1.0): the keyword rule as documented.
    resp = retrieve(stubs, "kevin", strategy="semantic")
    assert ids(resp) == [chatty, answer]
    assert resp.memories[0].score == pytest.approx(7 * 3 + 20 + 1.0)


def test_a_word_in_most_of_the_owners_memories_weighs_nothing_beside_another_owners_rows(server, stubs):
    """bm25's idf is the owner's own: "Kate", in 9 of the chat's 10 turns, does not lift the
    turn that says it four times above the one turn about pasta, however many rows other
    owners hold (FTS5's bm25 alone counted every owner's rows, and there "Kate" weighed
    almost as much as "pasta")."""
    from memsvc.v1 import memory_pb2 as mpb

    enable(stubs)
    stubs.memory.CreateMemories(
        mpb.CreateMemoriesRequest(
            memories=[
                mpb.CreateMemoryRequest(api_key_id="key-other", content=f"Bob: note number {i}") for i in range(1000)
            ]
        )
    )
    for i in range(8):
        create(stubs, f"Kate: filler line {i}")
    chatty = create(stubs, "Kate: Kate said Kate is Kate")
    pasta = create(stubs, "Bob: I cooked pasta with tomatoes and garlic for the whole family at dinner tonight")
    resp = retrieve(stubs, "What pasta did Kate like?", strategy="hybrid", min_score=0)  # the ranking, not the floor
    assert ids(resp)[:2] == [pasta, chatty], [m.content for m in resp.memories]


def test_a_question_counts_the_substring_relevance_beside_bm25(server, stubs):
    """For a question bm25 comes first and the substring relevance second, not as a mere
    tie-break: the turn naming "cook" in two more words (cookbook, cookies: +6 relevance,
    which bm25's stemmed tokens do not see) outranks one whose bm25 is 5 % better."""
    enable(stubs)
    plain = create(stubs, "Kate: I cook dinner for friends at home")
    cookbook = create(stubs, "Kate: I cook dinner from the cookbook of cookies")
    for i in range(20):
        create(stubs, f"Bob: we went hiking on day {i}")
    resp = retrieve(stubs, "Where did Kate cook dinner?", strategy="hybrid")
    assert ids(resp)[:2] == [cookbook, plain], [m.content for m in resp.memories]
    assert resp.memories[0].fts_score < resp.memories[1].fts_score  # bm25 alone ranks them the other way
