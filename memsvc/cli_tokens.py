"""`memsvc tokens create | list | revoke`: the operator's credential management.

These commands write the database directly (the same file the server reads, under
--data-dir, or the PostgreSQL of --database-url / MEMSVC_DATABASE_URL), so they work with
the server down, and a running server (every process and replica on that database) sees
the change at its next request: each caches the credentials it verified only under the
database's change counter of the credentials, which every create and revoke advances. Admin callers can do the same over gRPC (CredentialService) or REST
(`/api/credentials`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from memsvc.config import Config
from memsvc.core.credentials import ALL_TENANTS, PERMISSIONS, Credential, Credentials
from memsvc.kernel.errors import ConflictError, MemsvcError, NotFoundError


@contextmanager
def _credentials(config: Config) -> Iterator[Credentials]:
    from memsvc.storage.stores import open_admin

    stores = open_admin(config)
    try:
        stores.migrate()
        yield Credentials(stores.credential_store)
    finally:
        stores.close()


def credential_dict(c: Credential) -> dict[str, Any]:
    """A credential as `tokens list --json` prints it (never a secret: none is stored)."""
    return {
        "id": c.id,
        "permissions": sorted(c.permissions),
        "tenants": c.tenant_list(),
        "characters": c.characters,
        "created_at": c.created_at.isoformat() if c.created_at else None,
        "revoked_at": c.revoked_at.isoformat() if c.revoked_at else None,
    }


def _split(values: list[str] | None) -> list[str]:
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def create(config: Config, args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    with _credentials(config) as credentials:
        issued = credentials.create(args.id, _split(args.permissions), _split(args.tenants), args.characters)
    if args.json:
        out.write(json.dumps({**credential_dict(issued.credential), "token": issued.token}) + "\n")
        return 0
    c = issued.credential
    tenants = ", ".join(c.tenant_list()) or "(none)"
    out.write(
        f"created credential {c.id}: {', '.join(sorted(c.permissions))}; tenants {tenants}; "
        f"character memory {'yes' if c.characters else 'no'}\n"
    )
    out.write(f"token (shown once, store it now): {issued.token}\n")
    return 0


def list_tokens(config: Config, args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    with _credentials(config) as credentials:
        rows = [credential_dict(c) for c in credentials.list()]
    if args.json:
        out.write(json.dumps(rows) + "\n")
        return 0
    out.write(f"{'ID':<24} {'PERMISSIONS':<26} {'TENANTS':<24} {'CHARS':<5} {'CREATED':<20} REVOKED\n")
    out.writelines(
        f"{r['id']:<24} {','.join(r['permissions']):<26} {','.join(r['tenants']) or '-':<24} "
        f"{'yes' if r['characters'] else 'no':<5} {str(r['created_at'])[:19]:<20} "
        f"{str(r['revoked_at'])[:19] if r['revoked_at'] else '-'}\n"
        for r in rows
    )
    return 0


def revoke(config: Config, args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    with _credentials(config) as credentials:
        revoked = credentials.revoke(args.id)
    out.write(f"revoked {revoked.id} at {revoked.revoked_at.isoformat() if revoked.revoked_at else '?'}\n")
    return 0


def _guarded(handler):
    """A refused request is a message and an exit code, not a traceback: 2 for bad input,
    1 for a conflict or an unknown id."""

    def run(config: Config, args: argparse.Namespace) -> int:
        try:
            return handler(config, args)
        except MemsvcError as exc:
            print(f"memsvc tokens: {exc.message}", file=sys.stderr)
            return 1 if isinstance(exc, (ConflictError, NotFoundError)) else 2

    return run


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `tokens` and its actions on the CLI's subcommand parser."""
    text = "manage bearer-token credentials in the database (works with the server down)"
    tokens = commands.add_parser("tokens", help=text, description=text)
    actions = tokens.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help_text, description=help_text)
        sub.add_argument(
            "--data-dir",
            dest="data_dir",
            default=None,
            help="where the SQLite database lives [MEMSVC_DATA_DIR, default ./data]",
        )
        sub.add_argument(
            "--database-url",
            dest="database_url",
            default=None,
            help="the shared PostgreSQL instead of SQLite [MEMSVC_DATABASE_URL]",
        )
        sub.set_defaults(handler=_guarded(handler))
        return sub

    made = action("create", "create a credential and print its token (once)", create)
    made.add_argument("id", help="a name you choose: letters, digits, '.', '-', '_'")
    made.add_argument(
        "--permissions",
        action="append",
        required=True,
        metavar="P[,P]",
        help=f"comma-separated, from {', '.join(PERMISSIONS)} (admin implies everything)",
    )
    made.add_argument(
        "--tenants",
        action="append",
        metavar="ID[,ID]",
        help=f"apiKeyIds it may address, comma-separated, or {ALL_TENANTS!r} for every one",
    )
    made.add_argument("--characters", action="store_true", help="it may read/write character memory")
    made.add_argument("--json", action="store_true", help="print the credential and token as JSON")
    listing = action("list", "list credentials (ids, permissions, tenants; never secrets)", list_tokens)
    listing.add_argument("--json", action="store_true", help="print JSON")
    gone = action("revoke", "revoke a credential: refused from the next request on", revoke)
    gone.add_argument("id", help="the credential id")
