"""Working sets (memsvc/working_set) beside the FTS5 path they replace, in one run: an
owner's keyword search and its store reads as the Retriever makes them, with the owner's
set in memory and with every search sent to FTS5 (MEMORY_WORKING_SET_MB=0's path), call
by call alternating on the same store; the cold build of a 10k-fact owner's set, its bytes,
and the cost of following writes (a create through another connection, then a search).

    .venv/bin/python bench/working_set_bench.py [--total 200000] [--calls 300]

In process, no gRPC: what the hot path pays for its keyword list and conversation reads
(bench/hot_path.py measures the server end to end).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import CACHE, Target, fmt, interleaved_n, md_table, pct, timed, write_results  # noqa: E402
from bench.facts import owner_facts, queries  # noqa: E402
from memsvc.core.retrieval.ranking import RetrievalRequest, Retriever  # noqa: E402
from memsvc.kernel.models import NewMemory, SearchScope, utcnow  # noqa: E402
from memsvc.storage.database import Database  # noqa: E402
from memsvc.storage.sqlite_backend import SqliteMemoryBackend  # noqa: E402

OWNER = "owner-ws"
FACTS = 10_000


def _store(folder: Path, total: int) -> Database:
    """One owner of FACTS facts among `total` rows (other owners of 5,000 each)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    db = Database(folder / "memsvc.db")
    backend = SqliteMemoryBackend(db, working_set_bytes=0)
    backend.initialize()
    backend.create_many(
        [NewMemory(api_key_id=OWNER, content=f.content, key=f.key, type=f.type) for f in owner_facts(OWNER, FACTS)]
    )
    for n in range(max(0, total - FACTS) // 5000):
        other = f"other-{n:04d}"
        backend.create_many(
            [
                NewMemory(api_key_id=other, content=f.content, key=f.key, type=f.type)
                for f in owner_facts(other, 5000, seed=n + 1)
            ]
        )
    return db


def run(total: int = 200_000, calls: int = 300, rounds: int = 3) -> dict:
    folder = CACHE / "working_set"
    db = _store(folder, total)
    try:
        in_memory = SqliteMemoryBackend(db)
        store = SqliteMemoryBackend(db, working_set_bytes=0)
        asked = queries(calls)
        scope = SearchScope(api_key_id=OWNER, now=utcnow())
        cold = []
        for _ in range(5):
            in_memory.working_sets.clear()
            cold += timed(lambda: in_memory.search_keyword(scope, "warm up", 40), 1)
        status = in_memory.working_sets.status()
        legs = {
            "keyword search, working set": (lambda q: in_memory.search_keyword(scope, q, 40), asked),
            "keyword search, FTS5": (lambda q: store.search_keyword(scope, q, 40), asked),
        }
        retrievers = {"working set": Retriever(in_memory), "FTS5": Retriever(store)}
        for name, retriever in retrievers.items():
            legs[f"Retrieve (keywords, conversation signals), {name}"] = (
                lambda q, r=retriever: r.retrieve(RetrievalRequest(api_key_id=OWNER, query=q, retention_days=365)),
                asked,
            )
        measured = interleaved_n(legs, rounds)
        writer = SqliteMemoryBackend(Database(folder / "memsvc.db"), working_set_bytes=0)
        follow = []
        for i in range(100):  # another process's write, then this one's next search
            writer.create(NewMemory(api_key_id=OWNER, content=f"User parks the bicycle at rack {i}"))
            t0 = time.perf_counter()
            in_memory.search_keyword(SearchScope(api_key_id=OWNER, now=utcnow()), "bicycle rack", 40)
            follow.append((time.perf_counter() - t0) * 1000.0)
        writer.db.close()
        return {
            "total_rows": total,
            "owner_facts": FACTS,
            "calls_per_round": calls,
            "rounds": rounds,
            "cold_build_ms": {"p50": pct(cold, 50), "max": max(cold), "runs": len(cold)},
            "owner_set_bytes": status["bytes"],
            "after_a_write_ms": {"p50": pct(follow, 50), "p99": pct(follow, 99)},
            "legs": measured,
        }
    finally:
        db.close()


def table(out: dict) -> str:
    rows = [[name, fmt(leg["p50_ms"], 3), fmt(leg["p99_ms"], 3)] for name, leg in out["legs"].items()]
    speed = md_table(
        [f"owner of {out['owner_facts']:,} facts among {out['total_rows']:,} rows, in process", "p50 ms", "p99 ms"],
        rows,
    )
    ratio = (
        out["legs"]["keyword search, FTS5"]["p50_ms"]["median"]
        / out["legs"]["keyword search, working set"]["p50_ms"]["median"]
    )
    return (
        f"{speed}\n\nKeyword search p50: the working set is {ratio:.1f}× faster than FTS5 in the same run. "
        f"Cold build of the owner's set: {out['cold_build_ms']['p50']:.0f} ms p50 (max "
        f"{out['cold_build_ms']['max']:.0f}, {out['cold_build_ms']['runs']} builds); its size "
        f"{out['owner_set_bytes'] / 1e6:.1f} MB; a search right after another connection's write "
        f"(the change applied first): p50 {out['after_a_write_ms']['p50']:.2f} ms, "
        f"p99 {out['after_a_write_ms']['p99']:.2f} ms."
    )


def report(out: dict) -> tuple[str, list[Target]]:
    mb = out["owner_set_bytes"] / 1e6
    vectors_mb = FACTS * 256 * 4 / 1e6  # the vector cache's float32 matrix of the same owner (256 dims)
    return table(out), [
        Target(
            "Memory per 10k-fact owner: working set + vector matrix (static model)",
            mb + vectors_mb,
            "<=",
            30,
            " MB",
            f"working set {mb:.1f} MB (postings as dicts, ~190 B each; memories ~1.6 kB), "
            f"float32 vectors {vectors_mb:.1f} MB",
        ),
        Target(
            "Cold build of a 10k-fact owner's working set",
            out["cold_build_ms"]["p50"],
            "<=",
            100,
            " ms",
            "one snapshot read of every row, tokenized in Python",
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=200_000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    out = run(args.total, args.calls, args.rounds)
    text, found = report(out)
    out["targets"] = [t.as_dict() for t in found]
    write_results("working_set", out, text, "Working sets beside FTS5")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
