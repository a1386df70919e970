"""What verifying a stored credential costs per request, now that each process caches the
credentials it verified under the store's change counter (memsvc.core.credentials), so a
revocation still holds from the next request in every process.

1. In process, among 1,000 credentials: the event loop's check (`check_now`: the SQLite data
   version read without waiting, then memory), the worker's check (`check`: that plus the
   counter read), an unknown lookup (the counter and the row read), the per-request row
   read that verification was before the cache, beside the cheapest read a request makes
   anyway (the settings version row) and a MEMSVC_API_TOKENS comparison.
2. Through gRPC (`memsvc serve` in a subprocess): ListMemories of an empty tenant with a
   MEMSVC_API_TOKENS token (no store read for auth) and with a stored tenant token, one
   client call by call, then 16 concurrent clients. With `--baseline REV` the same legs run
   against a server of that commit too, interleaved round by round: before and after in
   one run.

    python bench/auth_bench.py [--rounds 5] [--calls 2000] [--baseline HEAD]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, ServerProc, Stubs, agg, baseline_tree, fmt, md_table, write_results  # noqa: E402
from bench.hot_path import concurrent  # noqa: E402

ENV_TOKEN = "bench-env-admin-token"
CLIENTS = 16
LIST_PATH = "/memsvc.v1.MemoryService/ListMemories"


def _per_call_us(fn, calls: int, rounds: int) -> dict[str, float]:
    out = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - started) / calls * 1e6)
    return agg(out)


def in_process(rounds: int, calls: int) -> dict[str, dict[str, float]]:
    from memsvc.api.interceptors import AuthInterceptor
    from memsvc.core.credentials import Credentials, parse_token, secret_matches
    from memsvc.storage.credentials import SqliteCredentialStore
    from memsvc.storage.database import Database
    from memsvc.storage.migrations import apply_migrations
    from memsvc.storage.settings_store import SqliteSettingsStore

    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "memsvc.db")
        apply_migrations(db)
        store = SqliteCredentialStore(db)
        credentials = Credentials(store)
        tokens = [credentials.create(f"c{i}", ["read:memory"], [f"t{i}"], False).token for i in range(1000)]
        token = tokens[500]
        lookup, secret = parse_token(token)
        unknown = "msk_000000000000_" + "x" * 43
        interceptor = AuthInterceptor(("a" * 32, "b" * 32, ENV_TOKEN), credentials)
        settings = SqliteSettingsStore(db)
        credentials.check(token)  # cached, and the change hint recorded
        assert credentials.check_now(token) is not None, "the event loop's check missed the cache"

        def row_read() -> bool:  # what every request did before the cache
            row = store.by_lookup(lookup)
            return secret_matches(secret, row.digest if row else None)

        result = {
            "settings version read (baseline)": _per_call_us(settings.settings_version, calls, rounds),
            "event loop check, cached (data version + memory)": _per_call_us(
                lambda: credentials.check_now(token), calls, rounds
            ),
            "worker check, cached (+ counter read)": _per_call_us(lambda: credentials.check(token), calls, rounds),
            "worker check, unknown lookup (+ row read)": _per_call_us(
                lambda: credentials.check(unknown), calls, rounds
            ),
            "row read per request (before the cache)": _per_call_us(row_read, calls, rounds),
            "MEMSVC_API_TOKENS compare (3 tokens)": _per_call_us(
                lambda: interceptor._configured(ENV_TOKEN), calls, rounds
            ),
        }
        db.close()
    return result


def _tenant_token(data: Path, root: Path) -> str:
    """A stored tenant token in a fresh data dir, created by the code of `root`'s tree (the
    schema must be the one that server migrates to)."""
    import subprocess

    script = (
        "import sys; from pathlib import Path; from memsvc.core.credentials import Credentials;"
        "from memsvc.storage.credentials import SqliteCredentialStore; from memsvc.storage.database import Database;"
        "from memsvc.storage.migrations import apply_migrations;"
        "db = Database(Path(sys.argv[1]) / 'memsvc.db'); apply_migrations(db);"
        "print(Credentials(SqliteCredentialStore(db)).create('bench', ['read:memory'], ['A'], False).token);"
        "db.close()"
    )
    return subprocess.run(
        [sys.executable, "-c", script, str(data)], cwd=str(root), capture_output=True, text=True, check=True
    ).stdout.strip()


def through_grpc(rounds: int, calls: int, trees: dict[str, Path]) -> dict[str, dict[str, dict]]:
    """Per tree (label → source tree): per-call µs of both tokens and 16-client RPC/s with the
    stored one; the servers run side by side and the rounds alternate between them."""
    from memsvc.v1 import memory_pb2

    request = memory_pb2.ListMemoriesRequest(api_key_id="A", limit=1)
    with tempfile.TemporaryDirectory() as tmp:
        servers, stubs, stored = {}, {}, {}
        try:
            for label, root in trees.items():
                data = Path(tmp) / label / "data"
                stored[label] = _tenant_token(data, root)
                servers[label] = ServerProc(data, extra_env={"MEMSVC_API_TOKENS": ENV_TOKEN}, root=root).start()
                stubs[label] = Stubs(servers[label].port)

            def per_call(label: str, token: str):
                metadata = (("authorization", f"Bearer {token}"),)
                return lambda: stubs[label].memory.ListMemories(request, metadata=metadata, timeout=10)

            for label in trees:  # warm both paths of every server
                for token in (ENV_TOKEN, stored[label]):
                    for _ in range(200):
                        per_call(label, token)()
            out = {label: {"env": [], "stored": [], "stored_16": []} for label in trees}
            for _ in range(rounds):  # interleaved, so drift hits every leg alike
                for label in trees:
                    out[label]["env"].append(_per_call_us(per_call(label, ENV_TOKEN), calls, 1)["median"])
                    out[label]["stored"].append(_per_call_us(per_call(label, stored[label]), calls, 1)["median"])
                    many = concurrent(
                        servers[label].port,
                        LIST_PATH,
                        memory_pb2.ListMemoriesResponse,
                        [request],
                        CLIENTS,
                        max(20, calls // CLIENTS),
                        1,
                        metadata=(("authorization", f"Bearer {stored[label]}"),),
                    )
                    out[label]["stored_16"].append(many["rps"]["median"])
        finally:
            for label in list(servers):
                stubs[label].close()
                servers[label].stop()
    return {
        label: {
            "ListMemories, MEMSVC_API_TOKENS token (µs)": agg(legs["env"]),
            "ListMemories, stored tenant token (µs)": agg(legs["stored"]),
            f"ListMemories, stored tenant token, {CLIENTS} clients (RPC/s)": agg(legs["stored_16"]),
        }
        for label, legs in out.items()
    }


def _grpc_rows(remote: dict[str, dict[str, dict]]) -> list[list[str]]:
    rows = []
    for label, legs in remote.items():
        env = legs["ListMemories, MEMSVC_API_TOKENS token (µs)"]["median"]
        for name, a in legs.items():
            unit = " RPC/s" if name.endswith("(RPC/s)") else " µs"
            ratio = "" if unit == " RPC/s" else f"{a['median'] / env:.2f}× of the env-token call"
            rows.append([f"{label}: {name}", fmt(a, 1, unit), ratio])
    if len(remote) == 2:
        (before, b), (after, a) = remote.items()
        for name in a:
            rows.append([f"{after} / {before}: {name}", f"{a[name]['median'] / b[name]['median']:.2f}×", ""])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--baseline", help="also serve this commit (e.g. HEAD), interleaved: before/after in one run")
    args = parser.parse_args()
    local = in_process(args.rounds, args.calls)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {f"before ({args.baseline})": baseline_tree(args.baseline, Path(tmp) / "tree")} if args.baseline else {}
        trees["this tree"] = ROOT
        remote = through_grpc(args.rounds, max(100, args.calls // 4), trees)
    base = local["settings version read (baseline)"]["median"]
    rows = [[name, fmt(a, 1, " µs"), f"{a['median'] / base:.2f}×"] for name, a in local.items()]
    table = md_table(["per call", "median (min–max)", "ratio"], rows + _grpc_rows(remote))
    write_results(
        "auth",
        {"in_process_us": local, "grpc": remote, "baseline": args.baseline, "rounds": args.rounds, "calls": args.calls},
        table,
        "Credential verification per request",
    )


if __name__ == "__main__":
    main()
