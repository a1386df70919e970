#!/usr/bin/env bash
# Set up (first time) and run every test: unit, service (real gRPC server) and e2e (real
# Envoy). Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh" "dev"
cd "$ROOT"
exec "$VENV/bin/python" -m pytest "$@"
