"""What a Retrieve with `asOf` costs beside one of the current memories, on one server, in one
run: an owner of N memories (facts with keys, a tenth of them superseded after the instant
asked about), hybrid retrieval on the static model, three kinds of query asked in turn.

An asOf retrieval builds the owner's past as a working set of its own (memsvc.working_set.past:
one tokenization of the owner's memories) and searches the live vector index for k + the
memories begun since, so its cost grows with the owner; the current one reads the owner's
kept working set. The server keeps the last few pasts, so the bench asks both ways: every
query about the one instant (the past built once), and each about an instant of its own (a
past built per query). The answers are checked too: as of the instant, every superseded fact
answers with its old content.

    .venv/bin/python bench/lifecycle_bench.py [--memories 1000,5000] [--calls 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    QUIET_PORTS,
    ServerProc,
    Stubs,
    Target,
    agg,
    enable_static,
    fmt,
    md_table,
    pct,
    write_results,
)
from bench.facts import owner_facts  # noqa: E402

OWNER = "asof-owner"
SUPERSEDED_SHARE = 10  # one fact in this many gets a new content after the instant


def _seed(stubs: Stubs, count: int) -> tuple[datetime, list[tuple[str, str]]]:
    """The owner's facts, then the instant, then a tenth of them superseded; returns the
    instant and (old content, key) of the superseded ones."""
    from memsvc.v1 import memory_pb2

    facts = owner_facts(OWNER, count, seed=5)
    for i in range(0, count, 500):
        part = facts[i : i + 500]
        stubs.memory.CreateMemories(
            memory_pb2.CreateMemoriesRequest(
                memories=[
                    memory_pb2.CreateMemoryRequest(api_key_id=OWNER, key=f.key, content=f.content, type=f.type)
                    for f in part
                ]
            )
        )
    time.sleep(0.01)
    instant = datetime.now(UTC)
    time.sleep(0.01)
    changed = facts[::SUPERSEDED_SHARE]
    stubs.memory.CreateMemories(
        memory_pb2.CreateMemoriesRequest(
            memories=[
                memory_pb2.CreateMemoryRequest(
                    api_key_id=OWNER, key=f.key, content=f"No longer: {f.content}", type=f.type
                )
                for f in changed
            ]
        )
    )
    return instant, [(f.content, f.key) for f in changed]


def _timed(call, request) -> tuple[float, object]:
    started = time.perf_counter()
    answer = call(request, timeout=60)
    return (time.perf_counter() - started) * 1000.0, answer


def measure(memories: int, calls: int, rounds: int) -> dict:
    from memsvc.v1 import engine_pb2

    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProc(Path(tmp) / "data", extra_env=QUIET_PORTS, processes=1)
        server.start()
        try:
            stubs = Stubs(server.port)
            enable_static(stubs)
            instant, changed = _seed(stubs, memories)
            queries = [old for old, _ in changed[:calls]]
            # Distinct instants a microsecond apart, all between the facts and their change.
            instants = {q: _timestamp(instant + timedelta(microseconds=i)) for i, q in enumerate(queries)}
            at = _timestamp(instant)
            legs = {
                "current": lambda q: engine_pb2.RetrieveRequest(api_key_id=OWNER, query=q, strategy="hybrid"),
                "asOf": lambda q: engine_pb2.RetrieveRequest(api_key_id=OWNER, query=q, strategy="hybrid", as_of=at),
                "asOf, new instant": lambda q: engine_pb2.RetrieveRequest(
                    api_key_id=OWNER, query=q, strategy="hybrid", as_of=instants[q]
                ),
            }
            for q in queries[:10]:  # warm: working set, vectors, caches
                for make in legs.values():
                    stubs.engine.Retrieve(make(q), timeout=60)
            p50 = {label: [] for label in legs}
            p95 = {label: [] for label in legs}
            found_old = {label: 0 for label in legs if label != "current"}
            for _ in range(rounds):
                times = {label: [] for label in legs}
                for q in queries:
                    for label, make in legs.items():
                        elapsed, answer = _timed(stubs.engine.Retrieve, make(q))
                        times[label].append(elapsed)
                        if label != "current":
                            found_old[label] += any(m.content == q for m in answer.memories[:5])
                for label, values in times.items():
                    p50[label].append(pct(values, 50))
                    p95[label].append(pct(values, 95))
            stubs.close()
        finally:
            server.stop()
    return {
        "memories": memories,
        "superseded": len(changed),
        "calls_per_round": len(queries),
        "rounds": rounds,
        "p50": {k: agg(v) for k, v in p50.items()},
        "p95": {k: agg(v) for k, v in p95.items()},
        "p50_raw": p50,
        "old_fact_in_top5_as_of": min(found_old.values()) / (len(queries) * rounds),
    }


def _timestamp(moment: datetime) -> object:
    from google.protobuf.timestamp_pb2 import Timestamp

    stamp = Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def run(memories: tuple[int, ...] = (1000, 5000), calls: int = 100, rounds: int = 3) -> dict:
    return {"results": [measure(n, calls, rounds) for n in memories]}


def report(out: dict) -> tuple[str, list[Target]]:
    """The table, and one target: as of the instant, the superseded facts are what answers."""
    table = _table(out["results"])
    worst = min(r["old_fact_in_top5_as_of"] for r in out["results"])
    return table, [
        Target("asOf: the old fact in the top 5", worst, ">=", 0.95, "", "each query asks for a fact superseded since")
    ]


def _table(results: list[dict]) -> str:
    rows = []
    for out in results:
        raw = out["p50_raw"]
        same = [b / a for a, b in zip(raw["current"], raw["asOf"])]
        new = [b / a for a, b in zip(raw["current"], raw["asOf, new instant"])]
        rows.append(
            [
                f"{out['memories']:,}",
                fmt(out["p50"]["current"], 2, " ms"),
                fmt(out["p50"]["asOf"], 2, " ms"),
                fmt(agg(same), 1, "×"),
                fmt(out["p50"]["asOf, new instant"], 2, " ms"),
                fmt(agg(new), 1, "×"),
                fmt(out["p95"]["asOf, new instant"], 2, " ms"),
                f"{out['old_fact_in_top5_as_of']:.2f}",
            ]
        )
    table = md_table(
        [
            "owner's memories",
            "Retrieve p50, current",
            "asOf p50, one instant",
            "of current",
            "asOf p50, a new instant each",
            "of current",
            "new instant p95",
            "old fact in top 5, asOf",
        ],
        rows,
    )
    first = results[0]
    return table + (
        f"\n\nHybrid on the static model, one server process; a tenth of the owner's facts superseded after the "
        f"instant, each query the old content of one of them ({first['calls_per_round']} a round), the three asked "
        f"in turn: current, asOf the one instant (the owner's past built once and kept), asOf an instant of its own "
        f"a microsecond apart (a past built per query); medians of {first['rounds']} rounds (min–max)."
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", default="1000,5000")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    out = run(tuple(int(n) for n in args.memories.split(",")), args.calls, args.rounds)
    table, targets = report(out)
    out["targets"] = [t.as_dict() for t in targets]
    write_results("lifecycle", out, table, "Retrieve as of an instant")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
