#!/usr/bin/env bash
# Set up (first time) and run every test: unit, service (real gRPC server) and e2e (real
# Envoy). Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh" "dev"
cd "$ROOT"
# Debian chromium for the studio browser tests: installed as root (a failed install fails the
# run); without root it says how to install it, and those tests skip.
scripts/install_browser.sh
# The TypeScript SDK's dependencies, exactly as its lock file says (tests/sdk/test_typescript.py
# builds it and runs its suite against a real memsvc).
(cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error)
# The MCP Inspector's CLI (a client nobody here wrote) with the Node 22 it needs, for
# tests/e2e/test_mcp_inspector.py.
(cd tests/mcp_inspector && npm ci --no-audit --no-fund --loglevel=error)
exec "$VENV/bin/python" -m pytest "$@"
