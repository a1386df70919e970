"""Which embedding source the memory settings select, and the one entry point the engine uses
to embed through the cache.

`auto`: a remote provider with a key (the one embeddingProviderModel names, or the first
configured one with a key) or customBaseUrl + customModelId → static if staticEnabled →
transformers if transformersEnabled → none (keyword search only). An explicit source is used
if it can work, otherwise none with the reason. Each `Resolved` says why, in English.

Source objects are created once per distinct configuration and reused, so models load once
per process; a status probe never loads a model or calls a remote endpoint.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from opentelemetry.trace import SpanKind

from memsvc.core.settings.memory import MemorySettings
from memsvc.embedding.cache import EmbeddingCache, cache_key
from memsvc.embedding.providers import ProviderEndpoint, ProviderRegistry, split_provider_model
from memsvc.embedding.rerank import RerankClient
from memsvc.embedding.sources import (
    DISTILL_PCA_DIMS,
    REMOTE,
    STATIC,
    TRANSFORMERS,
    RemoteSource,
    StaticSource,
    TransformersSource,
    default_static_cache_dir,
)
from memsvc.kernel import tracing
from memsvc.kernel.embedding import EmbeddingSource, EmbeddingStatus, LoadState, Resolved
from memsvc.kernel.embedding_errors import EmbeddingError, EmbeddingNotReady, NoEmbeddingSource, RerankError
from memsvc.kernel.inline import may_block, settle
from memsvc.kernel.url_policy import check_url

log = logging.getLogger("memsvc.embedding")

QUANTIZATIONS = ("none", "int8")


@dataclass(frozen=True)
class EmbeddingConfig:
    """The process-level options of the embedding layer (environment, via memsvc.config)."""

    providers: tuple[tuple[str, str], ...] = ()
    api_keys: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    cache_max: int = 1000
    cache_ttl_ms: int = 300_000
    transformers_model: str | None = None
    static_model: str | None = None
    static_cache_dir: Path = field(default_factory=default_static_cache_dir)
    vec_quantization: str = "none"
    remote_timeout_s: float = 10.0
    rerank_timeout_s: float = 5.0
    #: auto takes the static model when it is built, even with staticEnabled false.
    auto_static: bool = False

    @classmethod
    def from_config(cls, config: Any) -> EmbeddingConfig:
        cache_dir = config.static_cache_dir or default_static_cache_dir()
        return cls(
            providers=tuple(config.embedding_providers),
            api_keys=tuple(config.embedding_api_keys),
            cache_max=config.embedding_cache_max,
            cache_ttl_ms=config.embedding_cache_ttl_ms,
            transformers_model=config.transformers_model or None,
            static_model=config.static_model or None,
            static_cache_dir=Path(cache_dir),
            vec_quantization=config.vec_quantization,
            remote_timeout_s=config.embedding_timeout_s,
            auto_static=config.auto_static,
        )


@dataclass(frozen=True)
class RerankTarget:
    provider: str
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)


class Embeddings:
    def __init__(
        self,
        config: EmbeddingConfig | None = None,
        *,
        clock: Callable[[], float] | None = None,
        teacher_path: str | Path | None = None,
    ):
        self.config = config or EmbeddingConfig()
        if self.config.vec_quantization not in QUANTIZATIONS:
            raise ValueError(f"vec_quantization must be one of {QUANTIZATIONS}")
        self.registry = ProviderRegistry(self.config.providers, self.config.api_keys)
        cache_args: dict[str, Any] = {"max_entries": self.config.cache_max, "ttl_ms": self.config.cache_ttl_ms}
        if clock is not None:
            cache_args["clock"] = clock
        self.cache = EmbeddingCache(**cache_args)
        self._teacher_path = teacher_path
        self._sources: dict[tuple, EmbeddingSource] = {}
        self._lock = threading.Lock()
        self._warming: dict[int, threading.Thread] = {}
        self._rerank_client: RerankClient | None = None

    # ------------------------------------------------------------------ resolution

    def resolve(self, settings: MemorySettings) -> Resolved:
        kind = settings.embedding_source
        if kind == REMOTE:
            source, why = self._remote(settings)
            reason = f"embeddingSource is remote: {why}" if source else f"embeddingSource is remote but {why}"
        elif kind == STATIC:
            source, why = self._static(settings)
            reason = f"embeddingSource is static: {why}" if source else f"embeddingSource is static but {why}"
        elif kind == TRANSFORMERS:
            source, why = self._transformers(settings)
            reason = (
                f"embeddingSource is transformers: {why}" if source else f"embeddingSource is transformers but {why}"
            )
        else:
            source, reason = self._auto(settings)
        return Resolved(source, reason, self.config.vec_quantization)

    def _auto(self, settings: MemorySettings) -> tuple[EmbeddingSource | None, str]:
        skipped: list[str] = []
        source, why = self._remote(settings)
        if source is not None:
            return source, f"auto: remote, {why}"
        skipped.append(f"remote: {why}")
        if settings.static_enabled:
            source, why = self._static(settings)
            if source is not None:
                return source, f"auto: static, {why} ({'; '.join(skipped)})"
            skipped.append(f"static: {why}")
        elif (built := self._static_if_built()) is not None:
            return (
                built,
                f"auto: static, {built.model} is built and ready (staticEnabled is false; MEMORY_AUTO_STATIC) ({'; '.join(skipped)})",
            )
        else:
            skipped.append("static: staticEnabled is false")
        if settings.transformers_enabled:
            source, why = self._transformers(settings)
            if source is not None:
                return source, f"auto: transformers, {why} ({'; '.join(skipped)})"
            skipped.append(f"transformers: {why}")
        else:
            skipped.append("transformers: transformersEnabled is false")
        return None, f"auto: no embedding source, keyword search only ({'; '.join(skipped)})"

    def _remote(self, settings: MemorySettings) -> tuple[EmbeddingSource | None, str]:
        base, model_id = settings.custom_base_url, settings.custom_model_id
        if base or model_id:
            if not (base and model_id):
                missing = "customModelId" if base else "customBaseUrl"
                custom_problem = f"customBaseUrl and customModelId must both be set ({missing} is empty)"
            else:
                problem = check_url(base)
                if problem:
                    return None, f"customBaseUrl {problem}"
                source = self._source(
                    (REMOTE, "custom", base.rstrip("/"), model_id),
                    lambda: RemoteSource(base, model_id, None, self.config.remote_timeout_s, label="customBaseUrl"),
                )
                return source, f"customBaseUrl with customModelId {model_id}"
        else:
            custom_problem = None
        parsed = split_provider_model(settings.embedding_provider_model)
        if parsed is not None:
            provider_name, model = parsed
            endpoint = self.registry.get(provider_name)
            if endpoint is None:
                return None, _join(
                    custom_problem,
                    f"provider {provider_name} (embeddingProviderModel) is not configured (MEMSVC_EMBEDDING_PROVIDERS)",
                )
            if not endpoint.has_key:
                return None, _join(
                    custom_problem, f"provider {provider_name} has no API key (MEMSVC_EMBEDDING_API_KEYS)"
                )
            problem = check_url(endpoint.base_url)
            if problem:  # memsvc.config refuses these at start; an EmbeddingConfig built by hand may not
                return None, _join(custom_problem, f"the base URL of provider {provider_name} {problem}")
            return self._provider_source(
                endpoint, model
            ), f"provider {provider_name} (API key configured), model {model}"
        if settings.embedding_provider_model:
            return None, _join(custom_problem, 'embeddingProviderModel must look like "provider/model"')
        endpoint = self.registry.first_with_key()
        if endpoint is not None and not check_url(endpoint.base_url):
            model = endpoint.models[0].name
            return (
                self._provider_source(endpoint, model),
                f"provider {endpoint.name} (first configured provider with an API key), default model {model}",
            )
        return None, _join(
            custom_problem, "no provider with an API key is configured and customBaseUrl/customModelId are not set"
        )

    def _provider_source(self, endpoint: ProviderEndpoint, model: str) -> EmbeddingSource:
        return self._source(
            (REMOTE, endpoint.name, endpoint.base_url, model),
            lambda: RemoteSource(
                endpoint.base_url, model, endpoint.api_key, self.config.remote_timeout_s, label=endpoint.name
            ),
        )

    def _static(self, settings: MemorySettings) -> tuple[EmbeddingSource | None, str]:
        if not settings.static_enabled:
            return None, "staticEnabled is false"
        source = self._static_source()
        problem = source.unavailable()  # type: ignore[attr-defined]
        if problem:
            return None, problem
        if self.config.static_model:
            return source, f"staticEnabled, local model folder {source.model}"
        if source.built:  # type: ignore[attr-defined]
            return source, f"staticEnabled, {source.model} distilled from the shipped MiniLM (cached)"
        return source, (f"staticEnabled, {source.model} will be distilled once from the shipped MiniLM on first use")

    def _static_if_built(self) -> EmbeddingSource | None:
        """The static source for auto without staticEnabled: only when MEMORY_AUTO_STATIC is
        on and its model needs no build (a local folder, or the default model built at set-up),
        so the fast path runs out of the box and a request never starts a distillation."""
        if not self.config.auto_static:
            return None
        source = self._static_source()
        if source.unavailable() or not (self.config.static_model or source.built):  # type: ignore[attr-defined]
            return None
        return source

    def _static_source(self) -> EmbeddingSource:
        return self._source(
            (STATIC, self.config.static_model, str(self.config.static_cache_dir)),
            lambda: StaticSource(
                self.config.static_model, self.config.static_cache_dir, teacher_path=self._teacher_path
            ),
        )

    def _transformers(self, settings: MemorySettings) -> tuple[EmbeddingSource | None, str]:
        if not settings.transformers_enabled:
            return None, "transformersEnabled is false"
        source = self._source(
            (TRANSFORMERS, self.config.transformers_model), lambda: TransformersSource(self.config.transformers_model)
        )
        problem = source.unavailable()  # type: ignore[attr-defined]
        if problem:
            return None, problem
        return source, f"transformersEnabled, sentence-transformers {source.model} on CPU"

    def _source(self, key: tuple, make: Callable[[], EmbeddingSource]) -> EmbeddingSource:
        with self._lock:
            source = self._sources.get(key)
            if source is None:
                source = make()
                self._sources[key] = source
            return source

    # ------------------------------------------------------------------ embedding

    def embed(
        self, settings: MemorySettings, texts: Sequence[str], *, wait: bool = True
    ) -> tuple[Resolved, np.ndarray]:
        """Embed through the cache: hits come from it, the misses (deduplicated) go to the
        source in one call. Raises NoEmbeddingSource (keyword only) or EmbeddingError.
        `wait=False`: if the model is not loaded yet, start loading it in the background and
        raise EmbeddingNotReady instead of blocking (a request path can fall back)."""
        resolved = self.resolve(settings)
        source = resolved.source
        if source is None:
            raise NoEmbeddingSource(resolved)
        if not wait and not source.loaded:
            self.warm_in_background(source)
            raise EmbeddingNotReady(f"the {source.name} model {source.model} is still loading{_loading_note(source)}")
        return resolved, self.embed_with(source, texts)

    def embed_one(self, settings: MemorySettings, text: str, *, wait: bool = True) -> tuple[Resolved, np.ndarray]:
        resolved, matrix = self.embed(settings, [text], wait=wait)
        return resolved, matrix[0]

    def embed_with(self, source: EmbeddingSource, texts: Sequence[str]) -> np.ndarray:
        """`texts` embedded by `source` through the cache, in one span (GenAI `embeddings`)."""
        texts = list(texts)
        if not tracing.enabled():
            return self._embed_with(source, texts)[0]
        attributes = {
            tracing.OPERATION_NAME: tracing.EMBEDDINGS,
            tracing.REQUEST_MODEL: source.model,
            tracing.EMBEDDING_SOURCE: source.name,
            tracing.EMBEDDING_TEXTS: len(texts),
        }
        kind = SpanKind.CLIENT if source.name == REMOTE else SpanKind.INTERNAL
        with tracing.span(f"{tracing.EMBEDDINGS} {source.model}", attributes, kind) as span:
            out, hits = self._embed_with(source, texts)
            span.set_attributes({tracing.EMBEDDING_CACHE_HITS: hits, tracing.EMBEDDINGS_DIMENSION_COUNT: out.shape[1]})
        return out

    def _embed_with(self, source: EmbeddingSource, texts: list[str]) -> tuple[np.ndarray, int]:
        """The embeddings and how many texts the cache answered."""
        dim = source.dimensions
        found: dict[str, np.ndarray] = {}
        misses: list[str] = []
        seen: set[str] = set()
        for text in texts:
            if text in seen:
                continue
            seen.add(text)
            # A remote source before its first answer has no dimension: nothing can be cached yet.
            vector = None if dim is None else self.cache.peek(cache_key(source.name, source.model, dim, text))
            if vector is None:
                misses.append(text)
            else:
                found[text] = vector
        if misses and source.waits:
            may_block("an embedding that waits")
        fresh_keys: list[tuple[str, np.ndarray]] = []
        if misses:
            fresh = _embed_misses(source, misses)
            if fresh.ndim != 2 or fresh.shape[0] != len(misses):
                raise EmbeddingError(
                    f"the {source.name} source returned {fresh.shape[0] if fresh.ndim else 0} "
                    f"embeddings for {len(misses)} texts"
                )
            dim = int(fresh.shape[1])
            for text, vector in zip(misses, fresh):
                found[text] = vector
                fresh_keys.append((cache_key(source.name, source.model, dim, text), vector))
        settle(functools.partial(self._remember, fresh_keys, hits=len(found) - len(misses), misses=len(misses)))
        out = np.zeros((len(texts), dim or 0), dtype=np.float32)
        for row, text in enumerate(texts):
            vector = found[text]
            if vector.shape[0] != out.shape[1]:
                raise EmbeddingError(
                    f"the {source.name} source changed dimension ({vector.shape[0]} vs {out.shape[1]})"
                )
            out[row] = vector
        return out, len(found) - len(misses)

    def _remember(self, fresh: list[tuple[str, np.ndarray]], hits: int, misses: int) -> None:
        for key, vector in fresh:
            self.cache.put(key, vector)
        self.cache.count(hits=hits, misses=misses)

    def warm(self, settings: MemorySettings) -> Resolved:
        """Load the selected model now (in the calling thread); returns the resolution."""
        resolved = self.resolve(settings)
        if resolved.source is not None:
            resolved.source.warm()
        return resolved

    def warm_in_background(self, source: EmbeddingSource) -> None:
        with self._lock:
            running = self._warming.get(id(source))
            if running is not None and running.is_alive():
                return

            def run() -> None:
                try:
                    source.warm()
                except EmbeddingError as exc:
                    log.warning("embedding.warm.failed", extra={"source": source.name, "error": str(exc)})

            thread = threading.Thread(target=run, name=f"embedding-warm-{source.name}", daemon=True)
            self._warming[id(source)] = thread
            thread.start()

    # ------------------------------------------------------------------ introspection

    def status(self, settings: MemorySettings) -> EmbeddingStatus:
        """GetEngineStatus' embedding part. Measured: what resolves now, whether its package
        and files are there, whether it is loading, what the last call did; never loads a
        model or calls out."""
        resolved = self.resolve(settings)
        source = resolved.source
        load = source.load_state if source is not None else LoadState("none")
        last_error = getattr(source, "last_error", None) if source is not None else None
        reason = resolved.reason
        if last_error and load.state == "failed":
            reason = f"{reason}; last embedding attempt failed: {last_error}"
        elif load.state == "not_loaded":
            reason = f"{reason}; not loaded yet: it loads on first use (requests fall back to keywords meanwhile)"
        return EmbeddingStatus(
            source=resolved.name,
            model=resolved.model,
            dimensions=resolved.dimensions,
            state=load.state,
            phase=load.phase,
            progress=load.progress,
            loaded=bool(source is not None and source.loaded),
            signature=resolved.signature,
            reason=reason,
            cache_stats=self.cache.stats(),
        )

    def providers(self) -> list[dict[str, Any]]:
        """ListEmbeddingProviders: the configured remote providers, then the local sources
        that are installed here, each with its models and real dimensions."""
        out = self.registry.listing()
        static = StaticSource(self.config.static_model, self.config.static_cache_dir, teacher_path=self._teacher_path)
        if static.unavailable() is None:
            dim = static.dimensions
            if dim is None and not self.config.static_model:
                dim = DISTILL_PCA_DIMS  # what the distillation produces (MiniLM has 384 ≥ 256)
            out.append(
                {
                    "provider": STATIC,
                    "has_key": False,
                    "kind": "local",
                    "models": [{"id": f"{STATIC}/{static.model}", "name": static.model, "dimensions": dim}],
                }
            )
        transformers = TransformersSource(self.config.transformers_model)
        if transformers.unavailable() is None:
            out.append(
                {
                    "provider": TRANSFORMERS,
                    "has_key": False,
                    "kind": "local",
                    "models": [
                        {
                            "id": f"{TRANSFORMERS}/{transformers.model}",
                            "name": transformers.model,
                            "dimensions": transformers.dimensions,
                        }
                    ],
                }
            )
        return out

    # ------------------------------------------------------------------ rerank

    def rerank_target(self, settings: MemorySettings) -> tuple[RerankTarget | None, str]:
        """Where rerankProviderModel points, with that provider's own key; or None and why."""
        if not settings.rerank_enabled:
            return None, "rerankEnabled is false"
        parsed = split_provider_model(settings.rerank_provider_model)
        if parsed is None:
            return None, 'rerankProviderModel is not set (expected "provider/model")'
        provider, model = parsed
        endpoint = self.registry.get(provider)
        if endpoint is None:
            return None, f"rerank provider {provider} is not configured (MEMSVC_EMBEDDING_PROVIDERS)"
        if not endpoint.has_key:
            return None, f"rerank provider {provider} has no API key (MEMSVC_EMBEDDING_API_KEYS)"
        problem = check_url(endpoint.base_url)
        if problem:
            return None, f"the base URL of rerank provider {provider} {problem}"
        return RerankTarget(provider, endpoint.base_url, model, endpoint.api_key), f"provider {provider}, model {model}"

    def rerank_status(self, settings: MemorySettings) -> dict[str, Any]:
        target, reason = self.rerank_target(settings)
        parsed = split_provider_model(settings.rerank_provider_model)
        return {
            "enabled": settings.rerank_enabled,
            "provider": parsed[0] if parsed else None,
            "model": parsed[1] if parsed else None,
            "available": target is not None,
            "reason": reason,
        }

    def rerank(
        self, settings: MemorySettings, query: str, documents: Sequence[str], top_n: int | None = None
    ) -> list[tuple[int, float]]:
        """Rerank with the configured target; RerankError when there is none or it fails."""
        target, reason = self.rerank_target(settings)
        if target is None:
            raise RerankError(f"rerank unavailable: {reason}")
        with self._lock:
            if self._rerank_client is None:
                self._rerank_client = RerankClient(self.config.rerank_timeout_s)
            client = self._rerank_client
        try:
            return client.rerank(target.base_url, target.api_key, target.model, query, documents, top_n)
        except RerankError:
            raise
        except Exception as exc:  # noqa: BLE001 - a remote dependency: the engine fails open on RerankError
            log.warning("embedding.rerank.unexpected_error", extra={"error": type(exc).__name__})
            raise RerankError(f"rerank failed ({type(exc).__name__})") from None


def _embed_misses(source: EmbeddingSource, texts: list[str]) -> np.ndarray:
    """`source.embed`, with any failure as an EmbeddingError: every caller (a write marks
    its rows for reindexing, a search falls back to keywords) handles that one class, and
    no failure of a source may fail a write or a retrieval. The message names the class
    only (an unexpected exception's text may carry an endpoint or a key)."""
    try:
        return source.embed(texts)
    except EmbeddingError:
        raise
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("embedding.unexpected_error", extra={"source": source.name, "error": type(exc).__name__})
        raise EmbeddingError(f"the {source.name} source failed ({type(exc).__name__})") from None


def _loading_note(source: EmbeddingSource) -> str:
    """What a loading model is doing, for the fallback reason: " (phase, 45%)" or ""."""
    load = source.load_state
    if load.state != "loading" or not load.phase:
        return ""
    return f" ({load.phase}{f', {load.progress:.0%}' if load.progress is not None else ''})"


def _join(first: str | None, second: str) -> str:
    return f"{first}; {second}" if first else second
