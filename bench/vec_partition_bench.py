"""sqlite-vec tier: does a KNN for one owner read only that owner's vectors?

Setup (per vec0 chunk_size): owner A has 5 vectors far from the query, owner B has N vectors
close to it, plus M small owners of 5 vectors each. Printed per chunk size:

- correctness: A's KNN (k=5) returns exactly A's 5 (a filter after a global top-k would
  return none of them);
- time of a KNN for A, for a small owner, for B and for everyone (global scope), and the
  ratio A / B: when partitioning works, A's query costs a tiny fraction of B's, because it
  reads A's chunk only;
- file size (each partition allocates whole chunks: chunk_size × dim × 4 bytes).

Timings are printed and saved, never asserted (these machines are noisy: compare ratios).

    .venv/bin/python bench/vec_partition_bench.py [--big 5000] [--owners 200] [--dim 384]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from memsvc.kernel.models import NewMemory, SearchScope, utcnow
from memsvc.kernel.vector_index import VectorRow
from memsvc.storage.database import Database
from memsvc.storage.sqlite_backend import SqliteMemoryBackend
from memsvc.storage.vector_index import LocalVectorIndex


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _timed(fn, repeat: int) -> float:
    fn()  # warm up
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def run(chunk_size: int, big: int, owners: int, dim: int, quantization: str, repeat: int) -> dict:
    rng = np.random.default_rng(0)
    query = _unit(rng.standard_normal(dim))
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "bench.db")
        backend = SqliteMemoryBackend(db)
        backend.initialize()
        index = LocalVectorIndex(db, chunk_size=chunk_size, quantization=quantization)
        index.ensure(f"bench:random:{dim}", dim)

        def add(owner: str, vectors: np.ndarray) -> list[int]:
            made = backend.create_many(
                [NewMemory(api_key_id=owner, content=f"{owner} {i}") for i in range(len(vectors))]
            )
            mems = [backend.get(r.id) for r in made]
            index.upsert([VectorRow.from_memory(m, v) for m, v in zip(mems, vectors)])
            return [m.memory_id for m in mems]

        a_ids = add("A", _unit(-query + 0.3 * rng.standard_normal((5, dim))))
        add("B", _unit(query + 0.05 * rng.standard_normal((big, dim))))
        for o in range(owners):
            add(f"small{o}", _unit(rng.standard_normal((5, dim))))
        now = utcnow()
        got_a = {h.memory_id for h in index.search(SearchScope("A", now), query, 5)}
        got_global = {h.memory_id for h in index.search(SearchScope(None, now), query, 5)}
        result = {
            "chunk_size": chunk_size,
            "quantization": quantization,
            "dim": dim,
            "big_owner_vectors": big,
            "small_owners": owners,
            "vectors": index.count(),
            "a_knn_returns_a_5": got_a == set(a_ids),
            "global_top5_contains_any_a": bool(got_global & set(a_ids)),
            "ms_owner_A": _timed(lambda: index.search(SearchScope("A", now), query, 5), repeat),
            "ms_small_owner": _timed(lambda: index.search(SearchScope("small0", now), query, 5), repeat),
            "ms_owner_B": _timed(lambda: index.search(SearchScope("B", now), query, 20), repeat),
            "ms_global": _timed(lambda: index.search(SearchScope(None, now), query, 20), repeat),
        }
        result["ratio_A_over_B"] = result["ms_owner_A"] / result["ms_owner_B"]
        db.close()
        result["file_mb"] = round(sum(os.path.getsize(p) for p in Path(tmp).glob("bench.db*")) / 1e6, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", type=int, default=5000)
    parser.add_argument("--owners", type=int, default=200)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--chunk-sizes", default="32,1024")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results") / "vec_partition.json"))
    args = parser.parse_args(argv)
    rows = []
    for quantization in ("none", "int8"):
        for cs in (int(c) for c in args.chunk_sizes.split(",")):
            rows.append(run(cs, args.big, args.owners, args.dim, quantization, args.repeat))
    cols = [
        "quantization",
        "chunk_size",
        "vectors",
        "a_knn_returns_a_5",
        "global_top5_contains_any_a",
        "ms_owner_A",
        "ms_small_owner",
        "ms_owner_B",
        "ms_global",
        "ratio_A_over_B",
        "file_mb",
    ]
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"python": sys.version.split()[0], "results": rows}, indent=2))
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
