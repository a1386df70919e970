"""The bench's own helpers that its figures rest on: how processes serving a port are
counted, how alternating legs are called, how a py-spy record is read."""

from __future__ import annotations

import socket

from bench.common import interleaved_n, listening_sockets
from bench.profile_retrieve import categorize, parse_raw, summarize_stacks


def _listener(port: int = 0) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_listening_sockets_counts_each_reuseport_listener_of_the_port():
    first = _listener()
    port = first.getsockname()[1]
    try:
        assert listening_sockets(port) == 1
        second = _listener(port)
        try:
            assert listening_sockets(port) == 2
        finally:
            second.close()
        assert listening_sockets(port) == 1
    finally:
        first.close()


def test_listening_sockets_ignores_a_connected_socket_on_another_port():
    server = _listener()
    client = socket.create_connection(server.getsockname())
    try:
        assert listening_sockets(client.getsockname()[1]) == 0
    finally:
        client.close()
        server.close()


def test_interleaved_n_alternates_leg_after_leg_for_each_item():
    calls: list[tuple[str, int]] = []
    legs = {name: (lambda x, name=name: calls.append((name, x)), [1, 2, 3]) for name in ("a", "b", "c")}
    out = interleaved_n(legs, rounds=2)
    one_round = [(n, i) for i in (1, 2, 3) for n in ("a", "b", "c")]
    assert calls == one_round * 2
    assert set(out) == {"a", "b", "c"}
    assert out["a"]["calls_per_round"] == 3 and out["a"]["p50_ms"]["rounds"] == 2


RAW = "\n".join(
    [
        'process 7:"python -m memsvc serve";run (/x/lib/python3.11/threading.py:1);'
        "Retriever._hybrid (/work/main/memsvc/core/retrieval.py:300);search (/work/main/memsvc/storage/keyword.py:10) 6",
        'process 7:"python -m memsvc serve";run (/x/lib/python3.11/threading.py:1);'
        "Retriever._hybrid (/work/main/memsvc/core/retrieval.py:301);search (/work/main/memsvc/storage/keyword.py:12) 2",
        'process 7:"python -m memsvc serve";_run (/x/lib/python3.11/asyncio/events.py:80);'
        "unary (/v/lib/python3.11/site-packages/grpc/aio/_server.py:5) 2",
        "not a stack line",
    ]
)


def test_parse_raw_drops_the_process_frame_and_reads_counts():
    stacks = parse_raw(RAW)
    assert [count for _, count in stacks] == [6, 2, 2]
    assert stacks[0][0][0].startswith("run (")


def test_summarize_stacks_adds_a_functions_lines_and_scales_to_ms_per_call():
    # 10 samples at 100 Hz = 100 ms of CPU over 4 calls: 25 ms a call.
    out = summarize_stacks(parse_raw(RAW), ms_per_sample=10.0, calls=4, top=5)
    assert out["samples"] == 10
    assert out["top_own"][0] == {
        "function": "search (memsvc/storage/keyword.py)",
        "samples": 8,
        "own_ms_per_call": 20.0,
    }
    cum = {r["function"]: r["samples"] for r in out["top_cumulative"]}
    assert cum["Retriever._hybrid (memsvc/core/retrieval.py)"] == 8
    assert out["categories_ms_per_call"] == {"SQL (SQLite calls, row mapping)": 20.0, "gRPC (C core, Cython)": 5.0}


def test_summarize_stacks_counts_a_thread_waiting_apart(tmp_path):
    source = tmp_path / "pool.py"
    source.write_text("def worker(q):\n    item = q.get(block=True)\n    return item.run()\n")
    raw = f"worker ({source}:2) 5\nworker ({source}:3);search (/work/main/memsvc/storage/keyword.py:10) 3\n"
    out = summarize_stacks(parse_raw(raw), ms_per_sample=10.0, calls=1, top=5)
    assert out["wait_samples"] == {f"worker ({source})": 5}
    assert out["categories_ms_per_call"] == {"SQL (SQLite calls, row mapping)": 30.0}
    assert [r["function"] for r in out["top_own"]] == ["search (memsvc/storage/keyword.py)"]


def test_categorize_names_where_time_goes():
    assert categorize("memsvc/storage/vector_cache.py") == "NumPy (vector scan)"
    assert categorize("<method 'execute' of 'apsw.Connection' objects>") == "SQL (SQLite calls, row mapping)"
    assert categorize("memsvc/api/convert.py") == "conversion (protobuf ⇄ domain)"
    assert categorize("memsvc/core/retrieval.py") == "Python ranking, orchestration (core)"
    assert categorize("json/decoder.py") == "other (stdlib, builtins)"


def test_the_summary_keeps_what_earlier_runs_left_and_shows_a_failure_not_old_figures(tmp_path):
    """After `run_all --only`, summary.md still lists every bench's latest results (each
    with when it ran), in run order; a bench that failed now shows the failure."""
    import json

    from bench.run_all import collect

    def left(name: str, when: str, value: float) -> None:
        target = {"name": f"{name} speed", "value": value, "op": ">=", "limit": 1.0, "unit": "/s", "note": ""}
        (tmp_path / f"{name}.json").write_text(json.dumps({"machine": {"when": when}, "targets": [target]}))
        (tmp_path / f"{name}.md").write_text(f"### {name}\n\n| {name} table |\n")

    left("writes", "2026-12-03T12:51:05Z", 2.0)
    left("hot_path", "2026-12-03T12:23:10Z", 0.5)
    left("knn", "2026-12-01T00:00:00Z", 9.0)
    steps = [("knn", "KNN"), ("hot_path", "Hot path"), ("writes", "Writes"), ("quality", "Quality")]
    shown = collect(tmp_path, steps, {"knn": "RuntimeError: boom"})
    assert [(name, when) for name, when, _, _ in shown] == [
        ("knn", ""),
        ("hot_path", "2026-12-03T12:23:10Z"),
        ("writes", "2026-12-03T12:51:05Z"),
    ]
    assert shown[0][2] == [] and "FAILED: RuntimeError: boom" in shown[0][3]
    assert [(t.name, t.value, t.passed) for _, _, found, _ in shown for t in found] == [
        ("hot_path speed", 0.5, False),
        ("writes speed", 2.0, True),
    ]
    assert shown[2][3] == "### writes\n\n| writes table |\n"
