"""`memsvc serve` as an operator runs it: a subprocess whose JSON log lines (stderr) the test
reads as they come, and which is always stopped with its Envoy when the test ends."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from support.processes import wait_gone

BIN = Path(sys.executable).parent


class ServeProcess:
    """`memsvc serve` with its stderr collected line by line."""

    def __init__(
        self,
        data_dir: Path,
        grpc_port: int,
        rest_port: int,
        env_extra: dict[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
    ):
        env = {
            "PATH": f"{BIN}:/usr/bin:/bin",
            "HOME": str(data_dir),
            "MEMORY_AUTO_STATIC": "false",
            **(env_extra or {}),
        }
        self.data_dir = data_dir
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memsvc",
                "serve",
                "--data-dir",
                str(data_dir),
                "--grpc-port",
                str(grpc_port),
                "--rest-port",
                str(rest_port),
                "--metrics-port",
                "-1",
                "--mcp-port",
                "0",
                *extra_args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def events(self, name: str | None = None) -> list[dict]:
        out = []
        for line in list(self.lines):
            if line.startswith("{"):
                entry = json.loads(line)
                if name is None or entry.get("event") == name:
                    out.append(entry)
        return out

    def wait_for_entry(self, match: Callable[[dict], bool], timeout_s: float = 60) -> dict:
        """The first log entry `match` accepts, once it has been written."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = [entry for entry in self.events() if match(entry)]
            if found:
                return found[0]
            time.sleep(0.02)
        raise AssertionError(f"no matching entry in server output: {self.lines[-20:]}")

    def wait_for(self, event: str, timeout_s: float = 60, count: int = 1) -> dict:
        """The `count`-th log entry named `event`, once it has been written."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.events(event)
            if len(found) >= count:
                return found[count - 1]
            if self.proc.poll() is not None:
                self._reader.join(5)
                found = self.events(event)
                if len(found) >= count:
                    return found[count - 1]
                break
            time.sleep(0.05)
        raise AssertionError(f"no {event!r} (#{count}) in server output: {self.lines[-20:]}")

    def exit_code(self, timeout_s: float = 60) -> int:
        code = self.proc.wait(timeout_s)
        self._reader.join(5)
        return code

    def envoy_pids(self) -> list[int]:
        """Every Envoy this server reported starting."""
        return [e["pid"] for e in self.events() if e.get("event") in ("gateway.started", "gateway.restarted")]

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not stop; then wait for its Envoys to be gone."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for pid in self.envoy_pids():
            wait_gone(pid)
