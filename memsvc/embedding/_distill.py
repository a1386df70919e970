"""`python -m memsvc.embedding._distill TEACHER_DIR OUT_DIR PCA_DIMS [LIMITS_JSON]`: distill a
model2vec static model from a local sentence-transformers folder, add the multilingual
teacher's ja/zh/ru pieces to it (memsvc.embedding._multilingual; LIMITS_JSON caps how many
pieces per script, default its LIMITS) and save it to OUT_DIR.

Run as a child process by `StaticSource` (see there why). Offline: importing
`memsvc.embedding` sets the hub to offline mode before model2vec/transformers load, and the
teacher is a local folder, so model2vec never asks the hub for a model card either.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from pathlib import Path

import memsvc.embedding  # noqa: F401 - offline mode first

PR_SET_PDEATHSIG = 1
PARENT_ENV = "MEMSVC_DISTILL_PARENT"  # the pid of the process that started this one


def die_with_parent() -> None:
    """Linux: end this child when the process that started it dies (however it dies), so a
    killed build leaves no distillation running on; its half-written folder is removed by
    the next build, which starts again cleanly. The parent passes its pid, so a parent that
    died before this ran is noticed too (this process then has another parent)."""
    parent = int(os.environ.get(PARENT_ENV) or os.getppid())
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the lock and the temporary folder still keep the cache whole
    if os.getppid() != parent:
        sys.exit(1)


def main(argv: list[str]) -> int:
    die_with_parent()
    if len(argv) not in (3, 4):
        print("usage: python -m memsvc.embedding._distill TEACHER_DIR OUT_DIR PCA_DIMS [LIMITS_JSON]", file=sys.stderr)
        return 2
    teacher, out, pca = Path(argv[0]), Path(argv[1]), int(argv[2])
    limits = json.loads(argv[3]) if len(argv) == 4 else None
    if not (teacher / "config.json").is_file():
        print("teacher is not a local model folder", file=sys.stderr)
        return 2
    # This child's stderr is not our JSON log: it carries the distillation's progress bar
    # (the parent parses it for the engine status and shows it during set-up).
    os.environ.pop("TQDM_DISABLE", None)
    from model2vec.distill import distill

    from memsvc.embedding import _multilingual

    model = distill(str(teacher), device="cpu", pca_dims=pca)
    model.save_pretrained(out)
    counts = _multilingual.extend(out, pca, limits)
    print(json.dumps({"multilingual": counts}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
