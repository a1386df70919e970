"""Hot path: Retrieve and Inject over gRPC (strategy hybrid, static embeddings) for owners
holding 1k / 10k / 100k facts among 1,000 owners with 1M memories in total; single-client
p50/p99, throughput with 16 concurrent clients, the same through Envoy REST, and the 10k
owner's latency in a database holding only its 10k rows (other owners' data must not cost).

Baselines measured in the same run: a gRPC health check round trip (the transport floor); for
REST, the same calls over gRPC, alternating call by call with the REST ones; for the other
owners' data, the same owner in a database of its own 10k rows, also alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ServerProc, Stubs, Target, agg, fmt, md_table, pct, write_results  # noqa: E402
from bench.dataset import OWNER_BY_SIZE, db_dir, ensure_all  # noqa: E402
from bench.facts import queries as make_queries  # noqa: E402

SYSTEM = "You are a helpful assistant."


def _retrieve_req(pb, owner: str, q: str):
    return pb.RetrieveRequest(api_key_id=owner, query=q, strategy="hybrid", max_tokens=500)


def _inject_req(pb, owner: str, q: str):
    from google.protobuf import struct_pb2

    body = struct_pb2.Struct()
    body.update({"model": "gpt-4o", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}]})
    return pb.InjectRequest(request=body, provider="openai", api_key_id=owner)


def warm(stubs: Stubs, owners: list[str], qs: list[str], timeout_s: float = 120.0) -> dict:
    """Until hybrid retrieval runs as asked (the static model loads lazily, off the request
    path: the first requests fall back to keywords) and each owner's vectors are cached."""
    from memsvc.v1 import engine_pb2 as pb

    started = time.perf_counter()
    first_full = None
    while time.perf_counter() - started < timeout_s:
        r = stubs.engine.Retrieve(_retrieve_req(pb, owners[0], qs[0]))
        if r.resolution.strategy_used == "hybrid-rrf" and not r.resolution.fallback_reason:
            first_full = time.perf_counter() - started
            break
        time.sleep(0.05)
    cold = {}
    for owner in owners:
        t0 = time.perf_counter()
        stubs.engine.Retrieve(_retrieve_req(pb, owner, qs[1]))
        cold[owner] = (time.perf_counter() - t0) * 1000
        for q in qs[:20]:
            stubs.engine.Retrieve(_retrieve_req(pb, owner, q))
            stubs.engine.Inject(_inject_req(pb, owner, q))
    return {"hybrid_ready_s": first_full, "first_call_ms": cold}


def single(fn, reqs: list, rounds: int) -> dict:
    p50s, p99s = [], []
    for _ in range(rounds):
        times = []
        for req in reqs:
            t0 = time.perf_counter()
            fn(req)
            times.append((time.perf_counter() - t0) * 1000)
        p50s.append(pct(times, 50))
        p99s.append(pct(times, 99))
    return {"p50_ms": agg(p50s), "p99_ms": agg(p99s), "calls_per_round": len(reqs)}


def concurrent(port: int, path: str, response_type, reqs: list, clients: int, per_client: int,
               rounds: int) -> dict:
    """`clients` concurrent callers (grpc.aio, one channel each), each making `per_client`
    calls of the method at `path` back to back, responses parsed as a client would;
    throughput = calls / wall time."""
    import grpc

    async def one_round() -> float:
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(clients)]
        calls = [ch.unary_unary(path, request_serializer=type(reqs[0]).SerializeToString,
                                response_deserializer=response_type.FromString) for ch in channels]

        async def worker(i: int) -> None:
            for j in range(per_client):
                await calls[i](reqs[(i * per_client + j) % len(reqs)])

        await asyncio.gather(*(call(reqs[0]) for call in calls))  # connect
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(clients)))
        elapsed = time.perf_counter() - t0
        for ch in channels:
            await ch.close()
        return clients * per_client / elapsed

    rates = [asyncio.run(one_round()) for _ in range(rounds)]
    return {"rps": agg(rates), "clients": clients, "calls_per_round": clients * per_client}


def interleaved(fa, fb, items_a: list, items_b: list, rounds: int) -> dict:
    """The same calls made two ways, alternating call by call, so both see the same machine
    (this one is shared and noisy): p50/p99 of each per round, and per round the difference
    and ratio of the two p50s."""
    keys = ("a_p50", "a_p99", "b_p50", "b_p99", "diff_p50", "ratio_p50")
    per: dict[str, list[float]] = {k: [] for k in keys}
    for _ in range(rounds):
        a_ms, b_ms = [], []
        for x, y in zip(items_a, items_b):
            t0 = time.perf_counter()
            fa(x)
            t1 = time.perf_counter()
            fb(y)
            t2 = time.perf_counter()
            a_ms.append((t1 - t0) * 1000)
            b_ms.append((t2 - t1) * 1000)
        a50, b50 = pct(a_ms, 50), pct(b_ms, 50)
        for k, v in zip(keys, (a50, pct(a_ms, 99), b50, pct(b_ms, 99), a50 - b50, a50 / b50)):
            per[k].append(v)
    return {"a": {"p50_ms": agg(per["a_p50"]), "p99_ms": agg(per["a_p99"])},
            "b": {"p50_ms": agg(per["b_p50"]), "p99_ms": agg(per["b_p99"])},
            "diff_p50_ms": agg(per["diff_p50"]), "ratio_p50": agg(per["ratio_p50"]), "calls_per_round": len(items_a)}


def rest_caller(port: int, path: str):
    """A keep-alive HTTP/1.1 client posting JSON to one REST path (raises on non-200)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"content-type": "application/json"}

    def call(body: dict) -> None:
        conn.request("POST", path, json.dumps(body), headers)
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"REST {path} answered {resp.status}: {data[:200]!r}")

    return call


def run(calls: int = 100, big_calls: int = 30, rounds: int = 3, clients: int = 16, per_client: int = 10) -> dict:
    from memsvc.v1 import engine_pb2 as pb
    from grpc_health.v1 import health_pb2

    datasets = ensure_all()
    qs = make_queries(max(calls, 100))
    sizes = [1_000, 10_000, 100_000]
    out: dict = {"datasets": datasets, "owners": {}, "rest": {}}
    with ServerProc(db_dir("hot_1m"), gateway=True) as server:
        stubs = Stubs(server.port)
        out["warm"] = warm(stubs, [OWNER_BY_SIZE[s] for s in sizes], qs)
        health = lambda _: stubs.channel.unary_unary(  # noqa: E731
            "/grpc.health.v1.Health/Check", request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)(health_pb2.HealthCheckRequest())
        out["baseline_health_check"] = single(health, list(range(calls)), rounds)
        for size in sizes:
            owner = OWNER_BY_SIZE[size]
            n = calls if size < 100_000 else big_calls
            r_reqs = [_retrieve_req(pb, owner, q) for q in qs[:n]]
            i_reqs = [_inject_req(pb, owner, q) for q in qs[:n]]
            out["owners"][size] = {"owner": owner, "retrieve": single(stubs.engine.Retrieve, r_reqs, rounds),
                                   "inject": single(stubs.engine.Inject, i_reqs, rounds)}
        owner = OWNER_BY_SIZE[10_000]
        r_reqs = [_retrieve_req(pb, owner, q) for q in qs[:calls]]
        i_reqs = [_inject_req(pb, owner, q) for q in qs[:calls]]
        engine = "/memsvc.v1.EngineService/"
        out["concurrent"] = {
            # The ceiling of this server's gRPC layer: a health check does no work of ours.
            "health": concurrent(server.port, "/grpc.health.v1.Health/Check", health_pb2.HealthCheckResponse,
                                 [health_pb2.HealthCheckRequest()], clients, per_client * 5, rounds),
            "retrieve": concurrent(server.port, engine + "Retrieve", pb.RetrieveResponse, r_reqs, clients,
                                   per_client, rounds),
            "inject": concurrent(server.port, engine + "Inject", pb.InjectResponse, i_reqs, clients, per_client,
                                 rounds)}
        r_bodies = [{"apiKeyId": owner, "query": q, "strategy": "hybrid", "maxTokens": 500} for q in qs[:calls]]
        i_bodies = [{"apiKeyId": owner, "provider": "openai", "request": {"model": "gpt-4o", "messages": [
            {"role": "system", "content": SYSTEM}, {"role": "user", "content": q}]}} for q in qs[:calls]]
        for rpc, path, bodies, reqs, fn in (("retrieve", "/api/memory/retrieve", r_bodies, r_reqs, stubs.engine.Retrieve),
                                            ("inject", "/api/memory/inject", i_bodies, i_reqs, stubs.engine.Inject)):
            rest = rest_caller(server.rest_port, path)
            rest(bodies[0])
            out["rest"][rpc] = interleaved(rest, fn, bodies, reqs, rounds)
        # Isolation: the same owner (10k facts) in this database of 1M rows and in one that
        # holds only its own 10k, called alternately.
        with ServerProc(db_dir("hot_10k"), gateway=False) as small:
            small_stubs = Stubs(small.port)
            out["warm_10k_db"] = warm(small_stubs, [owner], qs)
            out["isolation"] = {
                "retrieve": interleaved(stubs.engine.Retrieve, small_stubs.engine.Retrieve, r_reqs, r_reqs, rounds),
                "inject": interleaved(stubs.engine.Inject, small_stubs.engine.Inject, i_reqs, i_reqs, rounds)}
            small_stubs.close()
        stubs.close()
    return out


def report(out: dict) -> tuple[str, list[Target]]:
    rows = []
    base = out["baseline_health_check"]["p50_ms"]
    rows.append(["gRPC health check (transport floor)", "—", fmt(base, 2), fmt(out["baseline_health_check"]["p99_ms"], 2)])
    for size, r in out["owners"].items():
        for rpc in ("retrieve", "inject"):
            rows.append([f"{rpc.capitalize()} gRPC", f"{int(size):,}", fmt(r[rpc]["p50_ms"], 2), fmt(r[rpc]["p99_ms"], 2)])
    for rpc in ("retrieve", "inject"):
        iso_ = out["isolation"][rpc]
        rows.append([f"{rpc.capitalize()} gRPC, 1M rows in total (alternating with the next row)", "10,000",
                     fmt(iso_["a"]["p50_ms"], 2), fmt(iso_["a"]["p99_ms"], 2)])
        rows.append([f"{rpc.capitalize()} gRPC, 10k rows in total (its own only)", "10,000",
                     fmt(iso_["b"]["p50_ms"], 2), fmt(iso_["b"]["p99_ms"], 2)])
        rest = out["rest"][rpc]
        rows.append([f"{rpc.capitalize()} REST via Envoy (alternating with the next row)", "10,000",
                     fmt(rest["a"]["p50_ms"], 2), fmt(rest["a"]["p99_ms"], 2)])
        rows.append([f"{rpc.capitalize()} gRPC", "10,000", fmt(rest["b"]["p50_ms"], 2), fmt(rest["b"]["p99_ms"], 2)])
    table = md_table(["hot path (1M rows, 1,000 owners)", "owner facts", "p50 ms", "p99 ms"], rows)
    c = out["concurrent"]
    table += "\n\n" + md_table(["16 concurrent clients, owner of 10k facts", "RPC/s median (min–max)"], [
        ["gRPC health check (baseline: the server's gRPC layer alone)", fmt(c["health"]["rps"], 0)],
        ["Retrieve", fmt(c["retrieve"]["rps"], 0)], ["Inject", fmt(c["inject"]["rps"], 0)]])
    ten = out["owners"][10_000] if 10_000 in out["owners"] else out["owners"]["10000"]
    envoy_added = {rpc: out["rest"][rpc]["diff_p50_ms"]["median"] for rpc in ("retrieve", "inject")}
    ratio = {rpc: out["isolation"][rpc]["ratio_p50"]["median"] for rpc in ("retrieve", "inject")}
    table += (f"\n\nEnvoy adds {envoy_added['retrieve']:.2f} ms (Retrieve) and {envoy_added['inject']:.2f} ms (Inject) "
              f"at p50. Owner of 10k facts, 1M rows in total vs 10k: Retrieve {ratio['retrieve']:.2f}×, "
              f"Inject {ratio['inject']:.2f}×. Hybrid ready {out['warm']['hybrid_ready_s']:.1f} s after the first "
              f"request (static model loaded lazily); first call per owner (cold caches) ms: "
              + ", ".join(f"{k}: {v:.0f}" for k, v in out["warm"]["first_call_ms"].items()) + ".")
    targets = []
    for rpc in ("retrieve", "inject"):
        name = rpc.capitalize()
        targets += [
            Target(f"Hot path {name} p50 @10k facts", ten[rpc]["p50_ms"]["median"], "<=", 3.0, " ms"),
            Target(f"Hot path {name} p99 @10k facts", ten[rpc]["p99_ms"]["median"], "<=", 15.0, " ms"),
            Target(f"{name} throughput, 16 clients", c[rpc]["rps"]["median"], ">=", 1000, " RPC/s",
                   f"health check alone: {c['health']['rps']['median']:.0f} RPC/s"),
            Target(f"Envoy adds at p50 ({name})", envoy_added[rpc], "<=", 1.0, " ms"),
            Target(f"{name} p50, 1M vs 10k total rows", (ratio[rpc] - 1) * 100, "<=", 20.0, " %",
                   f"{ratio[rpc]:.2f}×"),
        ]
    return table, targets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    out = run(calls=args.calls, rounds=args.rounds)
    table, targets = report(out)
    out["targets"] = [t.as_dict() for t in targets]
    write_results("hot_path", out, table, "Hot path")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
