"""The checks configured in pyproject.toml run with the tests: ruff (lint and format) and
mypy, from the venv, on the paths the configuration names, each with zero findings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

CHECKS = {
    "ruff check": [str(BIN / "ruff"), "check", "--no-cache", "."],
    "ruff format": [str(BIN / "ruff"), "format", "--check", "--no-cache", "."],
    # `files` in [tool.mypy] says what is checked.
    "mypy": [str(BIN / "mypy")],
}


@pytest.mark.parametrize("name", list(CHECKS))
def test_no_findings(name: str) -> None:
    result = subprocess.run(CHECKS[name], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, f"{name} found problems:\n{result.stdout}{result.stderr}"
