"""Whose words a fact comes from, through the real gRPC server's Extract: the assistant's
first-person statements store nothing (for a user's key and for a character), what the
assistant restates about the user is stored as the user's fact, and the user's own words
stay the user's facts."""

from __future__ import annotations

import time

import pytest
from google.protobuf import struct_pb2

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb

OWNER = "key-speakers"
ASSISTANT_SELF = [
    "I prefer concise answers. I usually answer in bullet points.",  # the README's old example
    "Sure! I love Italian food, and I prefer simple recipes.",
    "私はイタリア料理が好きです。いつも箇条書きで答えます。",
    "我喜欢意大利菜。我通常用要点回答。",
    "Я люблю итальянскую кухню. Я обычно отвечаю списком.",
]
RESTATED = [
    ("You mentioned you live in Paris, so here are three cafés nearby.", "location:home", "User lives in Paris"),
    ("Since you're vegetarian, the lentil soup is a good pick.", "diet:vegetarian", "User is vegetarian"),
    (
        "As you said, you're allergic to peanuts, so I left them out.",
        "diet:allergy_peanuts",
        "User is allergic to peanuts",
    ),
    ("パリにお住まいとのことですが、おすすめのカフェを紹介しますね。", "location:home", "ユーザーはパリに住んでいる"),
    ("你说过你住在巴黎，所以我推荐这几家咖啡馆。", "location:home", "用户住在巴黎"),
    ("Вы упоминали, что живёте в Париже, поэтому вот несколько кафе.", "location:home", "Пользователь живёт в Париже"),
]


def enable(stubs) -> None:
    settings = struct_pb2.Struct()
    settings.update({"enabled": True})
    stubs.settings.UpdateMemorySettings(spb.UpdateMemorySettingsRequest(settings=settings))


def contents(stubs, owner: str) -> dict[str, str]:
    rows = stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id=owner, limit=200)).data
    return {m.key: m.content for m in rows}


@pytest.mark.parametrize("owner", [OWNER, "character:Mia"])
@pytest.mark.parametrize("reply", ASSISTANT_SELF)
def test_assistant_first_person_stores_nothing(stubs, owner, reply):
    enable(stubs)
    out = stubs.engine.Extract(epb.ExtractRequest(assistant_message=reply, api_key_id=owner, wait=True))
    assert (list(out.facts), out.stored, out.skipped_reason) == ([], 0, "no facts found")
    assert contents(stubs, owner) == {}


@pytest.mark.parametrize(("reply", "key", "content"), RESTATED, ids=[r[1] + ":" + r[0][:12] for r in RESTATED])
def test_assistant_restatement_stores_the_user_fact(stubs, reply, key, content):
    enable(stubs)
    out = stubs.engine.Extract(epb.ExtractRequest(assistant_message=reply, api_key_id=OWNER, wait=True))
    assert out.stored == 1 and [(f.key, f.content) for f in out.facts] == [(key, content)]
    assert contents(stubs, OWNER) == {key: content}


def test_restatement_stored_in_the_background(stubs):
    enable(stubs)
    out = stubs.engine.Extract(
        epb.ExtractRequest(assistant_message="You told me your name is Anna, so hello Anna!", api_key_id=OWNER)
    )
    assert out.accepted is True
    deadline = time.monotonic() + 10
    while contents(stubs, OWNER) != {"name:user": "User's name is Anna"}:
        assert time.monotonic() < deadline, contents(stubs, OWNER)
        time.sleep(0.05)


def test_one_exchange_keeps_the_user_facts_and_drops_the_assistants(stubs):
    """The user's words give the user's facts; the reply's own likes give none; the user's
    statement wins over the reply's restatement of the same key."""
    enable(stubs)
    out = stubs.engine.Extract(
        epb.ExtractRequest(
            user_message="I live in Lisbon. I prefer tea.",
            assistant_message="I love coffee myself! You mentioned you live in Porto, right? Since you like tea, try oolong.",
            api_key_id=OWNER,
            wait=True,
        )
    )
    assert out.stored == 2
    assert contents(stubs, OWNER) == {"location:home": "User lives in Lisbon", "preference:tea": "User prefers tea"}


@pytest.mark.parametrize(
    "reply",
    [
        "Do you like tea?",
        "You might like jazz.",
        "You should try sushi.",
        "If you live in Paris, visit the Louvre.",
        "You mentioned you live in Paris, right?",
        "你喜欢茶吗？",
        "Вы любите чай?",
        "猫がお好きですか？",
    ],
)
def test_questions_suggestions_and_hypotheticals_store_nothing(stubs, reply):
    enable(stubs)
    out = stubs.engine.Extract(epb.ExtractRequest(assistant_message=reply, api_key_id=OWNER, wait=True))
    assert out.stored == 0 and list(out.facts) == []
