"""Duplicates merged on write: precision and recall of memsvc.core.dedup on a labelled set.

    .venv/bin/python bench/dedup_bench.py

The set is bench/dedup/pairs.jsonl (bench/dedup/README.md): pairs of an existing memory `a`
and a new one `b`, labelled `duplicate` when merging b into a loses nothing. A wrong merge
loses a memory, so the target is precision >= 0.98; recall is reported.

For each pair: the text's verdict (`compare`: identical, vetoed, novelty, extra words,
coverage) and the cosine of the two texts under (a) the default static model (what a fresh
server embeds with: model2vec distilled from MiniLM, built by `memsvc build-models`) and (b)
MiniLM (the local "transformers" source). Then a grid search over `DedupRule` on the even
ids, maximizing recall subject to precision >= 0.98, checked on the odd ids:
- per embedding (what each model could do alone);
- jointly (one rule that keeps precision >= 0.98 under both models: the DEFAULT_RULE
  candidate);
- text only (cosine None: a keyword-search candidate).
The rule the code ships (memsvc.core.dedup.DEFAULT_RULE) is reported per half, per
category and per language for each embedding and for text only; its targets are what
run_all lists. Ties in the search go to the stricter rule (higher cosine floors, lower
novelty), so a rule is never looser than the even half asked for.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import BENCH, Target, md_table, write_results  # noqa: E402
from memsvc.core.dedup import DEFAULT_RULE, Comparison, DedupRule, compare  # noqa: E402

SET = BENCH / "dedup" / "pairs.jsonl"
PRECISION = 0.98
HALVES = ("even", "odd")
MODELS = ("static", "minilm")
LANGUAGES = ("en", "ja", "zh", "ru")
#: The set was written in three batches (bench/dedup/README.md): the first while the text
#: rules were developed (every pair looked at), the second after they were frozen (it found
#: three holes, fixed), the third after those fixes (not tuned on).
#: The fit DEFAULT_RULE takes its values from: one rule for both models and for no cosine, the
#: paraphrase path off (with it on, the even ids' precision did not hold on the odd ids).
SHIPPED_FIT = "joint, no paraphrase path"
BATCHES = {"1 (rules built on it)": (1, 651), "2 (found 3 holes)": (652, 761), "3 (untouched)": (762, 10**9)}

GRID_COSINE = [round(x, 2) for x in np.arange(0.80, 1.0001, 0.01)]
GRID_SUBSET = [round(x, 2) for x in np.arange(0.60, 1.0001, 0.01)]
GRID_NOVELTY = [0.0, 0.1, 0.15, 0.2, 0.25, 0.34, 0.4, 0.5]
GRID_EXTRA = [0, 1]
GRID_COVERAGE = [0.0, 0.25, 0.34, 0.5, 0.67, 0.75, 1.0]


def load(path: Path = SET) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def half(row: dict[str, Any]) -> str:
    return "even" if int(row["id"]) % 2 == 0 else "odd"


# ------------------------------------------------------------------------------- cosines


def sources() -> dict[str, Any]:
    """The two local embedding sources, as bench/realtalk_bench.py opens them."""
    from memsvc.embedding.sources import StaticSource, TransformersSource, default_static_cache_dir

    static = StaticSource(
        os.environ.get("MEMORY_STATIC_MODEL") or None,
        os.environ.get("MEMORY_STATIC_CACHE_DIR") or default_static_cache_dir(),
    )
    return {"static": static, "minilm": TransformersSource()}


def cosines(rows: Sequence[dict[str, Any]], source: Any) -> np.ndarray:
    """Cosine of a and b per pair (the sources return unit rows)."""
    texts = sorted({r["a"] for r in rows} | {r["b"] for r in rows})
    vectors = dict(zip(texts, np.asarray(source.embed(texts), dtype=np.float32)))
    return np.array([float(vectors[r["a"]] @ vectors[r["b"]]) for r in rows])


# ------------------------------------------------------------------------------- scoring


def scores(truth: np.ndarray, said: np.ndarray) -> dict[str, Any]:
    tp = int(np.sum(truth & said))
    fp = int(np.sum(~truth & said))
    fn = int(np.sum(truth & ~said))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else float("nan")
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "tp": tp, "fp": fp, "fn": fn, "pairs": len(truth)}


def decisions(rule: DedupRule, comps: Sequence[Comparison], cos: np.ndarray | None) -> np.ndarray:
    return np.array([rule.decide(c, None if cos is None else float(x)) for c, x in zip(comps, _or_none(cos, comps))])


def _or_none(cos: np.ndarray | None, comps: Sequence[Comparison]) -> Sequence[float | None]:
    return [None] * len(comps) if cos is None else list(cos)


class Features:
    """The comparisons of a subset of pairs as arrays, for a fast grid search."""

    def __init__(self, comps: Sequence[Comparison], truth: np.ndarray):
        self.truth = truth
        self.identical = np.array([c.identical for c in comps])
        self.open = np.array([not c.identical and c.veto is None for c in comps])
        self.novelty = np.array([c.novelty for c in comps])
        self.extra = np.array([c.extra for c in comps])
        self.coverage = np.array([c.coverage for c in comps])

    def said(self, rule: DedupRule, cos: np.ndarray | None) -> np.ndarray:
        """`DedupRule.decide` over every pair at once (checked against it in `run`)."""
        subset = self.open & (self.novelty == 0.0) & (self.coverage >= rule.min_coverage)
        if cos is None:
            return self.identical | subset
        subset &= cos >= rule.subset_min_cosine
        para = (
            self.open
            & (self.novelty > 0.0)
            & (self.novelty <= rule.max_novelty)
            & (self.extra <= rule.max_extra)
            & (cos >= rule.min_cosine)
        )
        return self.identical | subset | para


def strictness(rule: DedupRule) -> tuple[float, ...]:
    """Higher is stricter: the tie-break of the search."""
    return (-rule.max_novelty, rule.min_cosine, -rule.max_extra, rule.subset_min_cosine, rule.min_coverage)


def grid(text_only: bool, paraphrase: bool) -> list[DedupRule]:
    """Every rule the search tries; without a cosine only `min_coverage` matters (the rest
    set to their strictest), and with the paraphrase path off (max_novelty 0) neither
    `min_cosine` nor `max_extra` does."""
    if text_only:
        return [DedupRule(1.0, 0.0, 0, 1.0, cov) for cov in GRID_COVERAGE]
    paths = [(1.0, 0.0, 0)]
    if paraphrase:
        paths += [(c, n, e) for c, n, e in itertools.product(GRID_COSINE, GRID_NOVELTY, GRID_EXTRA) if n > 0.0]
    return [
        DedupRule(c, n, e, subset, cov)
        for (c, n, e), subset, cov in itertools.product(paths, GRID_SUBSET, GRID_COVERAGE)
    ]


def fit(feats: Features, legs: dict[str, np.ndarray | None], paraphrase: bool = True) -> DedupRule | None:
    """The rule with the best mean recall over the legs (cosines; None: text only) whose
    precision is >= PRECISION in every leg; ties to the stricter rule. `paraphrase` False:
    only rules with the paraphrase path off (max_novelty 0)."""
    best: tuple[tuple[float, ...], DedupRule] | None = None
    for rule in grid(all(c is None for c in legs.values()), paraphrase):
        recalls = []
        for cos in legs.values():
            s = scores(feats.truth, feats.said(rule, cos))
            if s["precision"] < PRECISION:
                break
            recalls.append(s["recall"])
        else:
            key = (float(np.mean(recalls)), *strictness(rule))
            if best is None or key > best[0]:
                best = (key, rule)
    return None if best is None else best[1]


# ------------------------------------------------------------------------------- the run


def run() -> dict[str, Any]:
    rows = load()
    comps = [compare(r["b"], r["a"]) for r in rows]
    truth = np.array([bool(r["duplicate"]) for r in rows])
    cos: dict[str, np.ndarray] = {name: cosines(rows, src) for name, src in sources().items()}
    even = np.array([half(r) == "even" for r in rows])
    fit_feats = Features([c for c, e in zip(comps, even) if e], truth[even])
    fitted = {
        "static": fit(fit_feats, {"static": cos["static"][even]}),
        "minilm": fit(fit_feats, {"minilm": cos["minilm"][even]}),
        "joint": fit(fit_feats, {**{m: cos[m][even] for m in MODELS}, "text": None}),
        "joint, no paraphrase path": fit(
            fit_feats, {**{m: cos[m][even] for m in MODELS}, "text": None}, paraphrase=False
        ),
        "text": fit(fit_feats, {"text": None}),
    }
    _check_vectorized(comps, truth, cos, fitted)
    legs: dict[str, np.ndarray | None] = {"static": cos["static"], "minilm": cos["minilm"], "text only": None}
    evaluated = {"shipped": {leg: breakdown(rows, truth, decisions(DEFAULT_RULE, comps, c)) for leg, c in legs.items()}}
    for name, rule in fitted.items():  # the fitted rules: overall and per half only
        if rule:
            evaluated[f"fitted {name}"] = {
                leg: {
                    k: v for k, v in breakdown(rows, truth, decisions(rule, comps, c)).items() if k in ("all", "halves")
                }
                for leg, c in legs.items()
            }
    return {
        "pairs": len(rows),
        "duplicates": int(truth.sum()),
        "precision_target": PRECISION,
        "shipped_rule": asdict(DEFAULT_RULE),
        "shipped_is_fit": fitted[SHIPPED_FIT] == DEFAULT_RULE,
        "fitted_rules": {k: asdict(v) if v else None for k, v in fitted.items()},
        "evaluated": evaluated,
        "vetoes": veto_counts(rows, comps),
        "misses": misses(rows, comps, truth, cos, DEFAULT_RULE),
        "misses_fitted_joint": misses(rows, comps, truth, cos, fitted["joint"]) if fitted["joint"] else {},
    }


def _check_vectorized(
    comps: Sequence[Comparison], truth: np.ndarray, cos: dict[str, np.ndarray], fitted: dict[str, DedupRule | None]
) -> None:
    """The grid's array form must say what `DedupRule.decide` says."""
    feats = Features(comps, truth)
    for rule in [DEFAULT_RULE, *(r for r in fitted.values() if r)]:
        for c in [cos["static"], cos["minilm"], None]:
            assert (feats.said(rule, c) == decisions(rule, comps, c)).all(), rule


def breakdown(rows: Sequence[dict[str, Any]], truth: np.ndarray, said: np.ndarray) -> dict[str, Any]:
    def part(keep: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        mask = np.array([keep(r) for r in rows])
        return scores(truth[mask], said[mask])

    return {
        "all": part(lambda r: True),
        "halves": {h: part(lambda r, h=h: half(r) == h) for h in HALVES},
        "categories": {c: part(lambda r, c=c: r["category"] == c) for c in sorted({r["category"] for r in rows})},
        "languages": {lang: part(lambda r, lang=lang: r["lang"] == lang) for lang in LANGUAGES},
        "batches": {b: part(lambda r, lo=lo, hi=hi: lo <= int(r["id"]) <= hi) for b, (lo, hi) in BATCHES.items()},
    }


def veto_counts(rows: Sequence[dict[str, Any]], comps: Sequence[Comparison]) -> dict[str, dict[str, int]]:
    """Per veto reason: how many non-duplicates and duplicates it stopped."""
    out: dict[str, dict[str, int]] = {}
    for r, c in zip(rows, comps):
        reason = "identical" if c.identical else c.veto or "(none: the rule decides)"
        label = "duplicate" if r["duplicate"] else "not duplicate"
        out.setdefault(reason, {"not duplicate": 0, "duplicate": 0})[label] += 1
    return dict(sorted(out.items()))


def misses(
    rows: Sequence[dict[str, Any]],
    comps: Sequence[Comparison],
    truth: np.ndarray,
    cos: dict[str, np.ndarray],
    rule: DedupRule,
) -> dict[str, list[dict[str, Any]]]:
    """A rule's wrong merges per leg (each one a lost memory), for reading."""
    out: dict[str, list[dict[str, Any]]] = {}
    for leg, c in (("static", cos["static"]), ("minilm", cos["minilm"]), ("text only", None)):
        said = decisions(rule, comps, c)
        out[leg] = [
            {
                "id": r["id"],
                "category": r["category"],
                "a": r["a"],
                "b": r["b"],
                "cosine": None if c is None else round(float(c[i]), 3),
            }
            for i, r in enumerate(rows)
            if said[i] and not truth[i]
        ]
    return out


# ------------------------------------------------------------------------------- the report


def _f(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.3f}"


def report(out: dict[str, Any]) -> tuple[str, list[Target]]:
    shipped = out["evaluated"]["shipped"]
    targets = [
        Target(
            f"dedup precision, {leg}, {h} ids",
            shipped[leg]["halves"][h]["precision"],
            ">=",
            PRECISION,
            note=f"recall {shipped[leg]['halves'][h]['recall']:.3f}",
        )
        for leg in ("static", "minilm", "text only")
        for h in HALVES
    ]
    rule = ", ".join(f"{k}={v}" for k, v in out["shipped_rule"].items())
    sections = [
        f"{out['pairs']} labelled pairs ({out['duplicates']} duplicates), bench/dedup/pairs.jsonl. "
        f"Shipped rule (memsvc.core.dedup.DEFAULT_RULE): {rule}. A wrong merge loses a memory: "
        f"target precision >= {PRECISION}; recall reported. Fitted on even ids, checked on odd ids. "
        f"The shipped rule is the `{SHIPPED_FIT}` fit below "
        f"({'it matches' if out['shipped_is_fit'] else 'IT DOES NOT MATCH: update DEFAULT_RULE'}); with the "
        "paraphrase path on (`joint`), the precision of the even ids does not hold on the odd ids.",
        targets_and_halves(out),
        "**Rules the grid search finds on the even ids** (precision >= 0.98, best mean recall, ties to the "
        "stricter rule; `joint` must hold under both models and without a cosine)\n\n" + fitted_table(out),
        "**Shipped rule per category** (all ids; precision / recall / F1)\n\n" + group_table(shipped, "categories"),
        "**Shipped rule per language** (all ids; precision / recall / F1)\n\n" + group_table(shipped, "languages"),
        "**Shipped rule per batch of the set** (precision / recall / F1)\n\n" + group_table(shipped, "batches"),
        "**What the text vetoes** (pairs stopped before any cosine)\n\n"
        + md_table(
            ["reason", "not duplicate", "duplicate"],
            [[k, v["not duplicate"], v["duplicate"]] for k, v in out["vetoes"].items()],
        ),
        "**Wrong merges of the shipped rule**\n\n" + misses_table(out["misses"]),
        "**Wrong merges of the `joint` rule (paraphrase path on)**\n\n" + misses_table(out["misses_fitted_joint"]),
    ]
    return "\n\n".join(sections), targets


def targets_and_halves(out: dict[str, Any]) -> str:
    rows = []
    for leg in ("static", "minilm", "text only"):
        res = out["evaluated"]["shipped"][leg]
        for h in (*HALVES, "all"):
            s = res["all"] if h == "all" else res["halves"][h]
            rows.append([leg, h, _f(s["precision"]), _f(s["recall"]), _f(s["f1"]), s["tp"], s["fp"], s["fn"]])
    return md_table(["cosine from", "ids", "precision", "recall", "F1", "merged right", "merged wrong", "missed"], rows)


def fitted_table(out: dict[str, Any]) -> str:
    rows = []
    for name, rule in out["fitted_rules"].items():
        if rule is None:
            rows.append([name, "no rule reaches the precision", "", "", ""])
            continue
        res = out["evaluated"][f"fitted {name}"]
        legs = ["text only"] if name == "text" else ["static", "minilm", "text only"]
        cells = [
            f"{leg}: P {_f(res[leg]['halves']['even']['precision'])} / {_f(res[leg]['halves']['odd']['precision'])}, "
            f"R {_f(res[leg]['halves']['even']['recall'])} / {_f(res[leg]['halves']['odd']['recall'])}"
            for leg in legs
        ]
        rows.append([name, ", ".join(f"{k}={v}" for k, v in rule.items()), "; ".join(cells)])
    return md_table(["fitted for", "rule", "precision / recall, even / odd ids"], rows)


def group_table(res: dict[str, Any], key: str) -> str:
    legs = ("static", "minilm", "text only")
    names = list(res["static"][key])
    rows = []
    for name in names:
        cells = [" / ".join(_f(res[leg][key][name][m]) for m in ("precision", "recall", "f1")) for leg in legs]
        rows.append([name, res["static"][key][name]["pairs"], *cells])
    return md_table(
        [{"categories": "category", "languages": "language", "batches": "batch"}[key], "pairs", *legs], rows
    )


def misses_table(found: dict[str, list[dict[str, Any]]]) -> str:
    rows = [
        [leg, m["id"], m["category"], m["a"], m["b"], "" if m["cosine"] is None else m["cosine"]]
        for leg, items in found.items()
        for m in items
    ]
    if not rows:
        return "none"
    return md_table(["cosine from", "id", "category", "existing (a)", "new (b)", "cosine"], rows)


def main() -> int:
    out = run()
    table, targets = report(out)
    out["targets"] = [t.as_dict() for t in targets]
    write_results("dedup", out, table, "Duplicates merged on write")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
