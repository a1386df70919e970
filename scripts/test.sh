#!/usr/bin/env bash
# Set up (first time) and run every test: unit, service (real gRPC server) and e2e (real
# Envoy). Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh" "dev"
cd "$ROOT"
scripts/install_browser.sh || echo "test.sh: no browser installed, the studio browser tests will skip" >&2  # Debian chromium (root)
exec "$VENV/bin/python" -m pytest "$@"
