"""clients/python/README.md's Python blocks run as written, in order, in one namespace, against
a fresh real server: only its address differs (the test's free port instead of 50051)."""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path

from conftest import ServerHandle
from support.doc_commands import blocks

from tests.sdk.servers import address

README = Path(__file__).resolve().parents[2] / "clients" / "python" / "README.md"
DOCUMENTED = "127.0.0.1:50051"


def test_the_readme_python_blocks_run_as_written(server: ServerHandle, offline: list[object]) -> None:
    """`offline`: the integrations load their frameworks, and nothing may download."""
    code = [block for block in blocks(README) if block.language == "python"]
    assert len(code) >= 5, "the quickstart's blocks are gone"
    assert DOCUMENTED in code[0].code
    namespace: dict[str, object] = {"__name__": "readme"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for block in code:
            source = block.code.replace(DOCUMENTED, address(server))
            exec(compile(source, block.where, "exec"), namespace)  # noqa: S102 - the README's own code, run as a reader runs it
    lines = printed.getvalue().splitlines()
    # The quickstart's retrieve, then the injected system message.
    assert lines[0].endswith(" I am vegetarian and I love Italian food"), lines
    injected = ast.literal_eval(lines[1])
    assert injected == {"role": "system", "content": "Memory context: I am vegetarian and I love Italian food"}
    assert "My sister Maria lives in Porto" in lines  # the update, read back
    assert "NOT_FOUND - memory 'no-such-id' not found" in lines
    assert "[('content', 'must not be empty')]" in lines
    # History, as of, merged on write; the change feed and its resumption.
    assert [line for line in lines if line.startswith(("created None", "superseded None"))] == [
        "created None I live in Lisbon",
        "superseded None I live in Amsterdam",
    ]
    assert "[('I live in Lisbon', True)]" in lines and "['I live in Lisbon']" in lines and "True" in lines
    feed = lines.index("bookmark")
    assert lines[feed + 1 : feed + 3] == ["created I started learning the cello", "updated updated I play the cello"]
    assert "['User prefers concise answers']" in lines  # the extracted fact
    assert "no reindex: NO_EMBEDDING_SOURCE" in lines
    assert lines[-7:] == [
        "I am learning Portuguese",  # the async client's retrieve, the quickstart's last line
        "40",  # LangGraph: get, search with a query and a filter, list_namespaces
        "risotto - Mushroom risotto with parmesan",
        "[('user-42', 'recipes')]",
        "['Done: Friday, 8 pm, two people.']",  # OpenAI Agents: the session's latest item,
        "['I am vegetarian and I love Italian food']",  # and the quickstart's memory, recalled
        "['- user: I am allergic to peanuts', '- assistant: Noted: no peanuts in anything I suggest.']",
    ]
