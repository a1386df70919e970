"""The inline-call primitives: what a first run that hands over to a worker leaves behind."""

from __future__ import annotations

import threading

import pytest

from memsvc.kernel.inline import WouldBlock, hold, inline, is_inline, may_block, settle


def test_outside_an_inline_call_nothing_raises_and_settle_runs_at_once():
    done: list[str] = []
    assert not is_inline()
    may_block("a step that waits")
    settle(lambda: done.append("now"))
    assert done == ["now"]


def test_settled_effects_run_when_the_inline_call_completes():
    done: list[str] = []
    with inline():
        assert is_inline()
        settle(lambda: done.append("first"))
        settle(lambda: done.append("second"))
        assert done == []
    assert done == ["first", "second"]
    assert not is_inline()


def test_an_inline_call_that_would_block_drops_what_it_settled():
    done: list[str] = []
    with pytest.raises(WouldBlock) as raised:
        with inline():
            settle(lambda: done.append("cached"))
            may_block("an embedding that waits")
    assert raised.value.step == "an embedding that waits"
    assert done == []
    assert not is_inline()


def test_hold_raises_inline_for_a_lock_another_thread_holds_and_waits_outside():
    lock = threading.Lock()
    lock.acquire()
    try:
        with pytest.raises(WouldBlock):
            with inline():
                with hold(lock, "the owner's lock"):
                    pass
    finally:
        lock.release()
    with inline():
        with hold(lock):
            assert lock.locked()
    assert not lock.locked()
