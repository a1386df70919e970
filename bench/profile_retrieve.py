"""Where a Retrieve's time goes (hybrid, static model, the owner of 10k facts among 1M rows):
a cProfile of N Retrieves called in-process on the hot-path database (the engine floor), and
a py-spy record of the server process under one client's back-to-back Retrieve load.

Both are summarised by where the time is spent: SQL (SQLite calls and the storage code that
maps rows), embedding (the static model), NumPy (the vector scan), Python ranking and
orchestration (the core), conversion (protobuf ⇄ domain), the API layer, the event loop and
thread-pool hops, gRPC. Writes bench/results/profile_retrieve.txt (top functions by own and
cumulative time, plain text), .json (the summary) and .md (the table).

cProfile counts calls exactly but adds a fixed cost to every Python call, so Python-heavy
code looks heavier than it is; py-spy samples the real server without that cost (here
without pausing it: --nonblocking), at the price of sampling noise. The unprofiled p50 of
the same calls is printed beside each.
"""

from __future__ import annotations

import argparse
import cProfile
import linecache
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    CACHE,
    QUIET_PORTS,
    RESULTS,
    ServerProc,
    Stubs,
    md_table,
    open_reader_app,
    pct,
    server_shape,
    warm_engine,
    write_results,
)
from bench.dataset import OWNER_BY_SIZE, db_dir, ensure_all  # noqa: E402
from bench.facts import queries as make_queries  # noqa: E402
from bench.hot_path import _retrieve_req, warm  # noqa: E402

OWNER = OWNER_BY_SIZE[10_000]

#: (category, substrings of a frame's file or a builtin's name), first match wins.
CATEGORIES = [
    ("gRPC (C core, Cython)", ("grpc/", "grpc.")),
    ("conversion (protobuf ⇄ domain)", ("google/protobuf", "memsvc/api/convert.py", "upb", "_message")),
    ("API layer (interceptors, decoding)", ("memsvc/api/",)),
    (
        "event loop, thread-pool hops",
        ("asyncio/", "concurrent/", "threading.py", "queue.py", "selectors.py", "contextvars", "_asyncio", "_thread"),
    ),
    ("NumPy (vector scan)", ("memsvc/storage/vector_cache.py", "numpy", "ndarray", "threadpoolctl")),
    ("SQL (SQLite calls, row mapping)", ("memsvc/storage/", "apsw")),
    ("embedding (static model)", ("memsvc/embedding/", "model2vec", "tokenizers")),
    ("Python ranking, orchestration (core)", ("memsvc/core/", "memsvc/vectors/")),
]
OTHER = "other (stdlib, builtins)"


def categorize(location: str) -> str:
    """The category of a frame's file path or a builtin's name."""
    for name, needles in CATEGORIES:
        if any(n in location for n in needles):
            return name
    return OTHER


def _short(path: str) -> str:
    """A file path from its package on (site-packages/ and the checkout cut off)."""
    for marker in ("site-packages/", "/lib/python3.11/", "/work/main/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


# ------------------------------------------------------------------------------- cProfile


def _label(func: tuple) -> str:
    file, line, name = func
    return name if file == "~" else f"{name} ({_short(file)}:{line})"


def _own_category(func: tuple, stats: dict) -> str:
    """A builtin's time goes to what it is (apsw, numpy, ...) or else to its biggest caller's
    category: `sorted()` called by the ranking is ranking time."""
    file, _, name = func
    if file != "~":
        return categorize(_short(file))
    found = categorize(name)
    if found != OTHER:
        return found
    callers = stats[func][4]
    if not callers:
        return OTHER
    caller = max(callers, key=lambda c: callers[c][2] if isinstance(callers[c], tuple) else 0)
    return categorize(_short(caller[0])) if caller[0] != "~" else OTHER


def cprofile_floor(calls: int, top: int) -> dict:
    """N in-process Retrieves, profiled, after the same N unprofiled (their p50 beside)."""
    from memsvc.api import convert
    from memsvc.v1 import engine_pb2 as pb

    qs = make_queries(max(calls, 100))[:calls]
    args = [convert.retrieve_args_from_pb(_retrieve_req(pb, OWNER, q)) for q in qs]
    app = open_reader_app(db_dir("hot_1m"), CACHE / "profile_scratch")
    try:
        warm_engine(app.engine, OWNER, qs)
        engine = app.engine
        plain = []
        for a in args:
            t0 = time.perf_counter()
            engine.retrieve(**a)
            plain.append((time.perf_counter() - t0) * 1000)
        profile = cProfile.Profile()
        t0 = time.perf_counter()
        profile.enable()
        for a in args:
            engine.retrieve(**a)
        profile.disable()
        wall = time.perf_counter() - t0
    finally:
        app.close()
    stats = pstats.Stats(profile).stats  # func -> (primitive calls, calls, own s, cumulative s, callers)
    by_cat: Counter[str] = Counter()
    for func, (_, _, own, _, _) in stats.items():
        by_cat[_own_category(func, stats)] += own
    rows = [
        {
            "function": _label(f),
            "calls": nc,
            "own_ms_per_call": own * 1000 / calls,
            "cum_ms_per_call": cum * 1000 / calls,
        }
        for f, (_, nc, own, cum, _) in stats.items()
    ]
    return {
        "calls": calls,
        "unprofiled_p50_ms": pct(plain, 50),
        "profiled_ms_per_call": wall * 1000 / calls,
        "categories_ms_per_call": {k: v * 1000 / calls for k, v in by_cat.most_common()},
        "top_own": sorted(rows, key=lambda r: -r["own_ms_per_call"])[:top],
        "top_cumulative": sorted(rows, key=lambda r: -r["cum_ms_per_call"])[:top],
    }


# ------------------------------------------------------------------------------- py-spy


def py_spy() -> str | None:
    """The py-spy binary of this venv (the dev extra), else one on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else shutil.which("py-spy")


def parse_raw(text: str) -> list[tuple[list[str], int]]:
    """py-spy's raw (collapsed) stacks: `frame;frame;... count` per line, root first; the
    `process N:"cmd"` root frame that --subprocesses adds is dropped."""
    stacks = []
    for line in text.splitlines():
        frames, _, count = line.rpartition(" ")
        if not frames or not count.isdigit():
            continue
        parts = [f for f in frames.split(";") if not f.startswith("process ")]
        if parts:
            stacks.append((parts, int(count)))
    return stacks


#: Source text of a call that blocks: a thread sampled there is waiting (a worker for work,
#: the event loop in epoll), which py-spy's --nonblocking sampling cannot always tell.
WAITS = ("get(block=True)", ".poll(", ".wait(", ".acquire(", ".select(", "sleep(")


def is_wait(frame: str) -> bool:
    """Whether the sampled line of `func (path:line)` is a blocking wait (read from the source)."""
    path, _, line = frame.rpartition(" (")[2].rstrip(")").rpartition(":")
    if not line.isdigit():
        return False
    text = linecache.getline(path, int(line))
    return any(w in text for w in WAITS)


def _frame_file(frame: str) -> str:
    """`func (/full/path:line)` → the path from its package on."""
    inside = frame.rpartition(" (")[2].rstrip(")")
    return _short(inside.rpartition(":")[0] or inside)


def _frame_function(frame: str) -> str:
    """`func (path:line)` → `func (path)`: the line dropped, so a function's lines add up."""
    return f"{frame.rpartition(' (')[0]} ({_frame_file(frame)})"


def summarize_stacks(stacks: list[tuple[list[str], int]], ms_per_sample: float, calls: int, top: int) -> dict:
    """Own time by the leaf frame's function and category, cumulative time by every function
    on the stack (once per sample), in ms per Retrieve; samples of a thread waiting (see
    WAITS) are counted apart, not as time spent."""
    own: Counter[str] = Counter()
    cum: Counter[str] = Counter()
    cats: Counter[str] = Counter()
    waits: Counter[str] = Counter()
    for frames, count in stacks:
        if is_wait(frames[-1]):
            waits[_frame_function(frames[-1])] += count
            continue
        own[_frame_function(frames[-1])] += count
        cats[categorize(_frame_file(frames[-1]))] += count
        for fn in {_frame_function(f) for f in frames}:
            cum[fn] += count
    scale = ms_per_sample / max(calls, 1)
    return {
        "samples": sum(c for _, c in stacks),
        "wait_samples": dict(waits.most_common()),
        "categories_ms_per_call": {k: v * scale for k, v in cats.most_common()},
        "top_own": [{"function": k, "samples": v, "own_ms_per_call": v * scale} for k, v in own.most_common(top)],
        "top_cumulative": [
            {"function": k, "samples": v, "cum_ms_per_call": v * scale} for k, v in cum.most_common(top)
        ],
    }


def pyspy_server(seconds: float, rate: int, top: int) -> dict:
    """py-spy records a one-process server for `seconds` while one client calls Retrieve
    back to back; CPU samples of its busy threads (idle ones are left out by py-spy)."""
    from memsvc.v1 import engine_pb2 as pb

    binary = py_spy()
    if binary is None:
        return {"skipped": "py-spy is not installed (pip install -e '.[dev]')"}
    qs = make_queries(100)
    reqs = [_retrieve_req(pb, OWNER, q) for q in qs]
    with (
        ServerProc(db_dir("hot_1m"), processes=1, extra_env=QUIET_PORTS) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        stubs = Stubs(server.port)
        warm(stubs, server.port, [OWNER], qs, connections=0)
        raw = Path(tmp) / "raw.txt"
        cmd = [
            binary,
            "record",
            "--pid",
            str(server.pid),
            "--duration",
            str(int(seconds)),
            "--rate",
            str(rate),
            "--format",
            "raw",
            "--output",
            str(raw),
            "--nonblocking",
            "--subprocesses",
            "--full-filenames",
        ]
        spy = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        times, deadline = [], time.monotonic() + seconds + 60
        while spy.poll() is None and time.monotonic() < deadline:
            t0 = time.perf_counter()
            stubs.engine.Retrieve(reqs[len(times) % len(reqs)])
            times.append((time.perf_counter() - t0) * 1000)
        if spy.poll() is None:
            spy.kill()
        log = spy.communicate()[0].decode(errors="replace")
        shape = server_shape(server)
        stubs.close()
        if spy.returncode != 0 or not raw.is_file():
            return {"skipped": f"py-spy failed ({spy.returncode}): {log.strip().splitlines()[-1:]}"}
        stacks = parse_raw(raw.read_text())
    summary = summarize_stacks(stacks, 1000.0 / rate, len(times), top)
    return {
        "seconds": seconds,
        "rate_hz": rate,
        "calls": len(times),
        "client_p50_ms": pct(times, 50),
        "client_p99_ms": pct(times, 99),
        "server": shape,
        "py_spy": " ".join(cmd[1:2] + cmd[4:]),
        **summary,
    }


# ------------------------------------------------------------------------------- report


def run(calls: int = 300, seconds: float = 15.0, rate: int = 100, top: int = 20) -> dict:
    ensure_all()
    out = {"owner": OWNER, "in_process": cprofile_floor(calls, top), "server": pyspy_server(seconds, rate, top)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "profile_retrieve.txt").write_text(text_report(out), encoding="utf-8")
    return out


def _cat_lines(cats: dict) -> list[str]:
    total = sum(cats.values()) or 1.0
    return [f"  {v:7.3f} ms  {100 * v / total:5.1f} %  {k}" for k, v in cats.items()]


def _top_lines(rows: list[dict], key: str) -> list[str]:
    return [f"  {r[key]:7.3f} ms  {r['function']}" for r in rows]


def text_report(out: dict) -> str:
    """Plain text: the categories, then the top functions by own and by cumulative time."""
    a, b = out["in_process"], out["server"]
    lines = [
        f"Where a Retrieve's time goes: hybrid, static model, {out['owner']} (10k facts among 1M rows)",
        "",
        f"A. In-process (the engine floor), cProfile of {a['calls']} calls: unprofiled p50 "
        f"{a['unprofiled_p50_ms']:.2f} ms, profiled {a['profiled_ms_per_call']:.2f} ms a call "
        "(cProfile's cost per Python call inflates Python-heavy code). ms per call:",
        "by category (own time; a builtin counts where its biggest caller is):",
        *_cat_lines(a["categories_ms_per_call"]),
        "top by own time:",
        *_top_lines(a["top_own"], "own_ms_per_call"),
        "top by cumulative time:",
        *_top_lines(a["top_cumulative"], "cum_ms_per_call"),
        "",
    ]
    if "skipped" in b:
        return "\n".join(lines + [f"B. Server under load, py-spy: skipped: {b['skipped']}", ""])
    lines += [
        f"B. The server ({b['server']['serving_processes']} process) under one client's back-to-back Retrieves, "
        f"py-spy {b['rate_hz']} Hz for {b['seconds']:.0f} s, not pausing it: {b['calls']} calls, client p50 "
        f"{b['client_p50_ms']:.2f} ms, p99 {b['client_p99_ms']:.2f} ms, {b['samples']} samples, of which "
        f"{sum(b['wait_samples'].values())} of threads waiting (left out: "
        + ", ".join(f"{k} {v}" for k, v in b["wait_samples"].items())
        + "). CPU ms per call:",
        "by category (the sampled leaf frame: a C call counts in the Python frame that made it):",
        *_cat_lines(b["categories_ms_per_call"]),
        "top by own time:",
        *_top_lines(b["top_own"], "own_ms_per_call"),
        "top by cumulative time:",
        *_top_lines(b["top_cumulative"], "cum_ms_per_call"),
        "",
    ]
    return "\n".join(lines)


def report(out: dict) -> tuple[str, list]:
    a, b = out["in_process"], out["server"]
    names = list(dict.fromkeys([*a["categories_ms_per_call"], *b.get("categories_ms_per_call", {})]))
    rows = [
        [
            n,
            f"{a['categories_ms_per_call'].get(n, 0.0):.3f}",
            "—" if "skipped" in b else f"{b['categories_ms_per_call'].get(n, 0.0):.3f}",
        ]
        for n in names
    ]
    rows.append(
        [
            "total (profiled)",
            f"{sum(a['categories_ms_per_call'].values()):.3f}",
            "—" if "skipped" in b else f"{sum(b['categories_ms_per_call'].values()):.3f}",
        ]
    )
    table = md_table(
        [
            "where a Retrieve's time goes (10k-fact owner, 1M rows)",
            "in-process, cProfile ms/call",
            "server under 1 client, py-spy CPU ms/call",
        ],
        rows,
    )
    table += (
        f"\n\nIn-process unprofiled p50 {a['unprofiled_p50_ms']:.2f} ms ({a['calls']} calls). "
        + (
            ""
            if "skipped" in b
            else f"Server: client p50 {b['client_p50_ms']:.2f} ms over {b['calls']} calls while sampled "
            f"({b['samples']} samples at {b['rate_hz']} Hz, {sum(b['wait_samples'].values())} of them threads "
            "waiting for work or in epoll, left out). "
        )
        + "Top functions: bench/results/profile_retrieve.txt."
    )
    return table, []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="in-process Retrieves profiled")
    parser.add_argument("--seconds", type=float, default=15.0, help="py-spy recording of the server")
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    args = parser.parse_args()
    out = run(calls=args.calls, seconds=args.seconds, rate=args.rate)
    table, _ = report(out)
    out["targets"] = []
    write_results("profile_retrieve", out, table, "Where a Retrieve's time goes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
