"""Reindex throughput per embedding source (static, MiniLM) through the real Reindex stream
(embed in batches + vec0 upsert + progress), beside the raw embedding rate of the same
source on the same texts in the bench process (the ceiling: no storage at all).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import CACHE, STATIC_CACHE, ServerProc, Stubs, Target, agg, fmt, md_table, write_results  # noqa: E402
from bench.facts import owner_facts  # noqa: E402


def _seed(folder: Path, n: int) -> list[str]:
    """n memories written straight into a fresh database (bulk, no vectors yet)."""
    import uuid

    from memsvc.kernel.models import utcnow
    from memsvc.storage.database import Database, iso
    from memsvc.storage.migrations import apply_migrations

    shutil.rmtree(folder, ignore_errors=True)
    db = Database(folder / "data" / "memsvc.db")
    apply_migrations(db)
    facts = owner_facts("reindexed", n, seed=4)
    stamp = iso(utcnow())
    with db.write() as conn:
        conn.executemany(
            "INSERT INTO memories (id, memory_id, api_key_id, type, key, content, metadata, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, '{}', ?, ?)",
            [
                (str(uuid.uuid4()), i + 1, f"owner-{i % 100}", f.type, f.key, f.content, stamp, stamp)
                for i, f in enumerate(facts)
            ],
        )
    db.close()
    return [f.content for f in facts]


def _reindex(port: int, settings: dict, limit: int, rounds: int) -> dict:
    from google.protobuf import json_format

    from memsvc.v1 import engine_pb2, settings_pb2

    stubs = Stubs(port)
    stubs.settings.UpdateMemorySettings(
        json_format.ParseDict(
            {"settings": {"enabled": True, "retentionDays": 365, **settings}},
            settings_pb2.UpdateMemorySettingsRequest(),
        )
    )
    t0 = time.perf_counter()
    deadline = t0 + 180  # the model loads lazily: wait until a search runs on vectors
    while time.perf_counter() < deadline:
        r = stubs.engine.Retrieve(
            engine_pb2.RetrieveRequest(api_key_id="owner-1", query="warm up", strategy="semantic")
        )
        if r.resolution.strategy_used == "vector":
            break
        time.sleep(0.1)
    load_s = time.perf_counter() - t0
    rates, stream_rates = [], []
    processed = 0
    for _ in range(rounds):
        t1 = time.perf_counter()
        last = None
        for last in stubs.engine.Reindex(engine_pb2.ReindexRequest(force=True, limit=limit)):
            pass
        elapsed = time.perf_counter() - t1
        processed = last.processed
        rates.append(last.processed / elapsed)
        stream_rates.append(last.rate_per_second)
        if last.state != "done" or last.errors:
            raise RuntimeError(f"reindex ended {last.state} with {last.errors} errors")
    stubs.close()
    return {
        "per_s": agg(rates),
        "server_reported_per_s": agg(stream_rates),
        "processed": processed,
        "model_ready_s": load_s,
    }


def _raw(kind: str, texts: list[str], rounds: int) -> dict:
    from memsvc.embedding.sources import StaticSource, TransformersSource

    source = StaticSource(None, STATIC_CACHE) if kind == "static" else TransformersSource()
    source.warm()
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(0, len(texts), 256):  # the reindex batch size
            source.embed(texts[i : i + 256])
        rates.append(len(texts) / (time.perf_counter() - t0))
    return {"per_s": agg(rates)}


def run(static_n: int = 20_000, minilm_n: int = 1_500, rounds: int = 3) -> dict:
    folder = CACHE / "reindex"
    texts = _seed(folder, static_n)
    out: dict = {}
    with ServerProc(folder / "data") as server:
        out["static"] = _reindex(server.port, {"embeddingSource": "static", "staticEnabled": True}, 0, rounds)
        out["minilm"] = _reindex(
            server.port,
            {"embeddingSource": "transformers", "transformersEnabled": True, "staticEnabled": False},
            minilm_n,
            rounds,
        )
    out["static_raw"] = _raw("static", texts, rounds)
    out["minilm_raw"] = _raw("transformers", texts[:minilm_n], 1)
    shutil.rmtree(folder, ignore_errors=True)
    return out


def report(out: dict) -> tuple[str, list[Target]]:
    rows = [
        [
            "static (model2vec, 256-d)",
            f"{out['static']['processed']:,}",
            fmt(out["static"]["per_s"], 0),
            fmt(out["static_raw"]["per_s"], 0),
        ],
        [
            "MiniLM (all-MiniLM-L6-v2, 384-d)",
            f"{out['minilm']['processed']:,}",
            fmt(out["minilm"]["per_s"], 0),
            fmt(out["minilm_raw"]["per_s"], 0),
        ],
    ]
    table = md_table(["Reindex (force) over gRPC", "memories", "memories/s", "raw embedding only, same texts"], rows)
    targets = [
        Target("Reindex static", out["static"]["per_s"]["median"], ">=", 5000, "/s"),
        Target("Reindex MiniLM", out["minilm"]["per_s"]["median"], ">=", 250, "/s"),
    ]
    return table, targets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--static-n", type=int, default=20_000)
    parser.add_argument("--minilm-n", type=int, default=1_500)
    args = parser.parse_args()
    out = run(args.static_n, args.minilm_n)
    table, targets = report(out)
    out["targets"] = [t.as_dict() for t in targets]
    write_results("reindex", out, table, "Reindex throughput")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
