"""The scale-out path as a newcomer walks it from the README: `memsvc serve --database-url`
on an install without the `postgres` extra says which extra to install (exit 2, no
traceback), and `memsvc cluster` runs a PostgreSQL of its own, replicas and the gateway on
one machine and stops them all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
# Makes `import psycopg` (and its submodules) fail as on an install without the extra: a
# sitecustomize on PYTHONPATH runs before the CLI's first import.
_NO_PSYCOPG = '''
import sys

class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "psycopg":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
'''


@pytest.mark.parametrize("command", [
    ("serve", "--no-gateway", "--processes", "1", "--grpc-port", "0", "--metrics-port", "-1", "--mcp-port", "-1"),
    ("serve", "--processes", "2", "--grpc-port", "0", "--rest-port", "0", "--metrics-port", "-1", "--mcp-port", "-1"),
    ("migrate",),
])
def test_a_database_url_without_the_postgres_extra_names_the_extra_and_exits_2(tmp_path: Path,
                                                                                command: tuple[str, ...]) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(_NO_PSYCOPG)
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(shim),
           "MEMORY_AUTO_STATIC": "false"}
    done = subprocess.run([sys.executable, "-m", "memsvc", *command, "--data-dir", str(tmp_path / "data"),
                           "--database-url", "postgresql://memsvc@127.0.0.1:9/memsvc"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "pip install 'memsvc[postgres]'" in done.stderr
    assert "psycopg is not installed" in done.stderr
    assert "Traceback" not in done.stderr
    # Nothing was created for the store that could not be opened.
    assert not (tmp_path / "data" / "memsvc.db").exists()
