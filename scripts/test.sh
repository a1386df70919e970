#!/usr/bin/env bash
# Set up (first time) and run every test: unit, service (real gRPC server) and e2e (real
# Envoy). Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh" "dev"
cd "$ROOT"
# Debian chromium for the studio browser tests: installed as root (a failed install fails the
# run); without root it says how to install it, and those tests skip.
scripts/install_browser.sh
exec "$VENV/bin/python" -m pytest "$@"
