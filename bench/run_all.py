"""Run every benchmark, write bench/results/summary.md, print PASS/MISS per target.

    .venv/bin/python bench/run_all.py

The first run also builds what later runs reuse from bench/.cache/: the static model
(distilled once from the shipped MiniLM, about 3 minutes here), the 1M-row hot-path
database (about 8–9 minutes) and the 100k-vector KNN databases (about 1 minute). With those
cached, the whole run takes under 10 minutes on the 2-core machine. Each script can also be
run alone (bench/hot_path.py, profile_retrieve.py, knn_bench.py, writes_bench.py,
replicas_bench.py, reindex_bench.py, startup_bench.py, quality_bench.py, extraction_bench.py,
realtalk_bench.py — the last reads the REALTALK conversations from ../shared/data/realtalk/, or
REALTALK_DIR; replicas_bench.py starts a PostgreSQL of its own from the dev extra).
The quality benches run in the same run as the speed ones, so a speed change that costs
retrieval quality shows in the same summary. BENCH_RESULTS=DIR writes a trial run's results
there instead of bench/results/. `--only a,b` runs a subset; the summary still lists every
bench's latest results in the folder, and the header says which came from earlier runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import (  # noqa: E402
    dedup_bench,
    extraction_bench,
    hot_path,
    knn_bench,
    lifecycle_bench,
    multilingual_bench,
    profile_retrieve,
    quality_bench,
    realtalk_bench,
    reindex_bench,
    replicas_bench,
    startup_bench,
    working_set_bench,
    writes_bench,
)
from bench.common import RESULTS, Target, machine, targets_table, write_results  # noqa: E402
from bench.dataset import ensure_all  # noqa: E402

STEPS = [
    ("startup", "Start and footprint", startup_bench),
    ("knn", "Vector search floor (KNN)", knn_bench),
    ("hot_path", "Hot path", hot_path),
    ("profile_retrieve", "Where a Retrieve's time goes", profile_retrieve),
    ("working_set", "Working sets beside FTS5", working_set_bench),
    ("writes", "Writes", writes_bench),
    ("lifecycle", "Retrieve as of an instant", lifecycle_bench),
    ("replicas", "Scale-out: replicas on one PostgreSQL", replicas_bench),
    ("reindex", "Reindex throughput", reindex_bench),
    ("quality", "Retrieval quality", quality_bench),
    ("extraction", "Extraction quality", extraction_bench),
    ("dedup", "Duplicates merged on write", dedup_bench),
    ("realtalk", "Conversational retrieval (REALTALK)", realtalk_bench),
    ("multilingual", "Multilingual conversational retrieval (ja, zh, ru, mixed)", multilingual_bench),
]

# --quick: small sizes for the steps that take them, to check that a run goes through end to
# end (its figures are not the results: pair it with BENCH_RESULTS).
QUICK = {
    "hot_path": {"calls": 20, "big_calls": 5, "rounds": 1, "per_client": 3, "sizes": (10_000,)},
    "profile_retrieve": {"calls": 30, "seconds": 4},
    "writes": {"creates": 400, "rounds": 1, "batches": 4},
    "lifecycle": {"memories": (500,), "calls": 20, "rounds": 1},
    "working_set": {"total": 20_000, "calls": 30, "rounds": 1},
    "replicas": {"facts": 2_000, "calls": 20, "rounds": 1, "per_client": 3},
}


def _targets(out: dict) -> list[Target]:
    return [Target(t["name"], t["value"], t["op"], t["limit"], t["unit"], t.get("note", "")) for t in out["targets"]]


def collect(
    results: Path, steps: list[tuple[str, str]], failed: dict[str, str]
) -> list[tuple[str, str, list[Target], str]]:
    """(name, when it ran, its targets, its section) of every bench with results in
    `results`, in `steps` order: what this run measured and, after `--only`, what earlier
    runs left there (each says when it ran). A bench that failed in this run (`failed`:
    name → the error's last line) shows the failure, not an older run's figures."""
    found = []
    for name, title in steps:
        if name in failed:
            found.append((name, "", [], f"### {title}\n\nFAILED: {failed[name]}\n"))
            continue
        data_path, table_path = results / f"{name}.json", results / f"{name}.md"
        if not data_path.is_file() or not table_path.is_file():
            continue
        data = json.loads(data_path.read_text(encoding="utf-8"))
        found.append(
            (
                name,
                data.get("machine", {}).get("when", ""),
                _targets(data) if "targets" in data else [],
                table_path.read_text(encoding="utf-8"),
            )
        )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description="run every benchmark")
    parser.add_argument("--only", default="", help="comma-separated subset: " + ",".join(s for s, _, _ in STEPS))
    parser.add_argument("--quick", action="store_true", help="small sizes for " + ", ".join(QUICK))
    args = parser.parse_args()
    only = {s for s in args.only.split(",") if s}
    started = time.perf_counter()
    t0 = time.perf_counter()
    datasets = ensure_all()
    prep_s = time.perf_counter() - t0
    timings: dict[str, float] = {}
    failures: dict[str, str] = {}
    for name, title, module in STEPS:
        if only and name not in only:
            continue
        print(f"\n=== {title} ===", flush=True)
        t1 = time.perf_counter()
        try:
            out = module.run(**(QUICK.get(name, {}) if args.quick else {}))
            if "_targets" in out:  # knn_bench returns its table and targets itself
                table, found = out.pop("table"), out.pop("_targets")
            else:
                table, found = module.report(out)
            out["targets"] = [t.as_dict() for t in found]
            write_results(name, out, table, title)
        except Exception:  # noqa: BLE001 - one failing bench must not hide the others' numbers
            failures[name] = traceback.format_exc().splitlines()[-1]
            traceback.print_exc()
        timings[name] = round(time.perf_counter() - t1, 1)
    total = time.perf_counter() - started
    shown = collect(RESULTS, [(n, t) for n, t, _ in STEPS], failures)
    targets = [t for _, _, found, _ in shown for t in found]
    earlier = [f"{name} {when}" for name, when, _, _ in shown if name not in timings]
    summary = targets_table(targets)
    m = machine()
    text = (
        f"# memsvc benchmarks\n\n{m['when']} · Python {m['python']} · {m['cpus']} CPUs · run_all took "
        f"{total / 60:.1f} min (dataset check {prep_s:.0f} s; per bench s: "
        + ", ".join(f"{k} {v}" for k, v in timings.items())
        + ")"
        + (f"; from earlier runs (their results as left here): {', '.join(earlier)}" if earlier else "")
        + "\n\n## Targets\n\n"
        + summary
        + "\n\n"
        + "\n".join(section for _, _, _, section in shown)
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "summary.md").write_text(text, encoding="utf-8")
    (RESULTS / "summary.json").write_text(
        json.dumps(
            {
                "machine": m,
                "seconds": round(total, 1),
                "timings": timings,
                "datasets": datasets,
                "failures": sorted(failures),
                "earlier": earlier,
                "targets": [t.as_dict() for t in targets],
            },
            indent=2,
            default=str,
        )
    )
    print("\n=== Targets ===\n")
    print(summary)
    for t in targets:
        print(f"{'PASS' if t.passed else 'MISS'}  {t.name}: {t.value:.3g}{t.unit} (goal {t.op} {t.limit:g}{t.unit})")
    print(f"\nrun_all took {total / 60:.1f} min; wrote {RESULTS / 'summary.md'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
