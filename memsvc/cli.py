"""`memsvc serve | migrate | gateway | gateway-config | cluster | build-models | reindex | status | memories`: the operator's entry points."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from memsvc import config as cfg
from memsvc.cli_admin import add_commands, run_client_command
from memsvc.cli_cluster import add_command as add_cluster_command
from memsvc.cli_models import add_command as add_build_models_command
from memsvc.cli_tokens import add_commands as add_token_commands
from memsvc.client import ClientError
from memsvc.gateway import command as gateway_command
from memsvc.kernel.errors import StorageVersionError, UnavailableError
from memsvc.logs import configure
from memsvc.mcp.command import add_command as add_mcp_command

log = logging.getLogger("memsvc.cli")


def _serve(conf: cfg.Config, args: argparse.Namespace) -> int:
    """Exit 1 with the reason on stderr when the gateway or a server process cannot start or
    keeps exiting. One process serves everything with --processes 1; with more, this
    process supervises them (memsvc.processes), or is one of them (--worker-of)."""
    from memsvc.gateway.launcher import GatewayError
    from memsvc.processes import WorkerError, run_worker, serve_processes

    conf.validate()
    if args.worker_of is not None:
        return run_worker(conf, args.worker_of, args.ready_fd)
    try:
        asyncio.run(_single_process(conf) if conf.processes == 1 else serve_processes(conf))
    except GatewayError as exc:
        print(f"memsvc: the REST gateway failed: {exc}", file=sys.stderr)
        return 1
    except WorkerError as exc:
        print(f"memsvc: a server process failed: {exc}", file=sys.stderr)
        return 1
    return 0


async def _single_process(conf: cfg.Config) -> None:
    # Imported here: a parent of several processes starts its workers before it loads the
    # server's modules.
    from memsvc.server import serve

    await serve(conf)


def _migrate(conf: cfg.Config, args: argparse.Namespace) -> int:
    from memsvc.storage.stores import open_admin

    stores = open_admin(conf)
    try:
        applied = stores.migrate()
        print(
            f"{stores.info.location}: schema version {stores.schema_version()}"
            + (f" (applied {', '.join(map(str, applied))})" if applied else " (up to date)")
        )
    finally:
        stores.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memsvc", description="Conversation memory service (gRPC + REST via Envoy).")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, handler, text in (
        ("serve", _serve, "run the gRPC server (and the Envoy REST gateway unless --no-gateway)"),
        ("migrate", _migrate, "apply database migrations and exit"),
        ("gateway", gateway_command.run, "write the Envoy config for a running server and run Envoy"),
    ):
        sub = commands.add_parser(name, help=text, description=text)
        cfg.add_arguments(sub)
        sub.set_defaults(handler=handler)
        if name == "serve":  # how the parent of several server processes starts each of them
            sub.add_argument("--worker-of", type=int, default=None, help=argparse.SUPPRESS)
            sub.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
        if name == "gateway":
            sub.add_argument("--write-only", action="store_true", help="write <data-dir>/envoy.yaml and exit")
            gateway_command.add_replica_option(sub)
    gateway_command.add_command(commands)
    add_cluster_command(commands)
    add_commands(commands)
    add_build_models_command(commands)
    add_mcp_command(commands)
    add_token_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        conf = cfg.load(args)
        configure(conf.log_level)
        if getattr(args, "client_command", False):
            return run_client_command(conf, args)
        return args.handler(conf, args)
    except (cfg.ConfigError, StorageVersionError) as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return 2
    except UnavailableError as exc:  # the configured PostgreSQL cannot be reached
        print(f"memsvc: {exc}", file=sys.stderr)
        return 1
    except ClientError as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
