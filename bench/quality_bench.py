"""Retrieval quality on a labeled set (bench/quality_set.py): recall@5, recall@10 and MRR
for exact ("recent"), keyword (FTS5), semantic and hybrid with the static model and with
MiniLM — with the per-query latency of each beside it, so quality is never traded for
speed silently. The keyword-only row is also measured on a PostgreSQL store (a server the
bench starts, tests/support/postgres.py): its full-text search ranking beside FTS5's. Hybrid is measured with each candidate fusion (the
default, equal RRF, weighted RRF, RRF with a small k, a convex combination of normalized
scores) over the same two lists. Also the FTS5 tokenizer and query-building choices,
measured on the same set.

Runs the real engine in process (App over a fresh database; retrieval through
Engine.retrieve, Retrieve's own code with its default relevance floor, and once more with
minScore 0 for the default fusion; the other fusions through a Retriever over the same
backend and vector tier that differs only in its fusion, unfloored).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import CACHE, STATIC_CACHE, Target, md_table, pct, postgres, targets_table, write_results
from bench.facts import owner_facts  # noqa: E402
from bench.quality_set import DISTRACTORS_PER_OWNER, LABELED, OWNERS  # noqa: E402
from memsvc.core.retrieval.ranking import DEFAULT_FUSION, FUSION_RRF, FUSIONS, Candidate, Fusion, gated_convex, rrf  # noqa: E402

OFF = {"embeddingSource": "auto", "staticEnabled": False, "transformersEnabled": False}
STATIC = {"embeddingSource": "static", "staticEnabled": True, "transformersEnabled": False}
MINILM = {"embeddingSource": "transformers", "staticEnabled": False, "transformersEnabled": True}


def _weighted_rrf(keyword: list[Candidate], vector: list[Candidate], k: int) -> dict[str, float]:
    """Σ w/(k + rank) with the vector list weighted 2 (counted twice), the keyword list 1."""
    return rrf([[c.id for c in keyword], [c.id for c in vector], [c.id for c in vector]], k)


def _small_k_rrf(keyword: list[Candidate], vector: list[Candidate], k: int) -> dict[str, float]:
    return FUSIONS[FUSION_RRF].fuse(keyword, vector, 10)


def _min_max(candidates: list[Candidate]) -> dict[str, float]:
    low, high = min((c.score for c in candidates), default=0.0), max((c.score for c in candidates), default=0.0)
    return {c.id: (c.score - low) / (high - low) if high > low else 1.0 for c in candidates}


def _convex(keyword: list[Candidate], vector: list[Candidate], k: int) -> dict[str, float]:
    """0.7 × min-max-normalized vector score + 0.3 × min-max-normalized keyword score."""
    kw, vec = _min_max(keyword), _min_max(vector)
    return {i: 0.7 * vec.get(i, 0.0) + 0.3 * kw.get(i, 0.0) for i in kw | vec}


def _ungated_convex(keyword: list[Candidate], vector: list[Candidate], k: int) -> dict[str, float]:
    """The default's score shares (keyword weight 0.8) with every keyword match counted, weak ones too."""
    return gated_convex()([Candidate(c.id, c.score, True) for c in keyword], vector, k)


#: The fusion slot of a row measured through Retrieve with minScore 0 (no relevance floor).
NO_FLOOR = "minScore 0"
CANDIDATE_FUSIONS = [  # measured beside the default; None = the server's own (Engine.retrieve)
    (f"{DEFAULT_FUSION} (default)", None),
    (f"{DEFAULT_FUSION} (default), no floor (minScore 0)", NO_FLOOR),
    (f"{FUSION_RRF} (equal)", FUSIONS[FUSION_RRF]),
    ("weighted RRF, vector 2 : keyword 1", Fusion("weighted", _weighted_rrf)),
    ("RRF, k=10", Fusion("rrf-k10", _small_k_rrf)),
    ("convex 0.7 vector + 0.3 keyword", Fusion("convex", _convex)),
    ("gated-convex without the gate", Fusion("ungated-convex", _ungated_convex)),
]
KEYWORD_LABEL = "keyword (FTS5)"
CONFIGS = [  # (label, settings, strategy, fusion)
    ("exact (recent + keyword score)", OFF, "recent", None),
    (KEYWORD_LABEL, OFF, "semantic", None),
    ("semantic, static", STATIC, "semantic", None),
    *((f"hybrid {name}, static", STATIC, "hybrid", fusion) for name, fusion in CANDIDATE_FUSIONS),
    ("semantic, MiniLM", MINILM, "semantic", None),
    *((f"hybrid {name}, MiniLM", MINILM, "hybrid", fusion) for name, fusion in CANDIDATE_FUSIONS),
]
#: Measured on a PostgreSQL store too (with_postgres_keyword).
PG_CONFIGS = [("keyword only, PostgreSQL store", OFF, "semantic", None)]


def _metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks)
    return {
        "recall@5": sum(1 for r in ranks if r is not None and r <= 5) / n,
        "recall@10": sum(1 for r in ranks if r is not None and r <= 10) / n,
        "mrr": sum(1.0 / r for r in ranks if r is not None) / n,
    }


def _wait_reindex(app, timeout_s: float = 300) -> None:
    job = app.reindexer.start(force=True)
    deadline = time.monotonic() + timeout_s
    while not job.finished and time.monotonic() < deadline:
        time.sleep(0.05)


def _searcher(app, config, strategy: str, fusion: Fusion | str | None) -> Callable[[str, str], Any]:
    """(query, owner) → the top 10: the server's own Retrieve (Engine.retrieve, with its
    default relevance floor, or none for NO_FLOOR), or with another fusion a Retriever over
    the same backend and vector tier."""
    from memsvc.core.retrieval.ranking import RetrievalRequest, Retriever

    if fusion is None or fusion == NO_FLOOR:
        min_score = 0.0 if fusion == NO_FLOOR else None
        return lambda query, owner: app.engine.retrieve(
            owner, query, strategy=strategy, max_tokens=16000, limit=10, min_score=min_score
        )
    retriever = Retriever(app.backend, vectors=app.vectors, rrf_k=config.rrf_k, top_k=config.vec_top_k, fusion=fusion)
    return lambda query, owner: retriever.retrieve(
        RetrievalRequest(
            api_key_id=owner,
            query=query,
            strategy=strategy,
            max_tokens=16000,
            retention_days=app.settings.get().retention_days,
            limit=10,
        )
    )


def engine_quality(configs: list = CONFIGS, database_url: str | None = None) -> tuple[dict, dict[str, str]]:
    """Every configuration's figures over one fresh store: SQLite under bench/.cache, or
    the PostgreSQL database of `database_url`."""
    from memsvc.app import App
    from memsvc.config import Config
    from memsvc.kernel.models import NewMemory

    folder = CACHE / ("quality" if database_url is None else "quality-postgres")
    shutil.rmtree(folder, ignore_errors=True)
    # auto_static off: the keyword row's settings (embeddingSource auto, no model enabled)
    # must mean keywords only, not the static model the auto rule would otherwise pick.
    config = Config(
        data_dir=folder / "data",
        grpc_port=0,
        gateway=False,
        log_level="WARNING",
        static_cache_dir=STATIC_CACHE,
        auto_static=False,
        database_url=database_url,
    )
    app = App.open(config)
    ids: dict[tuple[str, str], str] = {}
    try:
        app.settings.update({"enabled": True, "retentionDays": 365, "maxTokens": 16000, **OFF})
        rng = random.Random(3)
        drafts = []
        for owner in OWNERS:
            for fact in owner_facts(owner, DISTRACTORS_PER_OWNER, seed=5):
                drafts.append(NewMemory(api_key_id=owner, content=fact.content, key=fact.key, type=fact.type))
        labeled = [NewMemory(api_key_id=o, content=c, key=f"fact:{i}") for i, (o, c, _, _) in enumerate(LABELED)]
        everything = drafts + labeled
        rng.shuffle(everything)
        for draft in everything:
            result = app.memories.create(draft)
            if draft.key and draft.key.startswith("fact:"):
                ids[(draft.api_key_id, draft.content)] = result.id
        results: dict[str, dict] = {}
        current = None
        for label, settings, strategy, fusion in configs:
            if settings is not current:
                app.settings.update(settings)
                app.vectors.embeddings.warm(app.settings.get())
                if settings is not OFF:
                    _wait_reindex(app)
                current = settings
            search = _searcher(app, config, strategy, fusion)
            per_kind: dict[str, list[int | None]] = {"keyword": [], "paraphrase": []}
            times: list[float] = []
            used = set()
            for owner, content, kw, para in LABELED:
                for kind, query in (("keyword", kw), ("paraphrase", para)):
                    t0 = time.perf_counter()
                    res = search(query, owner)
                    times.append((time.perf_counter() - t0) * 1000)
                    used.add(res.resolution.strategy_used)
                    got = [item.memory.id for item in res.items]
                    target = ids[(owner, content)]
                    per_kind[kind].append(got.index(target) + 1 if target in got else None)
            results[label] = {
                "keyword": _metrics(per_kind["keyword"]),
                "paraphrase": _metrics(per_kind["paraphrase"]),
                "all": _metrics(per_kind["keyword"] + per_kind["paraphrase"]),
                "p50_ms": pct(times, 50),
                "p99_ms": pct(times, 99),
                "strategy_used": sorted(used),
            }
    finally:
        app.close()
    return results, {}


# ---------------------------------------------------------------------- FTS5 tokenizer choices


def tokenizer_choices() -> dict:
    """Keyword-only ranking (bm25) on the same set, per tokenizer and query building."""
    import apsw

    from memsvc.kernel.text import STOPWORDS, normalize, terms

    conn = apsw.Connection(":memory:")
    docs: list[tuple[int, str, str]] = []
    target: dict[tuple[str, str], int] = {}
    for owner in OWNERS:
        for fact in owner_facts(owner, DISTRACTORS_PER_OWNER, seed=5):
            docs.append((len(docs) + 1, owner, fact.content))
    for owner, content, _, _ in LABELED:
        docs.append((len(docs) + 1, owner, content))
        target[(owner, content)] = len(docs)
    tokenizers = {
        "porter unicode61 (ours)": "porter unicode61 remove_diacritics 2",
        "unicode61, no stemming": "unicode61 remove_diacritics 2",
        "trigram": "trigram",
    }
    for i, tok in enumerate(tokenizers.values()):
        conn.execute(f"CREATE VIRTUAL TABLE f{i} USING fts5(content, owner UNINDEXED, tokenize='{tok}')")
        conn.executemany(f"INSERT INTO f{i}(rowid, content, owner) VALUES (?, ?, ?)", [(d, c, o) for d, o, c in docs])

    def q(words: list[str], op: str) -> str | None:
        return f" {op} ".join('"' + w.replace('"', '""') + '"' for w in words) or None

    import re

    builders = {
        "terms without stopwords, OR (ours)": lambda text: q(
            list(terms(text).words) + list(terms(text).cjk_runs), "OR"
        ),
        "every word, OR": lambda text: q(re.findall(r"[^\W_]+", normalize(text)), "OR"),
        "terms without stopwords, AND": lambda text: q(list(terms(text).words) + list(terms(text).cjk_runs), "AND"),
    }
    out = {}
    for ti, tok_label in enumerate(tokenizers):
        for b_label, build in builders.items():
            ranks = {"keyword": [], "paraphrase": []}
            for owner, content, kw, para in LABELED:
                for kind, text in (("keyword", kw), ("paraphrase", para)):
                    query = build(text)
                    got: list[int] = []
                    if query:
                        try:
                            got = [
                                r[0]
                                for r in conn.execute(
                                    f"SELECT rowid FROM f{ti} WHERE f{ti} MATCH ? AND owner = ? ORDER BY rank LIMIT 10",
                                    (query, owner),
                                )
                            ]
                        except apsw.Error:
                            got = []
                    t = target[(owner, content)]
                    ranks[kind].append(got.index(t) + 1 if t in got else None)
            out[f"{tok_label} | {b_label}"] = {k: _metrics(v) for k, v in ranks.items()}
    _ = STOPWORDS
    return out


def with_postgres_keyword(engine: dict) -> dict:
    """The keyword-only row measured again on a PostgreSQL store (its full-text search
    instead of FTS5), the same facts, the same method, placed beside the SQLite one."""
    with postgres() as pg:
        found, _ = engine_quality(PG_CONFIGS, pg.create_database("memsvc_quality"))
    out = {}
    for label, row in engine.items():
        out[label] = row
        if label == KEYWORD_LABEL:
            out.update(found)
    return out


def run() -> dict:
    engine, _ = engine_quality()
    engine = with_postgres_keyword(engine)
    return {
        "engine": engine,
        "tokenizers": tokenizer_choices(),
        "labeled": len(LABELED),
        "distractors": DISTRACTORS_PER_OWNER * len(OWNERS),
        "owners": len(OWNERS),
    }


def report(out: dict) -> tuple[str, list[Target]]:
    rows = []
    for label, r in out["engine"].items():
        rows.append(
            [
                label,
                f"{r['all']['recall@5']:.2f}",
                f"{r['all']['recall@10']:.2f}",
                f"{r['all']['mrr']:.2f}",
                f"{r['keyword']['mrr']:.2f}",
                f"{r['paraphrase']['mrr']:.2f}",
                f"{r['p50_ms']:.2f}",
                ", ".join(r["strategy_used"]),
            ]
        )
    table = md_table(
        [
            "strategy",
            "recall@5",
            "recall@10",
            "MRR",
            "MRR keyword q.",
            "MRR paraphrase q.",
            "p50 ms/query",
            "tier used",
        ],
        rows,
    )
    table += (
        f"\n\n{out['labeled']} labeled facts × 2 queries (keyword, paraphrase), {out['owners']} owners, "
        f"{out['distractors']} distractors. In process (Engine.retrieve: Retrieve with its default "
        "relevance floor unless the row says minScore 0), so the latency excludes gRPC. "
        "Hybrid rows fuse the same two lists (keyword best 40 by relevance, vector top 20) and differ only "
        "in the fusion: gated-convex (the default) counts the keyword list in full when it holds a strong "
        "match (the whole query phrase or two query terms occur) and not at all when it holds none; "
        "gated-rrf counts only the strong matches; rrf is plain equal-weight RRF (MEMORY_FUSION=rrf)."
    )
    trows = [
        [
            k.split(" | ")[0],
            k.split(" | ")[1],
            f"{v['keyword']['recall@10']:.2f}",
            f"{v['keyword']['mrr']:.2f}",
            f"{v['paraphrase']['recall@10']:.2f}",
            f"{v['paraphrase']['mrr']:.2f}",
        ]
        for k, v in out["tokenizers"].items()
    ]
    table += "\n\n" + md_table(
        [
            "FTS5 tokenizer (bm25 only)",
            "query building",
            "recall@10 keyword q.",
            "MRR keyword q.",
            "recall@10 paraphrase q.",
            "MRR paraphrase q.",
        ],
        trows,
    )
    engine = out["engine"]
    targets = [
        Target(
            "paraphrase bench hybrid static (default) recall@10",
            engine[f"hybrid {DEFAULT_FUSION} (default), static"]["all"]["recall@10"],
            ">=",
            0.90,
        ),
        Target(
            "paraphrase bench hybrid MiniLM (default) recall@10",
            engine[f"hybrid {DEFAULT_FUSION} (default), MiniLM"]["all"]["recall@10"],
            ">=",
            1.0,
        ),
    ]
    table += "\n\n" + targets_table(targets)
    return table, targets


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    out = run()
    table, targets = report(out)
    out["targets"] = [t.as_dict() for t in targets]
    write_results("quality", out, table, "Retrieval quality")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
