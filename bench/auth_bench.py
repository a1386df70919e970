"""What verifying a stored credential on every request costs (no cache, so a revocation
holds at the next request in every process).

1. In process: `Credentials.authenticate` (one indexed read by lookup + SHA-256 +
   constant-time compare) among 1,000 credentials, beside the cheapest read a request
   makes anyway (the settings version row) and a MEMSVC_API_TOKENS comparison.
2. Through gRPC (`memsvc serve` in a subprocess): ListMemories of an empty tenant with a
   MEMSVC_API_TOKENS token (no database read for auth) and with a stored tenant token.

    python bench/auth_bench.py [--rounds 5] [--calls 2000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ServerProc, Stubs, agg, fmt, md_table, write_results  # noqa: E402

ENV_TOKEN = "bench-env-admin-token"


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
    from memsvc.core.credentials import Credentials
    from memsvc.storage.credentials import SqliteCredentialStore
    from memsvc.storage.database import Database
    from memsvc.storage.migrations import apply_migrations
    from memsvc.storage.settings_store import SqliteSettingsStore

    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "memsvc.db")
        apply_migrations(db)
        credentials = Credentials(SqliteCredentialStore(db))
        tokens = [credentials.create(f"c{i}", ["read:memory"], [f"t{i}"], False).token for i in range(1000)]
        token = tokens[500]
        unknown = "msk_000000000000_" + "x" * 43
        interceptor = AuthInterceptor(("a" * 32, "b" * 32, ENV_TOKEN), credentials)
        settings = SqliteSettingsStore(db)
        result = {
            "settings version read (baseline)": _per_call_us(settings.settings_version, calls, rounds),
            "stored credential, valid": _per_call_us(lambda: credentials.authenticate(token), calls, rounds),
            "stored credential, unknown lookup": _per_call_us(lambda: credentials.authenticate(unknown), calls, rounds),
            "MEMSVC_API_TOKENS compare (3 tokens)": _per_call_us(lambda: interceptor._configured(ENV_TOKEN), calls,
                                                                 rounds),
        }
        db.close()
    return result


def through_grpc(rounds: int, calls: int) -> dict[str, dict[str, float]]:
    from memsvc.core.credentials import Credentials
    from memsvc.storage.credentials import SqliteCredentialStore
    from memsvc.storage.database import Database
    from memsvc.storage.migrations import apply_migrations
    from memsvc.v1 import memory_pb2

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        db = Database(data / "memsvc.db")
        apply_migrations(db)
        tenant = Credentials(SqliteCredentialStore(db)).create("bench", ["read:memory"], ["A"], False).token
        db.close()
        with ServerProc(data, extra_env={"MEMSVC_API_TOKENS": ENV_TOKEN}) as server:
            stubs = Stubs(server.port)
            request = memory_pb2.ListMemoriesRequest(api_key_id="A", limit=1)

            def per_call(token: str):
                metadata = (("authorization", f"Bearer {token}"),)
                return lambda: stubs.memory.ListMemories(request, metadata=metadata, timeout=10)

            for token in (ENV_TOKEN, tenant):  # warm both paths
                for _ in range(200):
                    per_call(token)()
            env_rounds, stored_rounds = [], []
            for _ in range(rounds):  # interleaved, so drift hits both alike
                env_rounds.append(_per_call_us(per_call(ENV_TOKEN), calls, 1)["median"])
                stored_rounds.append(_per_call_us(per_call(tenant), calls, 1)["median"])
            stubs.close()
    return {"ListMemories, MEMSVC_API_TOKENS token": agg(env_rounds),
            "ListMemories, stored tenant token": agg(stored_rounds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    local = in_process(args.rounds, args.calls)
    remote = through_grpc(args.rounds, max(100, args.calls // 4))
    base = local["settings version read (baseline)"]["median"]
    rows = [[name, fmt(a, 1, " µs"), f"{a['median'] / base:.2f}×"] for name, a in local.items()]
    env = remote["ListMemories, MEMSVC_API_TOKENS token"]["median"]
    rows += [[name, fmt(a, 1, " µs"), f"{a['median'] / env:.2f}× of the env-token call"] for name, a in remote.items()]
    table = md_table(["per call", "median (min–max)", "ratio"], rows)
    write_results("auth", {"in_process_us": local, "grpc_us": remote, "rounds": args.rounds, "calls": args.calls},
                  table, "Credential verification per request")


if __name__ == "__main__":
    main()
