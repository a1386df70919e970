"""One typed configuration object, from flags, then environment, then defaults.

Nothing else in memsvc reads the environment. Every option is declared once, below, with its
flag, variable, type and help; the CLI's flags and the README's table come from the same
declarations.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping


class ConfigError(ValueError):
    """A configuration that must not start (bad value, unsafe bind)."""


def _opt(default: Any, env: str, help: str, *, flag: str | None = None, parse: Callable[[str], Any] | None = None) -> Any:
    return field(default=default, metadata={"env": env, "help": help, "flag": flag, "parse": parse})


def _tokens(raw: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in raw.split(",") if t.strip())


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {raw!r}")


@dataclass(frozen=True)
class Config:
    data_dir: Path = _opt(Path("./data"), "MEMSVC_DATA_DIR", "where the SQLite database and runtime files live", flag="--data-dir", parse=Path)
    grpc_host: str = _opt("127.0.0.1", "MEMSVC_GRPC_HOST", "gRPC bind address (non-loopback needs MEMSVC_API_TOKENS)", flag="--grpc-host")
    grpc_port: int = _opt(50051, "MEMSVC_GRPC_PORT", "gRPC port (0 picks a free one)", flag="--grpc-port", parse=int)
    rest_host: str = _opt("127.0.0.1", "MEMSVC_REST_HOST", "REST (Envoy) bind address (non-loopback needs MEMSVC_API_TOKENS)", flag="--rest-host")
    rest_port: int = _opt(8080, "MEMSVC_REST_PORT", "REST port served by Envoy", flag="--rest-port", parse=int)
    envoy_admin_port: int = _opt(9901, "MEMSVC_ENVOY_ADMIN_PORT", "Envoy admin port (always on loopback)", flag="--envoy-admin-port", parse=int)
    gateway: bool = _opt(True, "MEMSVC_GATEWAY", "start the Envoy REST gateway with `serve` (--no-gateway to skip)", parse=_bool)
    api_tokens: tuple[str, ...] = _opt((), "MEMSVC_API_TOKENS", "comma-separated bearer tokens; none = no auth, loopback only", parse=_tokens)
    log_level: str = _opt("INFO", "MEMSVC_LOG_LEVEL", "DEBUG, INFO, WARNING or ERROR", flag="--log-level")
    sqlite_synchronous: str = _opt("NORMAL", "MEMSVC_SQLITE_SYNCHRONOUS", "NORMAL survives process kills in WAL mode; FULL also survives power loss")
    workers: int = _opt(8, "MEMSVC_WORKERS", "threads for blocking work (SQLite, models)", parse=int)
    max_message_bytes: int = _opt(16 * 1024 * 1024, "MEMSVC_MAX_MESSAGE_BYTES", "largest gRPC message accepted or sent", parse=int)
    shutdown_grace_s: float = _opt(10.0, "MEMSVC_SHUTDOWN_GRACE_S", "seconds in-flight RPCs get to finish on SIGTERM", parse=float)

    @property
    def db_path(self) -> Path:
        return self.data_dir / "memsvc.db"

    @property
    def auth_enabled(self) -> bool:
        return bool(self.api_tokens)

    def validate(self) -> None:
        """Refuse configurations that are unsafe or cannot work."""
        for name in ("grpc_port", "rest_port", "envoy_admin_port"):
            port = getattr(self, name)
            if not 0 <= port <= 65535:
                raise ConfigError(f"{name} must be 0..65535, got {port}")
        if self.sqlite_synchronous.upper() not in ("NORMAL", "FULL", "EXTRA"):
            raise ConfigError("MEMSVC_SQLITE_SYNCHRONOUS must be NORMAL, FULL or EXTRA")
        if self.workers < 1:
            raise ConfigError("MEMSVC_WORKERS must be at least 1")
        if not self.api_tokens:
            exposed = [h for h in (self.grpc_host, self.rest_host if self.gateway else "127.0.0.1") if not is_loopback(h)]
            if exposed:
                raise ConfigError(
                    f"refusing to bind {', '.join(exposed)} without authentication: "
                    "set MEMSVC_API_TOKENS or bind to 127.0.0.1"
                )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def options() -> list[tuple[str, str, str | None, Any, str]]:
    """(field, env var, flag, default, help) for every option: the CLI and README use it."""
    out = []
    for f in fields(Config):
        out.append((f.name, f.metadata["env"], f.metadata["flag"], f.default, f.metadata["help"]))
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for the options that have one; their defaults are None so env can fill in."""
    for f in fields(Config):
        flag = f.metadata["flag"]
        if flag:
            parser.add_argument(flag, dest=f.name, default=None, help=f"{f.metadata['help']} [{f.metadata['env']}]")
    parser.add_argument("--no-gateway", dest="gateway", action="store_const", const="false", default=None,
                        help="do not start the Envoy REST gateway [MEMSVC_GATEWAY=false]")


def load(args: argparse.Namespace | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Flags win over the environment, which wins over the defaults."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for f in fields(Config):
        raw = getattr(args, f.name, None) if args is not None else None
        if raw is None:
            raw = env.get(f.metadata["env"])
        if raw is None:
            continue
        parse = f.metadata["parse"] or str
        try:
            values[f.name] = parse(raw) if isinstance(raw, str) else raw
        except ValueError as exc:
            raise ConfigError(f"{f.metadata['env']}: {exc}") from None
    return Config(**values)
