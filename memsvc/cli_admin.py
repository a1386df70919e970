"""`memsvc reindex | status | memories ...`: operator commands that talk to a running server
over gRPC (so they honour its auth and never open the database behind its back)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from google.protobuf import json_format

from memsvc.client import Client, client_options
from memsvc.config import Config
from memsvc.core import reindex as reindex_targets
from memsvc.v1 import engine_pb2, memory_pb2

BAR_WIDTH = 30


def _as_dict(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, always_print_fields_with_no_presence=True)


# ---- reindex ----


def progress_line(p: engine_pb2.ReindexProgress, total: int) -> str:
    done = p.processed + p.errors
    share = min(1.0, done / total) if total else 1.0
    return (
        f"{p.state:<9} {done}/{total} ({share:4.0%}) errors {p.errors} "
        f"{p.rate_per_second:,.0f}/s eta {p.eta_seconds:,.1f}s"
    )


def progress_bar(p: engine_pb2.ReindexProgress, total: int) -> str:
    done = p.processed + p.errors
    filled = int(BAR_WIDTH * min(1.0, done / total)) if total else BAR_WIDTH
    return f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] " + progress_line(p, total)


def reindex(client: Client, args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """A live bar on a terminal, one plain line per message otherwise (logs, pipes)."""
    request = engine_pb2.ReindexRequest(
        force=args.force, limit=args.limit, target=args.target or "", attach=args.attach
    )
    tty = out.isatty()
    total, last = 0, None
    for message in client.stream(client.engine.Reindex, request):
        if message.started:
            total = message.pending
            out.write(f"reindex started: {total} memories pending\n")
            continue
        last = message
        if tty:
            out.write("\r" + progress_bar(message, total))
        else:
            out.write(progress_line(message, total) + "\n")
        out.flush()
    if tty:
        out.write("\n")
    if last is None:
        out.write("reindex finished: nothing to do\n")
        return 0
    if last.state != "done":
        out.write(f"reindex {last.state}: {last.error}\n")
        return 1
    out.write(f"reindex done: {last.processed} embedded, {last.errors} errors\n")
    return 0


# ---- status ----


def status_table(status: dict[str, Any]) -> str:
    """Engine status as aligned `section  field  value` rows."""
    rows = []
    for section, fields in status.items():
        if isinstance(fields, list):  # one row per item (the backends), named by its name
            fields = {
                str(item.get("name", i)): {k: v for k, v in item.items() if k != "name"}
                for i, item in enumerate(fields)
            }
        for name, value in fields.items():
            if isinstance(value, dict):
                value = ", ".join(f"{k}={v}" for k, v in value.items())
            rows.append((section, name, "" if value is None else str(value)))
    widths = [max(len(r[i]) for r in rows) for i in (0, 1)]
    return "\n".join(f"{s:<{widths[0]}}  {n:<{widths[1]}}  {v}" for s, n, v in rows)


def status(client: Client, args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    data = _as_dict(client.call(client.engine.GetEngineStatus, engine_pb2.GetEngineStatusRequest()))
    out.write(json.dumps(data, indent=2) + "\n" if args.json else status_table(data) + "\n")
    return 0


# ---- memories ----


def memories(client: Client, args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    action = args.action
    if action == "list":
        page = client.call(
            client.memory.ListMemories,
            memory_pb2.ListMemoriesRequest(api_key_id=args.api_key_id or "", q=args.q or "", limit=args.limit),
        )
        out.writelines(f"{m.id}  {m.api_key_id}  {m.type:<10}  {m.key or '-'}  {m.content[:80]}\n" for m in page.data)
        out.write(f"{len(page.data)} of {page.total}\n")
    elif action == "add":
        created = client.call(
            client.memory.CreateMemory,
            memory_pb2.CreateMemoryRequest(
                api_key_id=args.api_key_id,
                content=args.content,
                type=args.type or "",
                key=args.key or None,
                session_id=args.session_id or None,
            ),
        )
        out.write(f"{'created' if created.created else 'updated'} {created.id}\n")
    elif action == "delete":
        client.call(client.memory.DeleteMemory, memory_pb2.DeleteMemoryRequest(id=args.id))
        out.write(f"deleted {args.id}\n")
    else:
        cleared = client.call(
            client.memory.ClearMemories,
            memory_pb2.ClearMemoriesRequest(
                api_key_id=args.api_key_id, type=args.type or "", session_id=args.session_id or ""
            ),
        )
        out.write(f"deleted {cleared.deleted_count} memories\n")
    return 0


def _memories_actions(memories_parser: argparse.ArgumentParser) -> None:
    actions = memories_parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, text: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=text, description=text)
        client_options(sub, nested=True)
        return sub

    owner = "the owner (API key id) of the memories"
    listing = action("list", "list memories, newest first")
    listing.add_argument("--api-key-id", help=f"{owner} (default: every owner)")
    listing.add_argument("--q", metavar="TEXT", help="only memories whose content or key contains TEXT")
    listing.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    add = action("add", "add a memory (or update the one with the same key)")
    add.add_argument("--api-key-id", required=True, help=owner)
    add.add_argument("--content", required=True, help="the text to remember")
    add.add_argument("--key", help="a stable key, e.g. preference:editor; a second add with it updates")
    add.add_argument("--type", help="factual (default), episodic, procedural or semantic")
    add.add_argument("--session-id", help="the conversation it came from")
    delete = action("delete", "delete one memory by id")
    delete.add_argument("id", help="the memory id")
    clear = action("clear", "delete every memory of an owner (optionally one type or session)")
    clear.add_argument("--api-key-id", required=True, help=owner)
    clear.add_argument("--type", help="only memories of this type")
    clear.add_argument("--session-id", help="only memories of this session")


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register reindex, status and memories on the CLI's subcommand parser. They take only
    the options that locate the server (MEMSVC_API_TOKENS gives them their token)."""

    def client_parser(name: str, text: str, handler) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=text, description=text)
        client_options(sub)
        sub.set_defaults(handler=handler, client_command=True)
        return sub

    r = client_parser("reindex", "re-embed memories on a running server, with live progress", reindex)
    r.add_argument("--force", action="store_true", help="re-embed every memory, not only pending ones")
    r.add_argument("--limit", type=int, default=0, help="at most this many memories (0 = all pending)")
    r.add_argument(
        "--target",
        choices=[*reindex_targets.TARGETS, *reindex_targets.TARGET_ALIASES],
        help="local: the store's own vector index (the default); qdrant: backfill Qdrant from the store",
    )
    r.add_argument("--attach", action="store_true", help="follow a reindex that is already running")
    s = client_parser("status", "print the engine status of a running server", status)
    s.add_argument("--json", action="store_true", help="JSON instead of a table")
    _memories_actions(client_parser("memories", "list, add, delete or clear memories on a running server", memories))


def run_client_command(config: Config, args: argparse.Namespace) -> int:
    client = Client.connect(config, getattr(args, "server", None))
    try:
        return args.handler(client, args)
    finally:
        client.close()
