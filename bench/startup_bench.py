"""Start and footprint: time from `memsvc serve` (a new process) to a SERVING health check,
beside the bare interpreter start (`python -c pass`) measured in the same run, for the
default process count (one per core) and for one process; resident memory of one server
process idle, with the static model loaded and with MiniLM loaded, and of the default
serve's processes together, idle.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    CACHE,
    PY,
    ROOT,
    Stubs,
    Target,
    agg,
    fmt,
    free_port,
    md_table,
    rss_mb,
    server_env,
    tree_rss_mb,
    wait_serving,
    write_results,
)


def _serve(data_dir: Path, processes: int | None = 1, model: bool = True) -> tuple[subprocess.Popen, int, float]:
    """`memsvc serve` with MEMSVC_PROCESSES=`processes` (None: the default, one per core).
    `model` False: MEMORY_AUTO_STATIC=false, so no model is chosen (a server with the built
    static model loads it before it reports SERVING)."""
    port = free_port()
    extra = ({} if processes is None else {"MEMSVC_PROCESSES": str(processes)}) | (
        {} if model else {"MEMORY_AUTO_STATIC": "false"}
    )
    env = server_env(data_dir, port, extra=extra)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [PY, "-m", "memsvc", "serve", "--no-gateway"],
        env=env,
        cwd=str(ROOT),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_serving(port, 60, proc, poll_s=0.005)
    return proc, port, time.perf_counter() - t0


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _load(port: int, settings: dict, timeout_s: float = 180) -> float:
    from google.protobuf import json_format

    from memsvc.v1 import engine_pb2, settings_pb2

    stubs = Stubs(port)
    stubs.settings.UpdateMemorySettings(
        json_format.ParseDict({"settings": {"enabled": True, **settings}}, settings_pb2.UpdateMemorySettingsRequest())
    )
    stubs.memory.CreateMemory(
        __import__("memsvc.v1.memory_pb2", fromlist=["x"]).CreateMemoryRequest(
            api_key_id="rss", content="I prefer dark mode"
        )
    )
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        r = stubs.engine.Retrieve(engine_pb2.RetrieveRequest(api_key_id="rss", query="dark mode", strategy="semantic"))
        if r.resolution.strategy_used == "vector":
            break
        time.sleep(0.1)
    stubs.close()
    return time.perf_counter() - t0


def _starts(
    folder: Path, rounds: int, processes: int | None, model: bool = True
) -> tuple[list[float], list[float], list[float]]:
    """Per round: `python -c pass`, serve → SERVING, the server's processes' idle RSS."""
    starts, pythons, idle = [], [], []
    for _ in range(rounds):
        shutil.rmtree(folder, ignore_errors=True)
        t0 = time.perf_counter()
        subprocess.run([PY, "-c", "pass"], check=True)
        pythons.append(time.perf_counter() - t0)
        proc, _, started = _serve(folder / "data", processes, model)
        starts.append(started)
        time.sleep(1.0)
        idle.append(tree_rss_mb(proc.pid))
        _stop(proc)
    return starts, pythons, idle


def run(rounds: int = 3) -> dict:
    folder = CACHE / "startup"
    starts, pythons, idle_all = _starts(folder, rounds, None)
    starts_one, _, idle_with_model = _starts(folder, rounds, 1)
    _, _, idle = _starts(folder, rounds, 1, model=False)
    shutil.rmtree(folder, ignore_errors=True)
    proc, port, _ = _serve(folder / "data")
    static_s = _load(port, {"embeddingSource": "static", "staticEnabled": True})
    time.sleep(0.5)
    with_static = rss_mb(proc.pid)
    minilm_s = _load(port, {"embeddingSource": "transformers", "transformersEnabled": True, "staticEnabled": False})
    time.sleep(0.5)
    with_both = rss_mb(proc.pid)
    _stop(proc)
    # MiniLM alone, in a fresh process (the figure above also holds the static model).
    shutil.rmtree(folder, ignore_errors=True)
    proc, port, _ = _serve(folder / "data")
    _load(port, {"embeddingSource": "transformers", "transformersEnabled": True})
    time.sleep(0.5)
    minilm_only = rss_mb(proc.pid)
    _stop(proc)
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "serving_s": agg(starts),
        "serving_one_process_s": agg(starts_one),
        "python_start_s": agg(pythons),
        "rss_idle_mb": agg(idle),
        "rss_idle_static_at_start_mb": agg(idle_with_model),
        "rss_idle_all_processes_mb": agg(idle_all),
        "rss_static_mb": with_static,
        "rss_static_and_minilm_mb": with_both,
        "rss_minilm_mb": minilm_only,
        "static_ready_s": static_s,
        "minilm_ready_s": minilm_s,
    }


def report(out: dict) -> tuple[str, list[Target]]:
    rows = [
        ["`memsvc serve` → health SERVING (default: a process per core)", fmt(out["serving_s"], 2, " s")],
        ["`memsvc serve` → health SERVING, one process", fmt(out["serving_one_process_s"], 2, " s")],
        ["baseline: `python -c pass`", fmt(out["python_start_s"], 2, " s")],
        ["RSS idle (no model: MEMORY_AUTO_STATIC=false), one process", fmt(out["rss_idle_mb"], 0, " MB")],
        [
            "RSS idle with the built static model, loaded before SERVING (the default), one process",
            fmt(out["rss_idle_static_at_start_mb"], 0, " MB"),
        ],
        [
            "RSS idle, the default serve's processes together (parent and workers)",
            fmt(out["rss_idle_all_processes_mb"], 0, " MB"),
        ],
        ["RSS with the static model loaded, one process", f"{out['rss_static_mb']:.0f} MB"],
        ["RSS with MiniLM loaded, one process", f"{out['rss_minilm_mb']:.0f} MB"],
        ["RSS with both loaded, one process", f"{out['rss_static_and_minilm_mb']:.0f} MB"],
        ["static model ready after first request (lazy, off the request path)", f"{out['static_ready_s']:.1f} s"],
        ["MiniLM ready after first request (lazy)", f"{out['minilm_ready_s']:.1f} s"],
    ]
    table = md_table(["start and footprint", "value"], rows)
    targets = [
        Target("Health SERVING after start", out["serving_s"]["median"], "<=", 2.0, " s"),
        Target("RSS without models, one process", out["rss_idle_mb"]["median"], "<=", 150, " MB"),
    ]
    return table, targets


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    out = run()
    table, targets = report(out)
    out["targets"] = [t.as_dict() for t in targets]
    write_results("startup", out, table, "Start and footprint")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
