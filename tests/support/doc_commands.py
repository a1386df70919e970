"""The commands of README.md and docs/*.md, as a reader finds them.

A fenced block is a command block when it is marked `sh` or `python`: those are run, in
order, by tests/e2e/test_readme.py. A block without a language (a bare ```) holds commands
that a test cannot run; each of them is listed in NOT_RUN with the reason, and
tests/unit/test_readme_rules.py fails on a bare block whose command is not listed there (and
on a NOT_RUN entry no document uses any more). `json` blocks are data and `text` blocks
diagrams or file trees: neither holds a command. A `ts` block is TypeScript that the
TypeScript SDK's suite runs: it must stand, as written, in clients/typescript/README.md, whose
every `ts` block clients/typescript/test/readme.test.ts runs against a real memsvc.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = {"sh", "python", "ts", "json", "text", ""}
TYPESCRIPT_README = ROOT / "clients" / "typescript" / "README.md"
OAUTH_DEV_SERVER = ".venv/bin/python scripts/oauth_dev_server.py"

# A distinctive start of each command no test runs, and why.
NOT_RUN: dict[str, str] = {
    "./scripts/test.sh": "it runs the whole suite, this test included",
    ".venv/bin/pip install -e '.[cluster]'": "it installs from the package index, which a test does not reach; "
    "the dev extra test.sh installs already holds the cluster extra",
    "curl -sS -H 'content-type: application/json' -X PUT localhost:8080/api/settings/memory -d "
    '\'{"primaryBackend": "notion"': "it points memsvc at api.notion.com, with a real integration token",
    "curl -sS -H 'content-type: application/json' -X PUT localhost:8080/api/settings/memory -d "
    '\'{"primaryBackend": "central"': "it needs a second memsvc at memsvc.internal",
    "MEMSVC_API_TOKENS=… memsvc serve --no-gateway --grpc-host 10.0.0.1": "it binds another host's address and "
    "needs a PostgreSQL at db.internal",
    "memsvc gateway --mcp-port -1 --replica 10.0.0.1:50051": "it fronts replicas on hosts 10.0.0.1-3; "
    "`memsvc cluster` runs the same gateway on one machine",
    ".venv/bin/python bench/run_all.py": "it runs every benchmark (12 to 35 minutes of the machine) and rewrites "
    "bench/results/",
    ".venv/bin/python scripts/generate.py": "it rewrites gen/ and deploy/ in the checkout; "
    "tests/service/test_generated.py generates the same and fails on drift",
}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def documents() -> list[Path]:
    """README.md first, then every docs/*.md by name."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, in order (fences may be indented, as in a list)."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").split("\n")
    opening: tuple[int, str, str] | None = None  # line, indent, language
    body: list[str] = []
    for number, line in enumerate(lines, 1):
        match = re.fullmatch(r"( *)```(\w*)\s*", line)
        if opening is None:
            if match:
                opening, body = (number, match.group(1), match.group(2)), []
        elif match and not match.group(2):
            indent = opening[1]
            code = "\n".join(text.removeprefix(indent) for text in body)
            found.append(Block(path, opening[0], opening[2], code + "\n"))
            opening = None
        else:
            body.append(line)
    assert opening is None, f"{path}:{opening[0]}: a fence that is never closed"
    return found


def commands(block: Block) -> list[str]:
    """A shell block's commands: a line ending in a backslash, or one inside an open quote,
    goes on with the next; blank lines and comment lines are not commands."""
    out: list[str] = []
    pending = ""
    for line in block.code.split("\n"):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending = f"{pending}\n{line}" if pending else line
        if pending.endswith("\\"):
            continue
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the command goes on
            continue
        out.append(pending.strip())
        pending = ""
    assert not pending, f"{block.where}: an unfinished command: {pending!r}"
    return out


def not_run_reason(command: str) -> str | None:
    return next((reason for start, reason in NOT_RUN.items() if command.startswith(start)), None)


def starts_a_helper(command: str) -> bool:
    """A server the document's other commands talk to beside memsvc, which the reader starts
    in a terminal of its own: the local OAuth authorization server."""
    return command.startswith(OAUTH_DEV_SERVER)


def starts_a_server(command: str) -> bool:
    """A command that runs in the foreground until stopped: the set-up script (with any
    variables and flags), or a local cluster."""
    return bool(
        re.search(r"(^|\s)\./scripts/run\.sh(\s|$)", command) or re.match(r"\.venv/bin/memsvc cluster(\s|$)", command)
    )
