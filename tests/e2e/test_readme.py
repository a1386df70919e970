"""The commands of README.md and docs/*.md, run as a new user runs them: every ```sh command
and ```python block of a document, in order, exactly as written except for the ports (the
test picks free ones instead of 50051, 8080 and 9000, so a server already running on this
machine does not matter), against a server started by `./scripts/run.sh` itself (set-up
included).

How a document runs (tests/support/doc_commands.py finds its commands):
- The first command that needs a server starts `./scripts/run.sh`, configured through the
  environment only (ports, and `MEMSVC_DATA_DIR` = `data/` of a fresh working folder).
- A command that starts a server (`./scripts/run.sh` with other variables or flags,
  `.venv/bin/memsvc cluster`) stops the one running and is run in its place, in the
  background, until it serves; plain `./scripts/run.sh` is the server already running. A
  cluster is given the test's REST port (`--rest-port`, `--grpc-port 0`).
- Every other command runs from the working folder, which holds `.venv` (a link to the
  checkout's) and `data/` (the server's), so relative paths mean what they mean in a checkout
  and nothing a command writes lands in the real one. `.venv/bin` is first on PATH, for the
  commands a deployment runs as plain `memsvc`.
- The local OAuth authorization server (`.venv/bin/python scripts/oauth_dev_server.py`, which
  the reader starts in a terminal of its own) runs in the background from its command to the
  end of the document, on a free port in place of 9000, once its metadata answers; memsvc
  started with `MEMSVC_OAUTH_ISSUER` names it by that port too.
- A token `memsvc tokens create` prints is kept in `$TOKEN`, and the `access_token` of an
  authorization server's JSON answer in `$ACCESS_TOKEN`, for the commands after it, as the
  document tells the reader to.
- Commands in NOT_RUN (a bare ``` block, or `./scripts/test.sh`) are not run; the reasons
  are there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from conftest import free_port
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support.doc_commands import (
    LANGUAGES,
    ROOT,
    blocks,
    commands,
    documents,
    not_run_reason,
    starts_a_helper,
    starts_a_server,
)

pytestmark = pytest.mark.e2e
SET_UP_AND_START_S = 600  # the first run of scripts/run.sh on a fresh clone installs packages
CLUSTER_START_S = 240
HELPER_START_S = 60
OAUTH_PORT = "9000"  # the local authorization server's port in the documents


@dataclass
class Step:
    language: str  # "sh" or "python"
    code: str
    where: str


def steps(path: Path) -> list[Step]:
    """The runnable commands of one document, in order (NOT_RUN ones left out)."""
    out: list[Step] = []
    for block in blocks(path):
        if block.language == "python":
            out.append(Step("python", block.code, block.where))
        elif block.language == "sh":
            out += [Step("sh", command, block.where) for command in commands(block) if not_run_reason(command) is None]
    return out


def _documents_with_steps() -> list[Path]:
    return [path for path in documents() if steps(path)]


def _serving(grpc_port: int) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def _healthz(rest_port: int) -> bool:
    """Envoy's probe: no token needed, 200 once memsvc behind it serves."""
    result = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", f"http://localhost:{rest_port}/healthz"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return result.stdout.strip() == "200"


@dataclass
class Session:
    """One document's run: its working folder, its environment and the server it talks to."""

    folder: Path
    env: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    server: subprocess.Popen | None = None
    server_command: str = ""
    log: Path | None = None
    helpers: list[subprocess.Popen] = field(default_factory=list)

    @classmethod
    def create(cls) -> Session:
        # World-readable: as root, `memsvc cluster` runs its PostgreSQL as `nobody`.
        folder = Path(tempfile.mkdtemp(prefix="memsvc-docs-"))
        folder.chmod(0o755)
        (folder / ".venv").symlink_to(ROOT / ".venv")
        env = {
            **os.environ,
            "PATH": f"{ROOT / '.venv/bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "MEMSVC_DATA_DIR": str(folder / "data"),
            "MEMSVC_METRICS_PORT": "-1",
        }
        env.pop("MEMSVC_API_TOKENS", None)
        env.pop("TOKEN", None)
        env.pop("ACCESS_TOKEN", None)
        return cls(folder, env)

    def adapted(self, code: str) -> str:
        """The command on this session's ports (the authorization server's, once it runs: in
        its own --port flag, and in a URL that names it, MEMSVC_OAUTH_ISSUER's included)."""
        if "grpc" in self.ports:
            code = code.replace("localhost:50051", f"localhost:{self.ports['grpc']}")
            code = code.replace("localhost:8080", f"localhost:{self.ports['rest']}")
        if "oauth" in self.ports:
            code = re.sub(rf"(localhost:|--port ){OAUTH_PORT}\b", rf"\g<1>{self.ports['oauth']}", code)
        return code

    @property
    def oauth(self) -> dict[str, str]:
        """The issuer and audience the running memsvc was started with, on this session's ports."""
        found = re.findall(r"(MEMSVC_OAUTH_\w+)=(\S+)", self.adapted(self.server_command))
        return {name.removeprefix("MEMSVC_OAUTH_").lower(): value for name, value in found}

    def start(self, command: str) -> None:
        self.stop()
        self.ports = {**self.ports, "grpc": free_port(), "rest": free_port()}
        cluster = command.startswith(".venv/bin/memsvc cluster")
        server_env = {**self.env}
        if cluster:  # its own flags place every process; the cluster's folder is ./data-cluster
            run = re.sub(r"\s+#.*$", "", command) + f" --rest-port {self.ports['rest']} --grpc-port 0"
            server_env.pop("MEMSVC_DATA_DIR")
        else:
            run = self.adapted(command)
            server_env.update(
                {
                    "MEMSVC_GRPC_PORT": str(self.ports["grpc"]),
                    "MEMSVC_REST_PORT": str(self.ports["rest"]),
                    "MEMSVC_ENVOY_ADMIN_PORT": "-1",
                    "MEMSVC_MCP_PORT": str(free_port()),
                }
            )
        self.log = self.folder / f"server-{len(list(self.folder.glob('server-*.log')))}.log"
        with self.log.open("w") as log:
            self.server = subprocess.Popen(
                ["bash", "-c", run],
                cwd=ROOT if "./scripts/" in command else self.folder,
                env=server_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.server_command = command
        deadline = time.monotonic() + (CLUSTER_START_S if cluster else SET_UP_AND_START_S)
        while not (_healthz(self.ports["rest"]) and (cluster or _serving(self.ports["grpc"]))):
            if self.server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{command!r} did not come up:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.server is None:
            return
        server, self.server = self.server, None
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(10)
        assert server.returncode == 0, (self.server_command, self.log.read_text()[-4000:])

    def start_helper(self, command: str) -> subprocess.CompletedProcess[str]:
        """The command in the background (from the checkout, where its script is) until the
        document ends; answers with the line it printed on start-up."""
        self.ports["oauth"] = free_port()
        log = self.folder / f"helper-{len(self.helpers)}.log"
        with log.open("w") as out:
            helper = subprocess.Popen(
                ["bash", "-c", f"exec {self.adapted(command)}"],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.helpers.append(helper)
        metadata = f"http://localhost:{self.ports['oauth']}/.well-known/oauth-authorization-server"
        deadline = time.monotonic() + HELPER_START_S
        while not _answers(metadata):
            if helper.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{command!r} did not come up:\n{log.read_text()[-4000:]}")
            time.sleep(0.2)
        return subprocess.CompletedProcess(command, 0, log.read_text(), "")

    def close(self) -> None:
        """Stop memsvc and every helper; each must exit cleanly on SIGTERM."""
        try:
            self.stop()
        finally:
            for helper in self.helpers:
                if helper.poll() is None:
                    os.killpg(helper.pid, signal.SIGTERM)
                    helper.wait(30)
            assert [helper.returncode for helper in self.helpers] == [0] * len(self.helpers)

    def run(self, step: Step) -> subprocess.CompletedProcess[str]:
        if step.language == "sh" and starts_a_helper(step.code):
            return self.start_helper(step.code)
        if step.language == "sh" and starts_a_server(step.code):
            if step.code != "./scripts/run.sh" or self.server is None or self.server_command != step.code:
                self.start(step.code)
            return subprocess.CompletedProcess(step.code, 0, "", "")
        if self.server is None:
            self.start("./scripts/run.sh")
        code = self.adapted(step.code)
        argv = ["bash", "-c", code] if step.language == "sh" else [str(ROOT / ".venv/bin/python"), "-c", code]
        result = subprocess.run(argv, cwd=self.folder, env=self.env, capture_output=True, text=True, timeout=300)
        token = re.search(r"token \(shown once, store it now\): (msk_\S+)", result.stdout)
        if token:
            self.env["TOKEN"] = token.group(1)
        access_token = _access_token(result.stdout)
        if access_token:
            self.env["ACCESS_TOKEN"] = access_token
        return result


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _json(stdout: str) -> object:
    return json.loads(stdout)


def _access_token(stdout: str) -> str | None:
    """The `access_token` of a token endpoint's JSON answer, if that is what was printed."""
    try:
        answer = json.loads(stdout)
    except ValueError:
        return None
    token = answer.get("access_token") if isinstance(answer, dict) else None
    return token if isinstance(token, str) else None


def check_output(step: Step, stdout: str) -> None:
    """Every REST and MCP call answers a success body; the calls that show the pipeline at
    work show it."""
    code = step.code
    if code.startswith("curl") and ("/api/" in code or "/mcp" in code) and not _shows_headers(code):
        body = _json(stdout)
        assert not (isinstance(body, dict) and "code" in body and "message" in body), (code, body)
        if "/mcp" in code:
            assert "error" not in body and body["result"].get("isError") is not True, (code, body)
    if "/api/memory/watch" in code:  # a stream through Envoy: one JSON array, started by a bookmark
        events = _json(stdout)
        assert isinstance(events, list) and events[0]["kind"] == "bookmark", events
    if code.startswith("curl") and "/stats" in code:
        assert "server.live" in stdout
    if code.endswith(" list") and "grpcurl" in code:
        assert "memsvc.v1.MemoryService" in stdout
    if "ListMemories" in code and "$ACCESS_TOKEN" not in code:
        assert "dark mode" in stdout
    if "EngineService/Extract" in code:
        assert _json(stdout)["stored"] == 2
    if "EngineService/Retrieve" in code and "editor theme" in code:
        assert "I prefer dark mode in my editor" in stdout
    if "/api/memory/inject" in code:
        answer = _json(stdout)
        if "Write a haiku" in code:
            assert (
                answer.get("skippedReason")
                and answer["request"] == json.loads(code.split("-d '", 1)[1].rsplit("'", 1)[0])["request"]
            ), answer
        elif '"provider": "anthropic"' in code:
            assert answer["request"]["system"].startswith("Memory context: I will use PostgreSQL"), answer
        else:
            assert answer["request"]["messages"][0] == {
                "role": "system",
                "content": "Memory context: I will use PostgreSQL for this project",
            }, answer
    if "/api/memory/extract" in code and "long answers" in code:
        assert _json(stdout)["stored"] == 1
    if "/api/memory/extract" in code and "vegetarian" in code:
        assert [f["key"] for f in _json(stdout)["facts"]] == ["diet:vegetarian"], stdout
    if "/api/memory?apiKeyId=key-e" in code:
        contents = {m["content"] for m in _json(stdout)["data"]}
        assert {"User does not like long answers", "ユーザーの妻は医者"} <= contents, contents
    if "/api/memory/batch" in code:
        answer = _json(stdout)
        assert (answer["storedCount"], answer["failedCount"]) == (2, 1), answer
    if '"memory_search"' in code:
        assert "green tea every morning" in stdout
    if step.language == "python" and "memsvc_client" in code:
        assert "I am vegetarian and I love Italian food" in stdout
    elif step.language == "python" and "OAuthClientProvider" in code:
        assert "blue road bike" in stdout
    elif step.language == "python" and "asOf" in code:  # docs/lifecycle.md: the fact that changed
        assert stdout.split("\n")[:4] == [
            "['created', 'superseded', 'merged']",
            "True",
            "['I moved to Berlin']",
            "['I live in Paris']",
        ], stdout
    elif step.language == "python":
        assert "I prefer Python for scripting" in stdout


def _shows_headers(code: str) -> bool:
    return bool(re.match(r"curl -s?i\s", code))


def _status_and_headers(stdout: str) -> tuple[int, dict[str, str]]:
    """`curl -i`'s status line and headers (names in lower case)."""
    head = stdout.replace("\r\n", "\n").split("\n\n", 1)[0].split("\n")
    headers = dict(line.split(":", 1) for line in head[1:] if ":" in line)
    return int(head[0].split()[1]), {name.strip().lower(): value.strip() for name, value in headers.items()}


def check_oauth_output(step: Step, stdout: str, oauth: dict[str, str]) -> None:
    """The OAuth commands answer what an agent needs: the metadata naming the issuer memsvc
    was started with, the challenge pointing to it on a 401, a token from the issuer, the
    dev server's start-up line naming what to use; a call with the token is a success
    (check_output)."""
    code = step.code
    if starts_a_helper(code):
        assert "issuer http://localhost:" in stdout and "memsvc-dev" in stdout and "memsvc-dev-service" in stdout
    if "/.well-known/oauth-protected-resource" in code and not _shows_headers(code):
        metadata = _json(stdout)
        assert isinstance(metadata, dict), stdout
        assert (metadata["resource"], metadata["authorization_servers"]) == (oauth["audience"], [oauth["issuer"]])
    if _shows_headers(code) and "/mcp" in code and "authorization:" not in code:
        status, headers = _status_and_headers(stdout)
        prm = f"{oauth['audience']}/.well-known/oauth-protected-resource/mcp"
        assert (status, headers.get("www-authenticate")) == (401, f'Bearer resource_metadata="{prm}"'), stdout
    if "grant_type=" in code:
        answer = _json(stdout)
        assert isinstance(answer, dict) and answer["token_type"] == "Bearer" and _access_token(stdout), stdout
    if "$ACCESS_TOKEN" in code and ("apiKeyId=alice" in code or "ListMemories" in code):
        assert "I cycle to work" in stdout, stdout


@pytest.mark.parametrize("document", _documents_with_steps(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_documents_commands_work_as_written_against_scripts_run_sh(document: Path):
    session = Session.create()
    try:
        for step in steps(document):
            result = session.run(step)
            assert result.returncode == 0, (step.where, step.code, result.stdout[-2000:], result.stderr[-2000:])
            check_output(step, result.stdout)
            check_oauth_output(step, result.stdout, session.oauth)
        if any("gateway-config" in step.code and "> envoy.yaml" in step.code for step in steps(document)):
            assert "10.0.0.3" in (session.folder / "envoy.yaml").read_text()
    finally:
        try:
            session.close()
        finally:
            shutil.rmtree(session.folder, ignore_errors=True)


def test_the_readme_shows_every_surface():
    """A quickstart each for gRPC (grpcurl and its server reflection), REST through Envoy and
    MCP, run by the test above."""
    readme = steps(ROOT / "README.md")
    assert sum(s.code.startswith(".venv/bin/grpcurl") for s in readme) >= 3
    assert sum(s.code.startswith("curl") and "/api/" in s.code for s in readme) >= 3
    assert any("/mcp" in s.code for s in readme)
    assert any(s.language == "python" for path in documents() for s in steps(path))


def test_every_block_is_one_this_test_runs_or_says_why_not():
    """A block in another language would silently escape the test above."""
    for path in documents():
        for block in blocks(path):
            assert block.language in LANGUAGES, block.where
