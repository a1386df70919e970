"""Writes over gRPC against a server with static embeddings: CreateMemory with 8 concurrent
clients (FTS + embedding + vector insert included, checked by counting vectors), the batch
RPC CreateMemories (one client, 500 memories a call), Extract with `wait` (facts stored
before the answer), AppendRecentMessages. The single-client rate of each is the baseline
beside the concurrent one; CreateMemory one at a time is the batch's baseline. The server
runs with its default process count (MEMSVC_PROCESSES unset), recorded.

What the fact lifecycle costs a write (`lifecycle_costs`): memories without a key (the ones
duplicates are looked for) written, in one run and in turns, to three one-process servers:
the commit before the lifecycle (`--before`, no history), today's with dedupOnWrite off (the
history alone) and today's as it ships (history and the duplicate check).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    CACHE,
    QUIET_PORTS,
    ServerProc,
    Stubs,
    Target,
    agg,
    aio_channel,
    baseline_tree,
    enable_static,
    fmt,
    md_table,
    server_shape,
    write_results,
)
from bench.facts import owner_facts  # noqa: E402


def _rate(port: int, method: tuple[str, str], reqs: list, clients: int, rounds: int) -> dict:
    """`clients` concurrent callers share `reqs` (each round takes its own slice)."""
    from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc

    service, name = method
    per_round = len(reqs) // rounds

    async def one(part: list) -> float:
        channels = [aio_channel(port) for _ in range(clients)]
        for ch in channels:
            await ch.channel_ready()
        stub_cls = memory_pb2_grpc.MemoryServiceStub if service == "memory" else engine_pb2_grpc.EngineServiceStub
        calls = [getattr(stub_cls(ch), name) for ch in channels]

        async def worker(i: int) -> None:
            for req in part[i::clients]:
                await calls[i](req)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(clients)))
        elapsed = time.perf_counter() - t0
        for ch in channels:
            await ch.close()
        return len(part) / elapsed

    rates = [asyncio.run(one(reqs[r * per_round : (r + 1) * per_round])) for r in range(rounds)]
    return {"per_s": agg(rates), "clients": clients, "calls_per_round": per_round}


def batch_rate(stubs: Stubs, reqs: list, rounds: int) -> dict:
    """One client sending CreateMemories calls back to back; memories stored per second
    (each round its own slice of the calls), and what the results said."""
    per_round = len(reqs) // rounds
    rates, stored, failed = [], 0, 0
    for r in range(rounds):
        part = reqs[r * per_round : (r + 1) * per_round]
        t0 = time.perf_counter()
        answers = [stubs.memory.CreateMemories(req) for req in part]
        elapsed = time.perf_counter() - t0
        stored += sum(a.stored_count for a in answers)
        failed += sum(a.failed_count for a in answers)
        rates.append(sum(len(req.memories) for req in part) / elapsed)
    return {
        "per_s": agg(rates),
        "clients": 1,
        "calls_per_round": per_round,
        "memories_per_call": len(reqs[0].memories),
        "stored": stored,
        "failed": failed,
    }


def batch_requests(count: int, size: int) -> list | None:
    """CreateMemories calls of `size` new memories each (50 owners), None when this memsvc
    has no batch RPC."""
    from memsvc.v1 import memory_pb2

    if "CreateMemories" not in memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].methods_by_name:
        return None
    facts = owner_facts("batcher", count, seed=11)
    items = [
        memory_pb2.CreateMemoryRequest(api_key_id=f"batcher-{i % 50}", key=f.key, content=f.content, type=f.type)
        for i, f in enumerate(facts)
    ]
    return [
        memory_pb2.CreateMemoriesRequest(memories=items[i : i + size]) for i in range(0, len(items) - size + 1, size)
    ]


def _batch_or_skip(stubs: Stubs, batch: list | None, rounds: int) -> dict:
    import grpc

    if batch is None:
        return {"skipped": "this memsvc has no CreateMemories RPC"}
    try:
        return batch_rate(stubs, batch, rounds)
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
            raise
        return {"skipped": "the server does not implement CreateMemories yet"}


def _warm_static(port: int, connections: int = 8, timeout_s: float = 120.0) -> None:
    """Load the static model in every server process (lazily loaded; the first writes would
    otherwise be deferred): a semantic Retrieve answered by vectors, over several
    connections (the kernel spreads connections over the processes)."""
    from memsvc.v1 import engine_pb2

    for _ in range(connections):
        stubs = Stubs(port)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            r = stubs.engine.Retrieve(
                engine_pb2.RetrieveRequest(api_key_id="warm", query="warm up", strategy="semantic")
            )
            if r.resolution.strategy_used == "vector":
                break
            time.sleep(0.05)
        stubs.close()


#: The commit before the fact lifecycle (history, versions, the feed, duplicates merged on write).
BEFORE_LIFECYCLE = "a12a8b6"
LIFECYCLE_LEGS = ("before", "history", "history + dedup")


def _keyless(count: int, seed: int) -> list:
    from memsvc.v1 import memory_pb2

    return [
        memory_pb2.CreateMemoryRequest(api_key_id=f"keyless-{i % 20}", content=f.content, type=f.type)
        for i, f in enumerate(owner_facts("keyless", count, seed=seed))
    ]


def _lifecycle_servers(tmp: Path, before: str) -> dict[str, ServerProc]:
    tree = baseline_tree(before, tmp / "tree")
    return {
        "before": ServerProc(tmp / "before" / "data", extra_env=QUIET_PORTS, processes=1, root=tree),
        "history": ServerProc(tmp / "history" / "data", extra_env=QUIET_PORTS, processes=1),
        "history + dedup": ServerProc(tmp / "dedup" / "data", extra_env=QUIET_PORTS, processes=1),
    }


def lifecycle_costs(before: str = BEFORE_LIFECYCLE, rounds: int = 3, single: int = 200, many: int = 800) -> dict:
    """Keyless CreateMemory (1 and 8 clients) and CreateMemories (250 a call) on the three
    legs, each round measuring every leg in turn, so drift of the machine hits them alike."""
    from memsvc.v1 import memory_pb2

    out: dict = {"before": before, "legs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        servers = _lifecycle_servers(Path(tmp), before)
        try:
            for label, server in servers.items():
                server.start()
                stubs = Stubs(server.port)
                enable_static(stubs, **({"dedupOnWrite": False} if label == "history" else {}))
                stubs.close()
                _warm_static(server.port, connections=2)
            rates: dict[str, dict[str, list[float]]] = {label: {"1": [], "8": [], "batch": []} for label in servers}
            merged = dict.fromkeys(servers, 0)
            for r in range(rounds):
                reqs = _keyless(single + many + 1000, seed=100 + r)
                batches = [
                    memory_pb2.CreateMemoriesRequest(memories=reqs[i : i + 250])
                    for i in range(single + many, len(reqs), 250)
                ]
                for label, server in servers.items():
                    rates[label]["1"].append(
                        _rate(server.port, ("memory", "CreateMemory"), reqs[:single], 1, 1)["per_s"]["median"]
                    )
                    rates[label]["8"].append(
                        _rate(server.port, ("memory", "CreateMemory"), reqs[single : single + many], 8, 1)["per_s"][
                            "median"
                        ]
                    )
                    stubs = Stubs(server.port)
                    t0 = time.perf_counter()
                    answers = [stubs.memory.CreateMemories(b) for b in batches]
                    rates[label]["batch"].append(sum(len(b.memories) for b in batches) / (time.perf_counter() - t0))
                    merged[label] += sum(1 for a in answers for x in a.results if getattr(x, "merged_into", ""))
                    stubs.close()
        finally:
            for server in servers.values():
                server.stop()
    for label in servers:
        out["legs"][label] = {k: agg(v) for k, v in rates[label].items()} | {"merged_in_batches": merged[label]}
    out["rounds_raw"] = rates
    return out


def lifecycle_table(out: dict) -> str:
    raw = out["rounds_raw"]
    rows = []
    for key, what in (
        ("1", "CreateMemory, 1 client"),
        ("8", "CreateMemory, 8 clients"),
        ("batch", "CreateMemories, 250 a call"),
    ):
        for label in LIFECYCLE_LEGS:
            ratios = [b / a for a, b in zip(raw["before"][key], raw[label][key])]
            rows.append([f"{what}, {label}", fmt(out["legs"][label][key], 0, " memories/s"), fmt(agg(ratios), 2, "×")])
    table = md_table(["keyless write (1 server process)", "rate", "of before"], rows)
    return table + (
        f"\n\nbefore = commit {out['before']} (no history); history = today's with dedupOnWrite off; "
        "history + dedup = today's default. Memories without a key, so every one is checked for a "
        f"duplicate ({out['legs']['history + dedup']['merged_in_batches']} of the batches' memories repeated "
        "an earlier one and were merged). "
        f"Each round measures the three in turn; medians of {len(raw['before']['1'])} rounds (min–max)."
    )


def run(creates: int = 3000, rounds: int = 3, clients: int = 8, batches: int = 30, batch_size: int = 500) -> dict:
    from memsvc.v1 import engine_pb2, memory_pb2

    folder = CACHE / "writes"
    shutil.rmtree(folder, ignore_errors=True)
    out: dict = {}
    with ServerProc(folder / "data", extra_env=QUIET_PORTS) as server:
        stubs = Stubs(server.port)
        enable_static(stubs)
        _warm_static(server.port)
        out["server"] = server_shape(server)  # after the warm-up: every worker has bound the port by then
        facts = owner_facts("writer", creates * 2, seed=9)
        reqs = [
            memory_pb2.CreateMemoryRequest(api_key_id=f"writer-{i % 50}", key=f.key, content=f.content, type=f.type)
            for i, f in enumerate(facts)
        ]
        single_n = max(300, creates // 5)
        out["create_1_client"] = _rate(server.port, ("memory", "CreateMemory"), reqs[:single_n], 1, rounds)
        out["create_8_clients"] = _rate(
            server.port, ("memory", "CreateMemory"), reqs[single_n : single_n + creates], clients, rounds
        )
        status = stubs.engine.GetEngineStatus(engine_pb2.GetEngineStatusRequest())
        out["vectors_after_creates"] = {
            "rows": status.vector_store.row_count,
            "needs_reindex": status.vector_store.needs_reindex,
            "memories_created": single_n + creates,
        }
        batch = batch_requests(batches * batch_size, batch_size)
        out["create_batch"] = _batch_or_skip(stubs, batch, rounds)
        if "skipped" not in out["create_batch"]:
            after = stubs.engine.GetEngineStatus(engine_pb2.GetEngineStatusRequest()).vector_store
            out["vectors_after_batches"] = {"rows": after.row_count, "needs_reindex": after.needs_reindex}
        texts = [
            f"I prefer {f.item} for project {i}. I usually review code in the morning {i}. I'll use Rust for tool {i}."
            for i, f in enumerate(facts[:1200])
        ]
        ex = [
            engine_pb2.ExtractRequest(api_key_id=f"extractor-{i % 20}", user_message=t, wait=True)
            for i, t in enumerate(texts)
        ]
        out["extract_wait_1_client"] = _rate(server.port, ("engine", "Extract"), ex[:300], 1, rounds)
        out["extract_wait_8_clients"] = _rate(server.port, ("engine", "Extract"), ex[300:1200], clients, rounds)
        out["extract_facts_per_call"] = 3
        msgs = [
            memory_pb2.AppendRecentMessagesRequest(
                character=f"Char{i % 8}",
                messages=[
                    memory_pb2.ChatItem(role="human", text=f"I love green tea number {i}"),
                    memory_pb2.ChatItem(role="ai", text=f"Noted, tea {i}!"),
                ],
            )
            for i in range(4000)
        ]
        out["append_1_client"] = _rate(server.port, ("memory", "AppendRecentMessages"), msgs[:1000], 1, rounds)
        out["append_8_clients"] = _rate(
            server.port, ("memory", "AppendRecentMessages"), msgs[1000:4000], clients, rounds
        )
        stubs.close()
    shutil.rmtree(folder, ignore_errors=True)
    out["lifecycle"] = lifecycle_costs(rounds=rounds)
    return out


def report(out: dict) -> tuple[str, list[Target]]:
    rows = [
        [
            "CreateMemory (FTS + embedding + vector)",
            fmt(out["create_1_client"]["per_s"], 0),
            fmt(out["create_8_clients"]["per_s"], 0),
            "memories/s",
        ],
        [
            "Extract wait=true (3 facts per call)",
            fmt(out["extract_wait_1_client"]["per_s"], 0),
            fmt(out["extract_wait_8_clients"]["per_s"], 0),
            "calls/s",
        ],
        [
            "AppendRecentMessages (2 messages per call)",
            fmt(out["append_1_client"]["per_s"], 0),
            fmt(out["append_8_clients"]["per_s"], 0),
            "calls/s",
        ],
    ]
    b = out.get("create_batch", {"skipped": "not measured"})
    if "skipped" in b:
        rows.insert(1, ["CreateMemories (batch RPC)", "—", f"skipped: {b['skipped']}", "memories/s"])
    else:
        rows.insert(
            1,
            [
                f"CreateMemories, {b['memories_per_call']} a call, 1 client (baseline: CreateMemory one at a "
                "time, 1 client, row above)",
                fmt(b["per_s"], 0),
                "—",
                "memories/s",
            ],
        )
    table = md_table(["write", "1 client (baseline)", "8 clients", "unit"], rows)
    v = out["vectors_after_creates"]
    shape = out.get("server", {})
    table += (
        f"\n\nServer: {shape.get('serving_processes', '?')} process(es), MEMSVC_PROCESSES "
        f"{shape.get('MEMSVC_PROCESSES', '?')}, {shape.get('cores', '?')} cores. "
        f"After the creates: {v['rows']:,} vectors stored, {v['needs_reindex']} memories waiting for one "
        f"({v['memories_created']:,} created, plus 1 warm-up owner)."
    )
    if "skipped" not in b:
        va = out["vectors_after_batches"]
        table += (
            f" Batches: {b['stored']:,} stored, {b['failed']} failed; then {va['rows']:,} vectors, "
            f"{va['needs_reindex']} waiting."
        )
    table += f" Medians of {out['create_1_client']['per_s']['rounds']} rounds (min–max)."
    if "lifecycle" in out:
        table += "\n\n#### What history and the duplicate check cost a write\n\n" + lifecycle_table(out["lifecycle"])
    targets = [
        Target(
            "CreateMemory, 8 clients",
            out["create_8_clients"]["per_s"]["median"],
            ">=",
            2000,
            "/s",
            f"1 client: {out['create_1_client']['per_s']['median']:.0f}/s",
        )
    ]
    if "skipped" not in b:
        targets.append(
            Target(
                f"CreateMemories batch ({b['memories_per_call']} a call), 1 client",
                b["per_s"]["median"],
                ">=",
                10_000,
                " memories/s",
                f"CreateMemory one at a time: {out['create_1_client']['per_s']['median']:.0f}/s",
            )
        )
    else:
        targets.append(
            Target("CreateMemories batch, 1 client", float("nan"), ">=", 10_000, " memories/s", b["skipped"])
        )
    return table, targets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--creates", type=int, default=3000, help="CreateMemory calls of the 8 clients (1 client: a fifth)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=30, help="CreateMemories calls, over all rounds")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument(
        "--lifecycle-only", action="store_true", help="measure only what history and dedup cost a write"
    )
    args = parser.parse_args()
    if args.lifecycle_only:
        out = {"lifecycle": lifecycle_costs(rounds=args.rounds)}
        print(lifecycle_table(out["lifecycle"]))
        return 0
    out = run(args.creates, rounds=args.rounds, batches=args.batches, batch_size=args.batch_size)
    table, targets = report(out)
    out["targets"] = [t.as_dict() for t in targets]
    write_results("writes", out, table, "Writes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
