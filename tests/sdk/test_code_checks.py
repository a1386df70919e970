"""The SDK is checked as strictly as it claims to be typed (py.typed): mypy --strict with the
configuration in clients/python/pyproject.toml, zero findings. (ruff runs over it with the
rest of the repository: tests/unit/test_code_checks.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SDK = Path(__file__).resolve().parents[2] / "clients" / "python"


def test_mypy_strict_finds_nothing_in_the_sdk() -> None:
    mypy = Path(sys.executable).parent / "mypy"
    result = subprocess.run(
        [str(mypy), "--cache-dir=/dev/null"], cwd=SDK, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, f"mypy found problems:\n{result.stdout}{result.stderr}"
    assert "no issues found" in result.stdout
