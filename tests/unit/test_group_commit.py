"""Group commit (memsvc.core.group_commit): concurrent submissions coalesce into batches,
every caller gets its own outcome, and no caller is left waiting.

The batches are made deterministic without timing: the first batch blocks on an event
until the other submissions are seen queued (`waiting()`), so they must form the next one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from memsvc.core.group_commit import GroupCommit


def _until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.001)


class Recorder:
    """A batch function that records its batches; the first one waits for `release`."""

    def __init__(self, fail_on: set[int] = frozenset(), explode_on: int | None = None):
        self.batches: list[list[int]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail_on = fail_on
        self.explode_on = explode_on

    def __call__(self, items: list[int]) -> list[object]:
        self.batches.append(list(items))
        if len(self.batches) == 1:
            self.entered.set()
            assert self.release.wait(10)
        if self.explode_on in items:
            raise RuntimeError("the whole batch failed")
        return [ValueError(f"item {i} refused") if i in self.fail_on else i * 10 for i in items]


def _submit_all(commit: GroupCommit, items: list[int]) -> tuple[dict[int, object], list[threading.Thread]]:
    outcomes: dict[int, object] = {}

    def call(item: int) -> None:
        try:
            outcomes[item] = commit.submit(item)
        except Exception as exc:  # noqa: BLE001 - recorded for the asserts
            outcomes[item] = exc

    threads = [threading.Thread(target=call, args=(item,)) for item in items]
    for t in threads:
        t.start()
    return outcomes, threads


def _run_blocked_then_rest(recorder: Recorder, rest: list[int], max_batch: int = 128) -> dict[int, object]:
    """Item 0 leads a batch that blocks; `rest` queue meanwhile; then everything finishes."""
    commit = GroupCommit(recorder, max_batch=max_batch)
    first, first_threads = _submit_all(commit, [0])
    assert recorder.entered.wait(10)
    others, threads = _submit_all(commit, rest)
    _until(lambda: commit.waiting() == len(rest))
    recorder.release.set()
    for t in first_threads + threads:
        t.join(10)
        assert not t.is_alive()
    assert commit.waiting() == 0
    assert commit.items == 1 + len(rest)
    return {**first, **others}


def test_a_lone_caller_runs_its_own_batch_at_once():
    commit = GroupCommit(lambda items: [i + 1 for i in items])
    assert [commit.submit(i) for i in range(3)] == [1, 2, 3]
    assert (commit.batches, commit.items) == (3, 3)


def test_callers_arriving_during_a_batch_share_the_next_one_and_get_their_own_results():
    recorder = Recorder()
    outcomes = _run_blocked_then_rest(recorder, list(range(1, 8)))
    assert recorder.batches[0] == [0]
    assert sorted(recorder.batches[1]) == list(range(1, 8))  # one batch for all seven
    assert len(recorder.batches) == 2
    assert outcomes == {i: i * 10 for i in range(8)}


def test_one_failed_item_fails_only_its_caller():
    recorder = Recorder(fail_on={3})
    outcomes = _run_blocked_then_rest(recorder, list(range(1, 6)))
    assert isinstance(outcomes[3], ValueError) and str(outcomes[3]) == "item 3 refused"
    assert {i: v for i, v in outcomes.items() if i != 3} == {i: i * 10 for i in (0, 1, 2, 4, 5)}


def test_a_failing_batch_fails_every_caller_of_that_batch_and_the_next_batch_still_runs():
    recorder = Recorder(explode_on=2)
    commit = GroupCommit(recorder, max_batch=128)
    first, first_threads = _submit_all(commit, [0])
    assert recorder.entered.wait(10)
    doomed, threads = _submit_all(commit, [1, 2, 3])
    _until(lambda: commit.waiting() == 3)
    recorder.release.set()
    for t in first_threads + threads:
        t.join(10)
    assert first == {0: 0}
    assert all(isinstance(doomed[i], RuntimeError) for i in (1, 2, 3))
    assert commit.submit(4) == 40  # the lead was handed back: nothing hangs


def test_max_batch_splits_the_queue_and_each_leader_runs_one_batch():
    recorder = Recorder()
    outcomes = _run_blocked_then_rest(recorder, list(range(1, 11)), max_batch=4)
    assert [len(b) for b in recorder.batches] == [1, 4, 4, 2]
    assert outcomes == {i: i * 10 for i in range(11)}


def test_max_batch_must_be_positive():
    with pytest.raises(ValueError):
        GroupCommit(lambda items: items, max_batch=0)
