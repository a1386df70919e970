"""What the README must not get wrong twice: one install table, naming every extra
pyproject.toml defines (other places link to it, so two copies cannot disagree), and an auth
section that shows the loopback form first and the public bind only after it, with its
warning."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
INSTALL_HEADER = "| install | brings |"


def section(title: str) -> str:
    """The text of `## title` up to the next `## ` heading."""
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_there_is_one_install_table_and_it_names_every_extra():
    assert README.count(INSTALL_HEADER) == 1, "the install table appears more than once: link to it instead"
    table = README.split(INSTALL_HEADER, 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"^\| `memsvc\[(\w+)\]`", table, flags=re.M))
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert named == extras


def test_every_link_to_the_install_table_finds_it():
    anchors = set(re.findall(r"\]\(#(what-the-install-brings)\)", README))
    assert anchors and "\n### What the install brings\n" in README


def test_the_auth_example_binds_loopback_first_and_warns_before_a_public_bind():
    auth = section("Running with auth")
    commands = re.findall(r"```sh\n(.*?)```", auth, flags=re.S)
    assert "MEMSVC_API_TOKENS" in commands[0] and "0.0.0.0" not in commands[0]
    public = next(i for i, command in enumerate(commands) if "0.0.0.0" in command)
    assert public > 0
    after = auth.split(commands[public], 1)[1]
    assert re.search(r"Warning: `0\.0\.0\.0`.*every network interface.*no TLS", after.split("\n\n", 2)[1], flags=re.S)
