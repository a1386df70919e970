"""What a server prepares once it serves, off the request path: the extraction rules (about
a second to compile) are compiled in the background after SERVING, so neither the start
nor the first Extract waits for them."""

from __future__ import annotations

import time

from memsvc.core.extraction import facts as extraction
from memsvc.v1 import engine_pb2 as epb


def test_the_extraction_rules_are_compiled_once_the_server_serves(boot):
    extraction.rule_sets.cache_clear()  # as in a fresh process: nothing compiled yet
    _, stubs = boot()
    deadline = time.monotonic() + 30
    while extraction.rule_sets.cache_info().currsize == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert extraction.rule_sets.cache_info().currsize == 1, "the server did not compile the rules in the background"
    misses = extraction.rule_sets.cache_info().misses
    reply = stubs.engine.Extract(
        epb.ExtractRequest(api_key_id="key-warm", text="I prefer dark mode in my editor", dry_run=True)
    )
    assert reply.facts and extraction.rule_sets.cache_info().misses == misses  # no compile on the request path
