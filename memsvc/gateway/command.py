"""`memsvc gateway-config` and the `--replica` option of `memsvc gateway`: Envoy in front of
several memsvc replicas that share one store, for operators who run the gateway apart from
the replicas (`memsvc serve --no-gateway` on each)."""

from __future__ import annotations

import argparse
import sys

from memsvc import config as cfg
from memsvc.gateway.envoy_config import Replica, parse_replica

REPLICA_HELP = ("HOST:PORT of a memsvc replica's gRPC server; repeat it for each replica (round robin "
                "over those whose health check passes). Default: the configured gRPC host and port")
CONFIG_HELP = "print the Envoy config `memsvc gateway` would run (with its options) and exit"


def _replica(text: str) -> Replica:
    try:
        return parse_replica(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_replica_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--replica", dest="replicas", action="append", type=_replica, default=[],
                        metavar="HOST:PORT", help=REPLICA_HELP)


def replicas(args: argparse.Namespace) -> tuple[Replica, ...]:
    """The replicas the command line lists, in order. One listed twice is refused: it would
    get twice the others' share of requests, and is more likely a typo for a missing one."""
    listed = tuple(getattr(args, "replicas", None) or ())
    for replica in listed:
        if listed.count(replica) > 1:
            raise cfg.ConfigError(f"--replica {replica[0]}:{replica[1]} is listed more than once")
    return listed


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
