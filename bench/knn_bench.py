"""Vector search floor: KNN top-10 over one owner's 100k × 384 vectors — the production path
(LocalVectorIndex with its per-owner in-memory matrix), sqlite-vec float32 and int8 scans,
and a NumPy brute-force scan (the memory-bandwidth floor) — with recall@10 of each against
the exact answer (float64).

Vectors: 384-d, clustered like sentence embeddings (1,000 topic centroids plus noise, unit
length); queries are fresh points near the data. Two databases (float32, int8) are built
once and cached under bench/.cache/knn_*.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from bench.common import CACHE, Target, agg, fmt, md_table, pct, write_results  # noqa: E402

OWNER = "knn-owner"
SIG = "bench:synthetic-384:384"
VERSION = 1


def vectors(n: int, dim: int, seed: int = 11) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centroids = rng.standard_normal((1000, dim)).astype(np.float32)
    data = centroids[rng.integers(0, 1000, n)] + 0.7 * rng.standard_normal((n, dim)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    q = centroids[rng.integers(0, 1000, 200)] + 0.7 * rng.standard_normal((200, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return data, q


def build(quantization: str, data: np.ndarray) -> Path:
    from memsvc.storage.database import Database, iso
    from memsvc.storage.migrations import apply_migrations
    from memsvc.storage.sqlite_vec import NEVER_US, unix_us
    from memsvc.storage.vector_index import LocalVectorIndex

    folder = CACHE / f"knn_{quantization}"
    marker = folder / "built.json"
    path = folder / "memsvc.db"
    want = {"version": VERSION, "n": len(data), "dim": data.shape[1]}
    if marker.is_file() and path.is_file() and json.loads(marker.read_text()).get("want") == want:
        db = Database(path)
        apply_migrations(db)  # a corpus cached by an older schema is brought up to date, as the server would
        db.close()
        return path
    started = time.perf_counter()
    for stale in folder.glob("memsvc.db*") if folder.exists() else []:
        stale.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    db = Database(path)
    apply_migrations(db)
    index = LocalVectorIndex(db, quantization=quantization)
    index.ensure(SIG, data.shape[1])
    now = datetime.now(UTC) - timedelta(days=1)
    stamp = iso(now)
    with db.write() as conn:
        conn.executemany(
            "INSERT INTO memories (id, memory_id, api_key_id, type, content, metadata, created_at, updated_at) "
            "VALUES (?, ?, ?, 'factual', ?, '{}', ?, ?)",
            [(str(uuid.uuid4()), i + 1, OWNER, f"vector memory {i}", stamp, stamp) for i in range(len(data))],
        )
    value = "vec_quantize_int8(?, 'unit')" if quantization == "int8" else "?"
    scaled = data / np.abs(data).max(axis=1, keepdims=True) if quantization == "int8" else data
    with db.write() as conn:
        conn.executemany(
            "INSERT INTO vec_memories (rowid, api_key_id, session_id, created_us, expires_us, embedding) "
            f"VALUES (?, ?, '', ?, ?, {value})",
            [(i + 1, OWNER, unix_us(now), NEVER_US, scaled[i].astype(np.float32).tobytes()) for i in range(len(data))],
        )
    db.close()
    marker.write_text(json.dumps({"want": want, "seconds": round(time.perf_counter() - started, 1)}))
    return path


def recall(found: list[list[int]], exact: list[list[int]]) -> float:
    return float(np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact)]))


def run(n: int = 100_000, dim: int = 384, k: int = 10, queries: int = 30, rounds: int = 3) -> dict:
    from memsvc.kernel.models import SearchScope
    from memsvc.storage.database import Database
    from memsvc.storage.vector_index import LocalVectorIndex

    data, qs = vectors(n, dim)
    qs = qs[:queries]
    t0 = time.perf_counter()
    paths = {q: build(q, data) for q in ("none", "int8")}
    build_s = time.perf_counter() - t0
    exact = [list(np.argsort(-(data.astype(np.float64) @ q.astype(np.float64)), kind="stable")[:k] + 1) for q in qs]
    scope = SearchScope(OWNER, datetime.now(UTC))

    def numpy_floor(q: np.ndarray) -> list[int]:
        sims = data @ q
        top = np.argpartition(-sims, k - 1)[:k]
        return list(top[np.argsort(-sims[top])] + 1)

    db_f = Database(paths["none"])
    db_i = Database(paths["int8"])
    production = LocalVectorIndex(db_f, cache_bytes=256 * 1_000_000)  # App's default MEMORY_VEC_CACHE_MB
    t1 = time.perf_counter()
    production.search(scope, qs[0], k)  # first search loads the owner's matrix
    cold_load_ms = (time.perf_counter() - t1) * 1000
    variants = {
        "numpy brute force (floor)": numpy_floor,
        "production path (LocalVectorIndex + per-owner matrix)": lambda q: [
            h.memory_id for h in production.search(scope, q, k)
        ],
        "sqlite-vec float32 scan": lambda q: [h.memory_id for h in LocalVectorIndex(db_f).search(scope, q, k)],
        "sqlite-vec int8 scan": lambda q: [
            h.memory_id for h in LocalVectorIndex(db_i, quantization="int8").search(scope, q, k)
        ],
    }
    results: dict[str, dict] = {}
    for name, fn in variants.items():
        fn(qs[0])  # warm
        p50s, found = [], []
        for _ in range(rounds):
            times = []
            found = []
            for q in qs:
                started = time.perf_counter()
                found.append(fn(q))
                times.append((time.perf_counter() - started) * 1000)
            p50s.append(pct(times, 50))
        results[name] = {"p50_ms": agg(p50s), "recall_at_10": recall(found, exact)}
    db_f.close()
    db_i.close()
    floor = results["numpy brute force (floor)"]["p50_ms"]["median"]
    for r in results.values():
        r["x_floor"] = r["p50_ms"]["median"] / floor
    prod = results["production path (LocalVectorIndex + per-owner matrix)"]
    targets = [
        Target(
            "KNN 100k×384: production p50 vs NumPy floor",
            prod["x_floor"],
            "<=",
            2.5,
            "×",
            f"recall@10 {prod['recall_at_10']:.3f}",
        ),
        Target("KNN 100k×384: production recall@10", prod["recall_at_10"], ">=", 0.95, ""),
    ]
    rows = [
        [name, fmt(r["p50_ms"], 2), f"{r['x_floor']:.2f}×", f"{r['recall_at_10']:.3f}"] for name, r in results.items()
    ]
    table = md_table(["KNN top-10, one owner, 100k × 384", "p50 ms median (min–max)", "vs floor", "recall@10"], rows)
    table += (
        f"\n\nProduction path cold start (first search loads the owner's {n:,} vectors from vec0): "
        f"{cold_load_ms:.0f} ms. {queries} queries × {rounds} rounds."
    )
    return {
        "results": results,
        "cold_load_ms": cold_load_ms,
        "build_s": build_s,
        "n": n,
        "dim": dim,
        "table": table,
        "_targets": targets,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    out = run(args.n, queries=args.queries, rounds=args.rounds)
    targets = out.pop("_targets")
    out["targets"] = [t.as_dict() for t in targets]
    write_results(
        "knn",
        out,
        out["table"]
        + "\n\n"
        + "\n".join(
            f"- {t.name}: {t.value:.3g}{t.unit} (goal {t.op} {t.limit:g}{t.unit}) **{'PASS' if t.passed else 'MISS'}**"
            for t in targets
        ),
        "Vector search floor (KNN)",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
