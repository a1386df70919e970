"""What tracing costs a Retrieve: two `memsvc serve` processes side by side (one server
process each, no gateway) with the same owner's memories and the static model, one exporting
its spans over OTLP/HTTP to a receiver on loopback (tests/support/otlp_receiver.py, a real
HTTP server decoding every export with the OpenTelemetry protos) and one with tracing off,
Retrieve calls alternating between them call by call, so drift on this shared machine hits
both alike. Per round: p50 and p95 of each; over the rounds: median (min–max), and the
ratio on/off. The receiver's span count shows the traced server really exported (one
search_memory span and its tier, embedding spans per call). With `--baseline REV` a third
server runs that commit's tree (before tracing existed, say), so the off leg also shows
what the switched-off spans cost.

    python bench/tracing_bench.py [--memories 2000] [--calls 300] [--rounds 5] [--baseline HEAD]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    QUIET_PORTS,
    ROOT,
    ServerProc,
    Stubs,
    agg,
    baseline_tree,
    enable_static,
    fmt,
    md_table,
    pct,
    write_results,
)
from bench.facts import owner_facts, queries  # noqa: E402

OWNER = "bench-traced"
# The static model the set-up scripts build (memsvc build-models), not bench/.cache's copy.
STATIC_CACHE = Path(sys.prefix) / "share" / "memsvc" / "embeddings"


def _seed(stubs: Stubs, count: int) -> None:
    from memsvc.v1 import memory_pb2 as mpb

    facts = owner_facts(OWNER, count)
    for start in range(0, len(facts), 500):
        batch = [
            mpb.CreateMemoryRequest(api_key_id=OWNER, key=f.key, content=f.content, type=f.type)
            for f in facts[start : start + 500]
        ]
        stubs.memory.CreateMemories(mpb.CreateMemoriesRequest(memories=batch), timeout=300)


def _legs(stubs: dict[str, Stubs], qs: list[str], rounds: int) -> dict[str, dict[str, list[float]]]:
    """p50 and p95 (ms) of each leg per round, the legs alternating call by call."""
    from memsvc.v1 import engine_pb2 as epb

    requests = [epb.RetrieveRequest(api_key_id=OWNER, query=q, strategy="hybrid", max_tokens=500) for q in qs]
    out = {label: {"p50": [], "p95": []} for label in stubs}
    for _ in range(rounds):
        times: dict[str, list[float]] = {label: [] for label in stubs}
        for request in requests:
            for label, leg in stubs.items():
                started = time.perf_counter()
                leg.engine.Retrieve(request, timeout=30)
                times[label].append((time.perf_counter() - started) * 1000.0)
        for label, values in times.items():
            out[label]["p50"].append(pct(values, 50))
            out[label]["p95"].append(pct(values, 95))
    return out


def run(memories: int, calls: int, rounds: int, baseline: str | None = None) -> dict:
    sys.path.insert(0, str(ROOT))
    from tests.support.otlp_receiver import OtlpReceiver

    base_env = {**QUIET_PORTS, "MEMORY_STATIC_CACHE_DIR": str(STATIC_CACHE), "MEMSVC_PROCESSES": "1"}
    qs = queries(calls)
    with tempfile.TemporaryDirectory() as tmp, OtlpReceiver() as receiver:
        servers = {
            "tracing off": ServerProc(Path(tmp) / "off" / "data", extra_env=base_env),
            "tracing on": ServerProc(
                Path(tmp) / "on" / "data",
                extra_env={**base_env, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "bench"},
            ),
        }
        if baseline:
            tree = baseline_tree(baseline, Path(tmp) / "tree")
            servers[f"before ({baseline})"] = ServerProc(Path(tmp) / "before" / "data", extra_env=base_env, root=tree)
        stubs: dict[str, Stubs] = {}
        try:
            for label, server in servers.items():
                server.start()
                stubs[label] = Stubs(server.port)
                enable_static(stubs[label])
                _seed(stubs[label], memories)
            warm = qs[: max(20, calls // 5)]
            _legs(stubs, warm, 1)  # warm: working sets, vectors, caches
            # The warm-up's spans arrive first (the SDK exports every 5 s), then are dropped.
            receiver.wait_for(lambda got: sum(s.name == "search_memory" for s in got) >= len(warm), 60)
            receiver.clear()
            legs = _legs(stubs, qs, rounds)
        finally:
            for label in list(stubs):
                stubs[label].close()
            for server in servers.values():
                server.stop()  # the traced one exports what it still holds as it stops
        spans = receiver.spans()
    searches = [s for s in spans if s.name == "search_memory"]
    return {
        "memories": memories,
        "baseline": baseline,
        "calls_per_round": len(qs),
        "rounds": rounds,
        "legs": {label: {p: agg(values) for p, values in leg.items()} for label, leg in legs.items()},
        "rounds_raw": legs,
        "spans_received": len(spans),
        "search_memory_spans": len(searches),
        "span_names": sorted({s.name for s in spans}),
    }


def report(out: dict) -> str:
    raw = out["rounds_raw"]
    rows = []
    for p in ("p50", "p95"):
        for label, leg in out["legs"].items():
            ratios = [b / a for a, b in zip(raw["tracing off"][p], raw[label][p])]
            shown = f"{label} (OTLP/HTTP to loopback)" if label == "tracing on" else label
            rows.append([f"Retrieve {p}, {shown}", fmt(leg[p], 3, " ms"), fmt(agg(ratios), 2, "×")])
    rows.append(
        [
            "spans received (traced server)",
            f"{out['spans_received']} ({out['search_memory_spans']} search_memory)",
            f"{out['rounds']} × {out['calls_per_round']} calls",
        ]
    )
    return md_table(["", "median (min–max) over rounds", "÷ tracing off, per round"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", help="also serve this commit (e.g. HEAD) with tracing off, interleaved")
    args = parser.parse_args()
    out = run(args.memories, args.calls, args.rounds, args.baseline)
    write_results("tracing", out, report(out), f"Retrieve with tracing on beside off ({args.memories} memories)")


if __name__ == "__main__":
    main()
