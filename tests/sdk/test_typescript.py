"""The TypeScript SDK (clients/typescript, @memsvc/client) built and its own suite run: node's
test runner against a real memsvc that the suite starts from this checkout's .venv (every
method, the typed errors, retries, the Vercel AI SDK middleware, the README's blocks, the
generated code's drift). `./scripts/test.sh` installs its dependencies with `npm ci`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"


def test_the_typescript_sdk_builds_and_its_suite_passes() -> None:
    assert (PACKAGE / "node_modules").is_dir(), "run `npm ci` in clients/typescript (./scripts/test.sh does)"
    env = {**os.environ, "MEMSVC_PYTHON": sys.executable}
    for script in ("build", "test"):
        done = subprocess.run(
            ["npm", "run", "--silent", script], cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, f"npm run {script} failed:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    assert "# fail 0" in done.stdout and "# pass " in done.stdout, done.stdout[-2000:]
