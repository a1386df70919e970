"""`memsvc build-models`: build the local models ahead of time, so a running server never
builds one while requests wait (they would fall back to keywords for minutes).

Today that is the default static model, distilled once per install from the shipped MiniLM,
with ja/zh/ru pieces added from the shipped multilingual USE (minutes on two cores). The build shows the distillation's own progress, writes into a
temporary folder renamed into place only when complete, and holds a lock file: a build
killed half-way leaves nothing a server would load, and the next run starts it cleanly.
"""

from __future__ import annotations

import argparse
import sys
import time

from memsvc import config as cfg

EXIT_CANNOT_BUILD = 1


def build_models(conf: cfg.Config, args: argparse.Namespace) -> int:
    from memsvc.embedding.resolver import EmbeddingConfig
    from memsvc.embedding.sources import StaticSource
    from memsvc.kernel.embedding_errors import EmbeddingError

    embedding = EmbeddingConfig.from_config(conf)
    if embedding.static_model:
        print(f"MEMORY_STATIC_MODEL is set ({embedding.static_model}): no static model to build")
        return 0
    source = StaticSource(None, embedding.static_cache_dir)
    if source.built:
        print(f"static model {source.model}: already built in {source.folder}")
        return 0
    problem = source.unavailable()
    if problem:
        if args.skip_unavailable:
            print(f"static model not built: {problem} (the static source stays unavailable)")
            return 0
        print(f"memsvc: the static model cannot be built here: {problem}", file=sys.stderr)
        return EXIT_CANNOT_BUILD
    print(
        f"building the static model {source.model} in {source.folder}\n"
        "(distilled once from MiniLM, then ja/zh/ru pieces from the multilingual USE: a few minutes on two "
        "cores; every later start loads it)",
        flush=True,
    )
    started = time.monotonic()
    try:
        source.build(echo=sys.stderr.buffer)
    except EmbeddingError as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return EXIT_CANNOT_BUILD
    print(f"static model built in {time.monotonic() - started:.0f} s: {source.folder}")
    return 0


def add_command(commands: argparse._SubParsersAction) -> None:
    text = "build the default static model now (once per install), with progress"
    sub = commands.add_parser(
        "build-models",
        help=text,
        description=text + ". The cache folder is MEMORY_STATIC_CACHE_DIR, by default inside this installation.",
    )
    sub.add_argument(
        "--skip-unavailable",
        action="store_true",
        help="exit 0 when it cannot be built here (no [minilm] extra): the set-up scripts use it",
    )
    sub.set_defaults(handler=build_models)
