"""The hot-path dataset: 1,000 owners, 1M memories in total, three of them holding
1k / 10k / 100k facts; plus a 10k-row database holding only the 10k owner's facts (the
"other owners' data" baseline). Built once with a bulk path straight into SQLite and cached
under bench/.cache/ (`python bench/dataset.py` builds it; every bench reuses it).

The bulk path uses memsvc's own schema (migrations), settings store and vector index
`ensure`, then writes rows the way the service would have: `memories` rows in one big
transaction per chunk (the FTS5 triggers index them), vectors embedded in batches with the
static model and inserted into `vec_memories` (partition key = owner) in bulk.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from bench.common import CACHE, STATIC_CACHE  # noqa: E402
from bench.facts import owner_facts  # noqa: E402

VERSION = 1  # bump when the generator or layout changes: the cached DB is rebuilt
BIG_OWNERS = {"owner-0000": 100_000, "owner-0001": 10_000, "owner-0002": 1_000}
OWNER_BY_SIZE = {100_000: "owner-0000", 10_000: "owner-0001", 1_000: "owner-0002"}
CHUNK = 50_000
EMBED_BATCH = 4096
RETENTION_DAYS = 365
SPREAD_DAYS = 20


def db_dir(name: str) -> Path:
    return CACHE / name / "data"


def _settings_and_source(db):
    from memsvc.core.settings.memory import Settings
    from memsvc.embedding.resolver import EmbeddingConfig, Embeddings
    from memsvc.storage.settings_store import SqliteSettingsStore

    settings = Settings(SqliteSettingsStore(db))
    current = settings.update(
        {
            "enabled": True,
            "staticEnabled": True,
            "embeddingSource": "static",
            "strategy": "hybrid",
            "retentionDays": RETENTION_DAYS,
        }
    )
    embeddings = Embeddings(EmbeddingConfig(static_cache_dir=STATIC_CACHE))
    resolved = embeddings.resolve(current)
    resolved.source.warm()
    return resolved


def _plan(total: int, owners: int, seed: int, only: str | None) -> list[tuple[str, int]]:
    """(owner, count) pairs summing to `total`."""
    if only is not None:
        return [(only, BIG_OWNERS[only])]
    rest = total - sum(BIG_OWNERS.values())
    small = owners - len(BIG_OWNERS)
    plan = list(BIG_OWNERS.items())
    base, extra = divmod(rest, small)
    for i in range(small):
        plan.append((f"owner-{i + len(BIG_OWNERS):04d}", base + (1 if i < extra else 0)))
    return plan


def build(name: str, total: int, owners: int, only: str | None = None, seed: int = 1) -> dict:
    """Build bench/.cache/<name>/data/memsvc.db unless a complete one of this VERSION exists."""
    from memsvc.storage.database import Database, iso
    from memsvc.storage.migrations import apply_migrations
    from memsvc.storage.sqlite_vec import NEVER_US, unix_us
    from memsvc.storage.vector_index import LocalVectorIndex

    folder = db_dir(name)
    marker = folder.parent / "built.json"
    want = {"version": VERSION, "total": total, "owners": owners, "only": only, "seed": seed}
    if marker.is_file():
        info = json.loads(marker.read_text())
        built_at = datetime.fromisoformat(info["built_at"])
        fresh = datetime.now(UTC) - built_at < timedelta(days=RETENTION_DAYS - SPREAD_DAYS - 30)
        if all(info.get(k) == v for k, v in want.items()) and fresh and (folder / "memsvc.db").is_file():
            return info
    started = time.perf_counter()
    for stale in folder.glob("memsvc.db*") if folder.exists() else []:
        stale.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    db = Database(folder / "memsvc.db")
    apply_migrations(db)
    resolved = _settings_and_source(db)
    index = LocalVectorIndex(db)
    index.ensure(resolved.signature, resolved.dimensions)
    source = resolved.source

    plan = _plan(total, owners, seed, only)
    print(f"[dataset {name}] generating {sum(c for _, c in plan):,} facts for {len(plan)} owners", flush=True)
    t0 = time.perf_counter()
    rows: list[tuple[str, object]] = []
    for owner, count in plan:
        rows.extend((owner, f) for f in owner_facts(owner, count, seed))
    # Interleave owners, as real traffic does: an owner's memory_ids are spread over the file.
    random.Random(seed).shuffle(rows)
    gen_s = time.perf_counter() - t0
    now = datetime.now(UTC)
    rng = np.random.default_rng(seed)
    # Creation times spread over the last SPREAD_DAYS days, increasing with memory_id.
    offsets = np.sort(rng.uniform(0, SPREAD_DAYS * 86400, len(rows)))[::-1]
    print(f"[dataset {name}] generated in {gen_s:.1f} s; inserting", flush=True)

    insert = (
        "INSERT INTO memories (id, memory_id, api_key_id, session_id, type, key, content, metadata, "
        "created_at, updated_at, expires_at) VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, NULL)"
    )
    vec_insert = (
        "INSERT INTO vec_memories (rowid, api_key_id, session_id, created_us, expires_us, embedding) "
        "VALUES (?, ?, '', ?, ?, ?)"
    )
    t_rows = t_embed = t_vec = 0.0
    for start in range(0, len(rows), CHUNK):
        part = rows[start : start + CHUNK]
        created = [now - timedelta(seconds=float(offsets[start + i])) for i in range(len(part))]
        t1 = time.perf_counter()
        values = []
        for i, (owner, fact) in enumerate(part):
            mid = start + i + 1
            meta = json.dumps({"category": fact.key.split(":", 1)[0], "source": "bench"}, separators=(",", ":"))
            stamp = iso(created[i])
            values.append(
                (
                    str(uuid.UUID(int=random.getrandbits(128), version=4)),
                    mid,
                    owner,
                    fact.type,
                    fact.key,
                    fact.content,
                    meta,
                    stamp,
                    stamp,
                )
            )
        with db.write() as conn:
            conn.executemany(insert, values)
        t2 = time.perf_counter()
        texts = [fact.content for _, fact in part]
        unique = list(dict.fromkeys(texts))
        vectors = np.concatenate(
            [source.embed(unique[i : i + EMBED_BATCH]) for i in range(0, len(unique), EMBED_BATCH)]
        )
        position = {t: i for i, t in enumerate(unique)}
        t3 = time.perf_counter()
        vec_values = [
            (start + i + 1, owner, unix_us(created[i]), NEVER_US, vectors[position[fact.content]].tobytes())
            for i, (owner, fact) in enumerate(part)
        ]
        with db.write() as conn:
            conn.executemany(vec_insert, vec_values)
        t4 = time.perf_counter()
        t_rows, t_embed, t_vec = t_rows + t2 - t1, t_embed + t3 - t2, t_vec + t4 - t3
        done = start + len(part)
        print(f"[dataset {name}] {done:,}/{len(rows):,} rows ({time.perf_counter() - started:.0f} s)", flush=True)
    with db.write() as conn:
        conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('optimize')")
    db.close()
    info = {
        **want,
        "built_at": datetime.now(UTC).isoformat(),
        "rows": len(rows),
        "seconds": round(time.perf_counter() - started, 1),
        "generate_s": round(gen_s, 1),
        "insert_rows_s": round(t_rows, 1),
        "embed_s": round(t_embed, 1),
        "insert_vectors_s": round(t_vec, 1),
        "signature": resolved.signature,
        "file_mb": round(sum(p.stat().st_size for p in folder.glob("memsvc.db*")) / 1e6, 1),
    }
    marker.write_text(json.dumps(info, indent=2))
    print(f"[dataset {name}] built in {info['seconds']} s: {info}", flush=True)
    return info


def ensure_all(total: int = 1_000_000, owners: int = 1000) -> dict:
    """Both hot-path databases (cached)."""
    return {"hot_1m": build("hot_1m", total, owners), "hot_10k": build("hot_10k", 10_000, 1, only="owner-0001")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=1_000_000)
    parser.add_argument("--owners", type=int, default=1000)
    args = parser.parse_args()
    print(json.dumps(ensure_all(args.total, args.owners), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
