"""`memsvc gateway` (Envoy in the foreground for a server running elsewhere) with its
`--replica` option, and `memsvc gateway-config`: Envoy in front of several memsvc replicas
that share one store, for operators who run the gateway apart from the replicas
(`memsvc serve --no-gateway` on each)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from memsvc import config as cfg
from memsvc.gateway.envoy_config import Replica, parse_replica

log = logging.getLogger("memsvc.gateway")
# How long Envoy may take to drain and exit once told to stop before it is killed; well
# inside the grace period systemd (90 s) and Kubernetes (30 s) give before their SIGKILL.
STOP_GRACE_S = 10.0

REPLICA_HELP = (
    "HOST:PORT of a memsvc replica's gRPC server; repeat it for each replica (round robin "
    "over those whose health check passes). Default: the configured gRPC host and port"
)
CONFIG_HELP = "print the Envoy config `memsvc gateway` would run (with its options) and exit"


def _replica(text: str) -> Replica:
    try:
        return parse_replica(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_replica_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--replica", dest="replicas", action="append", type=_replica, default=[], metavar="HOST:PORT", help=REPLICA_HELP
    )


def replicas(args: argparse.Namespace) -> tuple[Replica, ...]:
    """The replicas the command line lists, in order. One listed twice is refused: it would
    get twice the others' share of requests, and is more likely a typo for a missing one."""
    listed = tuple(getattr(args, "replicas", None) or ())
    for replica in listed:
        if listed.count(replica) > 1:
            raise cfg.ConfigError(f"--replica {replica[0]}:{replica[1]} is listed more than once")
    return listed


def run(conf: cfg.Config, args: argparse.Namespace) -> int:
    """`memsvc gateway`: Envoy in the foreground for a server running elsewhere (or for
    several replicas, `--replica`); it dies with this process (started from the main thread,
    see memsvc.gateway.launcher). SIGTERM or SIGINT stops Envoy and exits 0; Envoy exiting on
    its own is logged as an error and its exit code returned."""
    from memsvc.gateway.launcher import Gateway, GatewayError

    gateway = Gateway.for_config(conf, grpc_port=conf.grpc_port, replicas=replicas(args))
    if args.write_only:
        print(gateway.write_config())
        return 0
    # The handlers only ask Envoy to stop; the one wait below reaps it (a handler that waited
    # too would deadlock with it, see Gateway.request_stop). Installed before Envoy starts: a
    # stop may come at any time, and one during the start stops Envoy as soon as it runs.
    signalled: list[int] = []

    def on_stop_signal(signum: int, _frame: object) -> None:
        signalled.append(signum)
        gateway.request_stop()

    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, on_stop_signal)
    try:
        rest_port = gateway.start()
    except GatewayError as exc:
        if signalled:  # told to stop while it started: Envoy exited as asked
            return 0
        print(f"memsvc: the REST gateway failed: {exc}", file=sys.stderr)
        return 1
    log.info(
        "gateway.started",
        extra={"rest_port": rest_port, "upstreams": gateway.settings.upstream_names(), "pid": gateway.pid},
    )
    if signalled:
        gateway.request_stop()
    code = gateway.wait_exit(STOP_GRACE_S)
    stopping = bool(signalled)
    # Exiting on its own (not told to by a signal) is a failure worth an error line.
    log.log(
        logging.INFO if stopping else logging.ERROR, "gateway.exited", extra={"pid": gateway.pid, "exit_code": code}
    )
    return 0 if stopping else code


def _print_config(conf: cfg.Config, args: argparse.Namespace) -> int:
    from memsvc.gateway.envoy_config import render_yaml
    from memsvc.gateway.launcher import Gateway

    gateway = Gateway.for_config(conf, grpc_port=conf.grpc_port, replicas=replicas(args))
    sys.stdout.write(render_yaml(gateway.settings))
    return 0


def add_command(commands: argparse._SubParsersAction) -> None:
    sub = commands.add_parser("gateway-config", help=CONFIG_HELP, description=CONFIG_HELP)
    cfg.add_arguments(sub)
    add_replica_option(sub)
    sub.set_defaults(handler=_print_config)
