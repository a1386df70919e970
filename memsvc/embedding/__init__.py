"""Embedding sources (remote / static / transformers), their resolution from the memory
settings, the embedding cache and the reranker client.

Nothing here downloads model weights: every loader is pointed at a local folder and the
Hugging Face hub is switched to offline mode before any model library is imported.
"""

from __future__ import annotations

import os
import sys

# Nothing downloads weights at run time. Set before the heavy libraries are
# imported (they are imported lazily, inside the sources); if huggingface_hub was already
# imported by someone else, flip its module-level constant too.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# The model libraries print progress bars and load reports on stderr, which must carry only
# our JSON log lines.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TQDM_DISABLE", "1")
if "huggingface_hub.constants" in sys.modules:  # pragma: no cover - depends on import order
    vars(sys.modules["huggingface_hub.constants"])["HF_HUB_OFFLINE"] = True

from memsvc.kernel.embedding_errors import (  # noqa: E402
    EmbeddingError,
    EmbeddingNotReady,
    EmbeddingURLRefused,
    NoEmbeddingSource,
    RerankError,
)

__all__ = ["EmbeddingError", "EmbeddingNotReady", "EmbeddingURLRefused", "NoEmbeddingSource", "RerankError"]
