"""Writes over gRPC against a server with static embeddings: CreateMemory with 8 concurrent
clients (FTS + embedding + vector insert included, checked by counting vectors), Extract
with `wait` (facts stored before the answer), AppendRecentMessages. The single-client rate
of each is the baseline beside the concurrent one.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import CACHE, ServerProc, Stubs, Target, agg, enable_static, fmt, md_table, write_results  # noqa: E402
from bench.facts import owner_facts  # noqa: E402


def _rate(port: int, method: tuple[str, str], reqs: list, clients: int, rounds: int) -> dict:
    """`clients` concurrent callers share `reqs` (each round takes its own slice)."""
    import grpc

    from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc

    service, name = method
    per_round = len(reqs) // rounds

    async def one(part: list) -> float:
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(clients)]
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

    rates = [asyncio.run(one(reqs[r * per_round:(r + 1) * per_round])) for r in range(rounds)]
    return {"per_s": agg(rates), "clients": clients, "calls_per_round": per_round}


def run(creates: int = 3000, rounds: int = 3, clients: int = 8) -> dict:
    from memsvc.v1 import engine_pb2, memory_pb2

    folder = CACHE / "writes"
    shutil.rmtree(folder, ignore_errors=True)
    out: dict = {}
    with ServerProc(folder / "data") as server:
        stubs = Stubs(server.port)
        enable_static(stubs)
        # Load the static model (lazily loaded; the first writes would otherwise be deferred).
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            r = stubs.engine.Retrieve(engine_pb2.RetrieveRequest(api_key_id="warm", query="warm up", strategy="semantic"))
            if r.resolution.strategy_used == "vector":
                break
            time.sleep(0.05)
        facts = owner_facts("writer", creates * 2, seed=9)
        reqs = [memory_pb2.CreateMemoryRequest(api_key_id=f"writer-{i % 50}", key=f.key, content=f.content, type=f.type)
                for i, f in enumerate(facts)]
        single_n = max(300, creates // 5)
        out["create_1_client"] = _rate(server.port, ("memory", "CreateMemory"), reqs[:single_n], 1, rounds)
        out["create_8_clients"] = _rate(server.port, ("memory", "CreateMemory"), reqs[single_n:single_n + creates],
                                        clients, rounds)
        status = stubs.engine.GetEngineStatus(engine_pb2.GetEngineStatusRequest())
        out["vectors_after_creates"] = {"rows": status.vector_store.row_count,
                                        "needs_reindex": status.vector_store.needs_reindex,
                                        "memories_created": single_n + creates}
        texts = [f"I prefer {f.item} for project {i}. I usually review code in the morning {i}. I'll use Rust for tool {i}."
                 for i, f in enumerate(facts[:1200])]
        ex = [engine_pb2.ExtractRequest(api_key_id=f"extractor-{i % 20}", user_message=t, wait=True)
              for i, t in enumerate(texts)]
        out["extract_wait_1_client"] = _rate(server.port, ("engine", "Extract"), ex[:300], 1, rounds)
        out["extract_wait_8_clients"] = _rate(server.port, ("engine", "Extract"), ex[300:1200], clients, rounds)
        out["extract_facts_per_call"] = 3
        msgs = [memory_pb2.AppendRecentMessagesRequest(character=f"Char{i % 8}", messages=[
            memory_pb2.ChatItem(role="human", text=f"I love green tea number {i}"),
            memory_pb2.ChatItem(role="ai", text=f"Noted, tea {i}!")]) for i in range(4000)]
        out["append_1_client"] = _rate(server.port, ("memory", "AppendRecentMessages"), msgs[:1000], 1, rounds)
        out["append_8_clients"] = _rate(server.port, ("memory", "AppendRecentMessages"), msgs[1000:4000], clients, rounds)
        stubs.close()
    shutil.rmtree(folder, ignore_errors=True)
    return out


def report(out: dict) -> tuple[str, list[Target]]:
    rows = [
        ["CreateMemory (FTS + embedding + vector)", fmt(out["create_1_client"]["per_s"], 0),
         fmt(out["create_8_clients"]["per_s"], 0), "memories/s"],
        ["Extract wait=true (3 facts per call)", fmt(out["extract_wait_1_client"]["per_s"], 0),
         fmt(out["extract_wait_8_clients"]["per_s"], 0), "calls/s"],
        ["AppendRecentMessages (2 messages per call)", fmt(out["append_1_client"]["per_s"], 0),
         fmt(out["append_8_clients"]["per_s"], 0), "calls/s"],
    ]
    table = md_table(["write", "1 client (baseline)", "8 clients", "unit"], rows)
    v = out["vectors_after_creates"]
    table += (f"\n\nAfter the creates: {v['rows']:,} vectors stored, {v['needs_reindex']} memories waiting for one "
              f"({v['memories_created']:,} created, plus 1 warm-up owner). Medians of 3 rounds (min–max).")
    targets = [Target("CreateMemory, 8 clients", out["create_8_clients"]["per_s"]["median"], ">=", 2000, "/s")]
    return table, targets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=3000)
    args = parser.parse_args()
    out = run(args.creates)
    table, targets = report(out)
    out["targets"] = [t.as_dict() for t in targets]
    write_results("writes", out, table, "Writes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
