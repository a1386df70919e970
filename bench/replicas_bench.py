"""Scale-out on one machine: Retrieve (hybrid, static model) of an owner of 10k facts served
by 1, 2 and 3 memsvc replicas (`serve --database-url … --processes 1` each) sharing one
PostgreSQL, beside the SQLite single node (`serve` without a database URL, its default
process count and one process) on the same facts; and what a PostgreSQL round trip costs a
request.

One PostgreSQL 16 + pgvector (tests/support/postgres.py: the dev extra's binaries, loopback,
fsync off as in the tests) and every server run at once; the facts are loaded once per store
with CreateMemories (500 a call). Measured per configuration, the configurations alternating
round after round so this shared machine's drift hits them alike: single-client p50/p99
(calls round robin over the replicas' ports), 16 concurrent clients' Retrieves per second
(client i on replica i mod N) and, as the ceiling of the same servers' gRPC layer, health
checks per second with the same clients.

In process (this bench's interpreter, memsvc's App on each store, the access counters'
background write a no-op): a bare `SELECT 1` (one round trip), a `SELECT 1` read transaction
through PgDatabase and through SQLite's Database, the same Retrieve on both stores
alternating call by call, and the statements one Retrieve sends to PostgreSQL (psycopg's
cursor execute wrapped in this process only), its read transactions and commits.

The machine has 2 cores shared by PostgreSQL, every replica and the clients: more replicas
cannot add throughput here; what the rows show is the cost of the shared store and of the
replicas' coordination, not a scale-out figure.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    CACHE,
    QUIET_PORTS,
    STATIC_CACHE,
    ServerProc,
    Stubs,
    agg,
    enable_static,
    fmt,
    interleaved_n,
    md_table,
    one_blas_thread,
    pct,
    postgres,
    server_pids,
    server_shape,
    warm_engine,
    write_results,
)
from bench.facts import owner_facts
from bench.facts import queries as make_queries
from bench.hot_path import _retrieve_req, concurrent, warm  # noqa: E402
from bench.writes_bench import _warm_static  # noqa: E402

OWNER = "owner-0001"
BATCH = 500
REPLICAS = (1, 2, 3)
ENGINE = "/memsvc.v1.EngineService/"


# ------------------------------------------------------------------------------- loading


def load(port: int, facts: int) -> dict:
    """The static model warmed (writes embed at once), the settings stored (hybrid, static),
    then the owner's facts in CreateMemories calls of BATCH; how long it took."""
    from memsvc.v1 import memory_pb2

    stubs = Stubs(port)
    try:
        enable_static(stubs)
        _warm_static(port, connections=1)
        items = [
            memory_pb2.CreateMemoryRequest(api_key_id=OWNER, key=f.key, content=f.content, type=f.type)
            for f in owner_facts(OWNER, facts, seed=1)
        ]
        t0 = time.perf_counter()
        stored = sum(
            stubs.memory.CreateMemories(memory_pb2.CreateMemoriesRequest(memories=items[i : i + BATCH])).stored_count
            for i in range(0, len(items), BATCH)
        )
        seconds = time.perf_counter() - t0
    finally:
        stubs.close()
    return {"stored": stored, "seconds": round(seconds, 2), "per_s": round(stored / seconds)}


def sqlite_dirs(root: Path, facts: int) -> tuple[Path, Path, dict]:
    """Two SQLite data dirs holding the same facts (loaded once, then copied): the
    default-process server and the one-process server must not share a data dir."""
    first = root / "sqlite-default" / "data"
    with ServerProc(first, processes=1, extra_env=QUIET_PORTS) as loader:
        loaded = load(loader.port, facts)
    second = root / "sqlite-one" / "data"
    shutil.copytree(first, second, ignore=shutil.ignore_patterns("prometheus", "*.sock"))
    return first, second, loaded


# ------------------------------------------------------------------------------- measuring


class RoundRobin:
    """One client's Retrieve calls spread over several servers, one after the other."""

    def __init__(self, ports: Sequence[int]):
        self.stubs = [Stubs(p) for p in ports]
        self._next = itertools.cycle(self.stubs)

    def __call__(self, req: Any) -> Any:
        return next(self._next).engine.Retrieve(req)

    def close(self) -> None:
        for s in self.stubs:
            s.close()


def one_round(ports: Sequence[int], reqs: list, clients: int, per_client: int) -> dict:
    """Single-client p50/p99 (round robin), then 16 clients' Retrieve and health-check rates.
    Each measured pass follows the same pass untimed, so every process has the calls' words
    in its caches (they expire 30 s after they were loaded, and a round of the other
    configurations takes longer than that): steady state, not the first call after a pause."""
    from grpc_health.v1 import health_pb2

    from memsvc.v1 import engine_pb2 as pb

    for _ in range(2):  # each replica gets the same calls untimed first
        caller = RoundRobin(ports)
        try:
            times = timed_each(caller, reqs)
        finally:
            caller.close()
    for _ in range(2):  # the same: the first of the two is the untimed one
        retrieve = concurrent(ports, ENGINE + "Retrieve", pb.RetrieveResponse, reqs, clients, per_client, 1)
    health = concurrent(
        ports,
        "/grpc.health.v1.Health/Check",
        health_pb2.HealthCheckResponse,
        [health_pb2.HealthCheckRequest()],
        clients,
        per_client * 5,
        1,
    )
    return {
        "p50": pct(times, 50),
        "p99": pct(times, 99),
        "rps": retrieve["rps"]["median"],
        "health_rps": health["rps"]["median"],
    }


def timed_each(fn: Callable[[Any], Any], items: list) -> list[float]:
    out = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def measure(configs: dict[str, list[int]], reqs: list, rounds: int, clients: int, per_client: int) -> dict:
    """Every configuration once per round, in turn; per configuration the rounds' figures
    as median (min–max)."""
    per: dict[str, list[dict]] = {name: [] for name in configs}
    for _ in range(rounds):
        for name, ports in configs.items():
            per[name].append(one_round(ports, reqs, clients, per_client))
    return {
        name: {key: agg([r[key] for r in rs]) for key in ("p50", "p99", "rps", "health_rps")}
        | {"calls_per_round": len(reqs), "clients": clients}
        for name, rs in per.items()
    }


def warm_all(servers: Sequence[ServerProc], qs: list[str]) -> list[dict]:
    """Hybrid ready and the owner's caches filled in every process of every server."""
    out = []
    for server in servers:
        stubs = Stubs(server.port)
        try:
            extra = 0 if server.expected_processes() == 1 else 8
            out.append(warm(stubs, server.port, [OWNER], qs, connections=extra))
        finally:
            stubs.close()
    return out


def memsvc_connections(pg: Any) -> int:
    import psycopg

    with psycopg.connect(pg.url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'memsvc'").fetchone()[0]


# ------------------------------------------------------------------------------- in process


def _reader_app(config: Any) -> Any:
    """memsvc's App in this process, its access counters' background write a no-op (so
    every statement counted during the Retrieves is theirs)."""
    from memsvc.app import App
    from memsvc.core.access import AccessRecorder

    app = App.open(config)
    app.engine.access = AccessRecorder(lambda batch: None, app.background, config.access_flush_s)
    return app


def _config(scratch: Path, **extra: Any) -> Any:
    from memsvc.config import Config

    return Config(
        memory_dir=scratch / "memory",
        static_cache_dir=STATIC_CACHE,
        gateway=False,
        metrics_port=-1,
        mcp_port=-1,
        reflection_sweep_s=86400.0,
        **extra,
    )


@contextmanager
def counting_statements() -> Iterator[tuple[Counter, Counter]]:
    """Every statement psycopg sends from this process while the block runs: how many by
    their first word (BEGIN, SELECT, COMMIT, …), and the milliseconds spent in each distinct
    statement's execute (the round trip and the server's work: a client cursor has its rows
    once execute returns), by the statement's first 90 characters."""
    import psycopg

    counts: Counter = Counter()
    spent: Counter = Counter()
    original, original_many = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def text(query: Any) -> str:
        return query.decode() if isinstance(query, bytes) else query if isinstance(query, str) else "composed"

    def wrap(call: Callable) -> Callable:
        def counted(self, query, *args, **kwargs):
            sql = text(query)
            counts[(sql.split(None, 1) or [""])[0].upper()] += 1
            t0 = time.perf_counter()
            try:
                return call(self, query, *args, **kwargs)
            finally:
                spent[" ".join(sql.split())[:90]] += (time.perf_counter() - t0) * 1000.0

        return counted

    psycopg.Cursor.execute, psycopg.Cursor.executemany = wrap(original), wrap(original_many)
    try:
        yield counts, spent
    finally:
        psycopg.Cursor.execute, psycopg.Cursor.executemany = original, original_many


def round_trips(url: str, pg_pid: int, sqlite_dir: Path, calls: int, rounds: int) -> dict:
    """A bare SELECT 1 on one connection, a SELECT 1 read transaction through each store's
    database object, then the same Retrieves in-process on both stores (alternating), and
    what one Retrieve sends to PostgreSQL."""
    import psycopg

    from memsvc.api import convert
    from memsvc.v1 import engine_pb2 as pb

    one_blas_thread()
    out: dict = {}
    CACHE.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="replicas-", dir=CACHE))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, scratch, True)
        bare = stack.enter_context(psycopg.connect(url, autocommit=True))
        pg_app = _reader_app(_config(scratch / "pg", data_dir=scratch / "pg", database_url=url))
        stack.callback(pg_app.close)
        lite_app = _reader_app(_config(scratch / "lite", data_dir=sqlite_dir))
        stack.callback(lite_app.close)

        def read_select(db: Any) -> None:
            with db.read() as conn:
                conn.execute("SELECT 1").fetchall()

        n = calls * 5
        out["select"] = interleaved_n(
            {
                "bare": (lambda _: bare.execute("SELECT 1").fetchone(), range(n)),
                "pg_read": (lambda _: read_select(pg_app.database), range(n)),
                "sqlite_read": (lambda _: read_select(lite_app.database), range(n)),
            },
            rounds,
        )
        qs = make_queries(max(calls, 100))[:calls]
        args = [convert.retrieve_args_from_pb(_retrieve_req(pb, OWNER, q)) for q in qs]
        out["pg_hybrid_ready_s"] = warm_engine(pg_app.engine, OWNER, qs)
        out["sqlite_hybrid_ready_s"] = warm_engine(lite_app.engine, OWNER, qs)
        for a in args:  # the measured calls once untimed on both: their words in the caches
            lite_app.engine.retrieve(**a)
            pg_app.engine.retrieve(**a)
        out["retrieve"] = interleaved_n(
            {
                "sqlite": (lambda a: lite_app.engine.retrieve(**a), args),
                "pg": (lambda a: pg_app.engine.retrieve(**a), args),
            },
            rounds,
        )
        out["per_retrieve"] = _statements(pg_app, args, pg_pid)
    return out


def cpu_s(pids: Sequence[int]) -> float:
    """CPU seconds (user + system) the processes have used so far (/proc/PID/stat)."""
    import os

    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _statements(app: Any, args: list[dict], pg_pid: int) -> dict:
    """Per Retrieve: statements, transactions, wall time, and the CPU time of this process
    (the engine) and of PostgreSQL's processes (the queries)."""
    db = app.database
    reads, commits = db.read_transactions, db.commits
    pg_pids = server_pids(pg_pid)
    pg0, own0, t0 = cpu_s(pg_pids), time.process_time(), time.perf_counter()
    with counting_statements() as (counts, spent):
        for a in args:
            r = app.engine.retrieve(**a)
    wall, own, pg = time.perf_counter() - t0, time.process_time() - own0, cpu_s(pg_pids) - pg0
    n = len(args)
    return {
        "statements": sum(counts.values()) / n,
        "by_word": {k: v / n for k, v in counts.most_common()},
        "ms_by_statement": {k: v / n for k, v in spent.most_common()},
        "read_transactions": (db.read_transactions - reads) / n,
        "commits": (db.commits - commits) / n,
        "wall_ms": wall * 1000 / n,
        "engine_cpu_ms": own * 1000 / n,
        "postgres_cpu_ms": pg * 1000 / n,
        "strategy_used": r.resolution.strategy_used,
        "calls": n,
    }


# ------------------------------------------------------------------------------- run, report


def run(
    facts: int = 10_000,
    calls: int = 100,
    rounds: int = 3,
    clients: int = 16,
    per_client: int = 25,
    replicas: Sequence[int] = REPLICAS,
) -> dict:
    from memsvc.v1 import engine_pb2 as pb

    qs = make_queries(max(calls, 100))
    reqs = [_retrieve_req(pb, OWNER, q) for q in qs[:calls]]
    CACHE.mkdir(parents=True, exist_ok=True)  # a fresh checkout has no cache yet
    root = Path(tempfile.mkdtemp(prefix="replicas-", dir=CACHE))
    out: dict = {"facts": facts, "owner": OWNER, "replicas": list(replicas)}
    try:
        with postgres() as pg, ExitStack() as stack:
            url = pg.create_database("memsvc_replicas")
            pg_env = {**QUIET_PORTS, "MEMSVC_DATABASE_URL": url}
            reps = [
                stack.enter_context(ServerProc(root / f"pg-{i}" / "data", processes=1, extra_env=pg_env))
                for i in range(max(replicas))
            ]
            out["load_postgres"] = load(reps[0].port, facts)
            lite_default, lite_one, out["load_sqlite"] = sqlite_dirs(root, facts)
            lite = [
                stack.enter_context(ServerProc(lite_default, extra_env=QUIET_PORTS)),
                stack.enter_context(ServerProc(lite_one, processes=1, extra_env=QUIET_PORTS)),
            ]
            out["warm"] = warm_all([*reps, *lite], qs)
            out["servers"] = {
                "sqlite_default": server_shape(lite[0]),
                "sqlite_one": server_shape(lite[1]),
                "postgres_replica": server_shape(reps[0]),
            }
            configs = {
                "sqlite_one": [lite[1].port],
                "sqlite_default": [lite[0].port],
                **{f"pg_{n}": [r.port for r in reps[:n]] for n in replicas},
            }
            out["measured"] = measure(configs, reqs, rounds, clients, per_client)
            out["memsvc_connections"] = memsvc_connections(pg)
            out["pool_size"] = _pool_size()
            stack.close()  # the servers stop: the in-process figures run on a quiet machine
            out["in_process"] = round_trips(url, pg.pid, lite_one, calls, rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def _pool_size() -> int:
    """MEMSVC_DATABASE_POOL_SIZE's default (the replicas run with it)."""
    from memsvc.config import Config

    return Config.__dataclass_fields__["database_pool_size"].default


def _label(name: str, out: dict) -> str:
    if name == "sqlite_one":
        return "SQLite, one node, 1 process (baseline)"
    if name == "sqlite_default":
        return f"SQLite, one node, default {out['servers']['sqlite_default']['serving_processes']} processes"
    n = int(name.split("_")[1])
    return f"PostgreSQL, {n} replica{'s' if n > 1 else ''} × 1 process"


def report(out: dict) -> tuple[str, list]:
    m = out["measured"]
    rows = [
        [_label(k, out), fmt(v["p50"], 2), fmt(v["p99"], 2), fmt(v["rps"], 0), fmt(v["health_rps"], 0)]
        for k, v in m.items()
    ]
    clients = next(iter(m.values()))["clients"]
    table = md_table(
        [
            f"Retrieve, owner of {out['facts']:,} facts, hybrid static",
            "1 client p50 ms",
            "p99 ms",
            f"{clients} clients RPC/s",
            f"health checks, {clients} clients RPC/s",
        ],
        rows,
    )
    lp, ls = out["load_postgres"], out["load_sqlite"]
    table += (
        f"\n\nThis machine has 2 cores, shared by PostgreSQL, every replica and the clients: more replicas "
        "cannot add throughput here (the rows measure what the shared store and more processes cost, not "
        "scale-out). Configurations alternate round after round (medians of the rounds, min–max); one client "
        "calls the replicas round robin, client i of the concurrent ones calls replica i mod N. Load with "
        f"CreateMemories ({BATCH} a call, 1 client): PostgreSQL {lp['per_s']:,}/s, SQLite {ls['per_s']:,}/s. "
        f"PostgreSQL as the tests run it (fsync off). Connections memsvc held to PostgreSQL with "
        f"{max(out['replicas'])} replicas of one process: {out['memsvc_connections']} (pool at most "
        f"{out['pool_size']} per process, plus one for the change counter)."
    )
    ip = out["in_process"]
    s, r, per = ip["select"], ip["retrieve"], ip["per_retrieve"]
    rows2 = [
        ["SELECT 1 on one connection (one round trip)", fmt(s["bare"]["p50_ms"], 3), fmt(s["bare"]["p99_ms"], 3)],
        [
            "SELECT 1 read transaction, PgDatabase (BEGIN, SELECT, COMMIT)",
            fmt(s["pg_read"]["p50_ms"], 3),
            fmt(s["pg_read"]["p99_ms"], 3),
        ],
        [
            "SELECT 1 read transaction, SQLite Database (baseline)",
            fmt(s["sqlite_read"]["p50_ms"], 3),
            fmt(s["sqlite_read"]["p99_ms"], 3),
        ],
        ["Retrieve in process, SQLite (baseline)", fmt(r["sqlite"]["p50_ms"], 2), fmt(r["sqlite"]["p99_ms"], 2)],
        ["Retrieve in process, PostgreSQL", fmt(r["pg"]["p50_ms"], 2), fmt(r["pg"]["p99_ms"], 2)],
    ]
    table += "\n\n" + md_table(["in process, each group alternating call by call", "p50 ms", "p99 ms"], rows2)
    rt = s["bare"]["p50_ms"]["median"]
    table += (
        f"\n\nOne Retrieve on PostgreSQL sends {per['statements']:.1f} statements ("
        + ", ".join(f"{k} {v:.1f}" for k, v in per["by_word"].items())
        + f") in {per['read_transactions']:.1f} read transactions and {per['commits']:.1f} commits "
        f"(tier used: {per['strategy_used']}); at {rt:.3f} ms a round trip that is ≈"
        f"{per['statements'] * rt:.1f} ms of waiting on the database per Retrieve, on loopback. Per Retrieve "
        f"({per['calls']} back to back): {per['wall_ms']:.1f} ms wall, of which {per['engine_cpu_ms']:.1f} ms "
        f"CPU in memsvc's engine and {per['postgres_cpu_ms']:.1f} ms CPU in PostgreSQL's processes; "
        f"{sum(per['ms_by_statement'].values()):.1f} ms inside psycopg's execute, the slowest statements: "
        + "; ".join(f"{v:.1f} ms `{k[:60]}…`" for k, v in list(per["ms_by_statement"].items())[:3])
        + "."
    )
    return table, []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=100, help="single-client calls per round and configuration")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--per-client", type=int, default=25, help="calls per client and round (health: 5×)")
    args = parser.parse_args()
    out = run(facts=args.facts, calls=args.calls, rounds=args.rounds, clients=args.clients, per_client=args.per_client)
    table, _ = report(out)
    out["targets"] = []
    write_results("replicas", out, table, "Scale-out: replicas on one PostgreSQL")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
