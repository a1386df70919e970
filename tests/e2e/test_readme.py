"""The README's examples, run as a new user runs them: the server started by
`./scripts/run.sh` itself (set-up included), then every command of the Examples section in
order, from the repository root, exactly as written except for the ports (the test picks free
ones instead of 50051 and 8080, so a server already running on this machine does not matter).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import free_port

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
SET_UP_AND_START_S = 600  # the first run of scripts/run.sh on a fresh clone installs packages


@dataclass
class Example:
    language: str  # "sh" or "python"
    code: str


def readme_examples() -> list[Example]:
    """Every ```sh line and ```python block of the Examples section, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Examples", 1)[1].split("\n## ", 1)[0]
    examples: list[Example] = []
    for language, block in re.findall(r"```(sh|python)\n(.*?)```", section, flags=re.S):
        if language == "python":
            examples.append(Example("python", block))
        else:
            examples += [Example("sh", line) for line in block.splitlines() if line.strip()]
    return examples


def _with_ports(code: str, grpc_port: int, rest_port: int) -> str:
    return code.replace("localhost:50051", f"localhost:{grpc_port}").replace("localhost:8080", f"localhost:{rest_port}")


def _serving(grpc_port: int) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def _rest_accepts(rest_port: int) -> bool:
    result = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                             f"http://localhost:{rest_port}/api/memory/recent_files"],
                            capture_output=True, text=True, timeout=30)
    return result.stdout.strip() == "200"


@pytest.fixture
def run_sh(tmp_path):
    """`./scripts/run.sh` in the background, configured through the environment only."""
    ports = {"grpc": free_port(), "rest": free_port()}
    env = {**os.environ, "MEMSVC_DATA_DIR": str(tmp_path / "data"), "MEMSVC_GRPC_PORT": str(ports["grpc"]),
           "MEMSVC_REST_PORT": str(ports["rest"]), "MEMSVC_ENVOY_ADMIN_PORT": str(free_port()),
           "MEMSVC_METRICS_PORT": "-1", "MEMSVC_MCP_PORT": str(free_port())}
    env.pop("MEMSVC_API_TOKENS", None)
    log = (tmp_path / "run.log").open("w")
    proc = subprocess.Popen(["./scripts/run.sh"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + SET_UP_AND_START_S
        while not (_serving(ports["grpc"]) and _rest_accepts(ports["rest"])):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"scripts/run.sh did not come up:\n{(tmp_path / 'run.log').read_text()[-4000:]}")
            time.sleep(0.5)
        yield ports
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        log.close()
    assert proc.returncode == 0, (tmp_path / "run.log").read_text()[-4000:]


def _run(example: Example, ports: dict[str, int]) -> subprocess.CompletedProcess[str]:
    code = _with_ports(example.code, ports["grpc"], ports["rest"])
    argv = ["bash", "-c", code] if example.language == "sh" else [str(ROOT / ".venv/bin/python"), "-c", code]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _check_output(example: Example, stdout: str) -> None:
    """Every REST example answers a success body; the examples that show the pipeline at
    work show it."""
    code = example.code
    if code.startswith("curl"):
        body = json.loads(stdout)
        assert not (isinstance(body, dict) and "code" in body and "message" in body), (code, body)
    if code.endswith(" list"):
        assert "memsvc.v1.MemoryService" in stdout
    if "ListMemories" in code:
        assert "dark mode" in stdout
    if "EngineService/Extract" in code:
        assert json.loads(stdout)["stored"] == 2
    if "EngineService/Retrieve" in code:
        assert "I prefer dark mode in my editor" in stdout
    if "/api/memory/inject" in code:
        assert json.loads(stdout)["request"]["messages"][0] == {
            "role": "system", "content": "Memory context: I will use PostgreSQL for this project"}
    if example.language == "python":
        assert "I prefer Python for scripting" in stdout


def test_readme_examples_work_as_written_against_scripts_run_sh(run_sh):
    examples = readme_examples()
    assert sum(e.code.startswith(".venv/bin/grpcurl") for e in examples) >= 3
    assert sum(e.code.startswith("curl") for e in examples) >= 3
    assert any(e.language == "python" for e in examples)
    for example in examples:
        result = _run(example, run_sh)
        assert result.returncode == 0, (example.code, result.stdout[-2000:], result.stderr[-2000:])
        _check_output(example, result.stdout)


def test_the_examples_section_is_what_this_test_runs():
    """A README block in another language would silently escape the test above."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Examples", 1)[1].split("\n## ", 1)[0]
    openings = re.findall(r"```(\w*)\n.*?```", section, flags=re.S)
    assert openings and set(openings) <= {"sh", "python"}, openings
