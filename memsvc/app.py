"""Assembles the core over its storage (memsvc.storage.stores decides which store serves).

The gRPC server (server.py) and offline commands (cli.py `migrate`) both open an App, so
the wiring is written once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from memsvc.backends import create_backend
from memsvc.characters.per_node import PerNodeCharacters
from memsvc.characters.service import Characters
from memsvc.config import Config, ConfigError
from memsvc.core.backend_manager import BackendManager, RoutedEvents
from memsvc.core.background import BackgroundWriter, Ticker
from memsvc.core.change_feed import ChangeFeed
from memsvc.core.credentials import Credentials
from memsvc.core.duplicates import Duplicates
from memsvc.core.embedding_port import Embeddings as EmbeddingsPort
from memsvc.core.engine import Engine
from memsvc.core.expiry import ExpirySweep
from memsvc.core.extraction import facts as extraction
from memsvc.core.introspection import Introspection
from memsvc.core.leases import LeaseTiming
from memsvc.core.memories import Memories
from memsvc.core.reindex import Reindexer
from memsvc.core.retrieval.ranking import FUSIONS, Retriever
from memsvc.core.retrieval.vector_tier import QdrantConnector, SettingsReranker, VectorTier
from memsvc.core.settings.memory import Settings
from memsvc.core.settings.qdrant import QdrantSettingsManager, local_mode_across_hosts
from memsvc.embedding.resolver import EmbeddingConfig, Embeddings
from memsvc.embedding.sources import StaticSource
from memsvc.kernel.embedding_errors import EmbeddingError
from memsvc.metrics import Metrics, StateSources
from memsvc.storage.character_store import CharacterStore
from memsvc.storage.database import Database
from memsvc.storage.memory_store import SqlMemoryBackend
from memsvc.storage.reflection_store import ReflectionStore
from memsvc.storage.stores import Stores, open_stores

log = logging.getLogger("memsvc.app")


@dataclass
class App:
    config: Config
    #: `Database` (SQLite) or `PgDatabase`, as configured; the same for `backend`.
    database: Database
    backend: SqlMemoryBackend
    memories: Memories
    settings: Settings
    engine: Engine
    background: BackgroundWriter
    characters: Characters | PerNodeCharacters
    vectors: VectorTier
    qdrant_settings: QdrantSettingsManager
    introspection: Introspection
    reindexer: Reindexer
    metrics: Metrics
    credentials: Credentials
    backends: BackendManager
    stores: Stores
    #: WatchMemories' engine over the built-in store's history.
    feed: ChangeFeed
    #: Removes expired memories every MEMSVC_EXPIRY_SWEEP_S, once the server serves (`warm`).
    expiry: Ticker

    @classmethod
    def open(cls, config: Config) -> App:
        """Open the configured store (SQLite under the data dir, or the PostgreSQL of
        MEMSVC_DATABASE_URL) and apply its migrations (refusing a schema newer than the code)."""
        stores = open_stores(config)
        database, backend, store = stores.database, stores.backend, stores.settings_store
        settings = Settings(store)
        background = BackgroundWriter()
        vectors, qdrant_settings = cls._vector_tier(config, stores, settings, background)
        backends = BackendManager(
            backend,
            settings,
            create_backend,
            health_interval_s=config.backend_health_s,
            retry_s=config.backend_retry_s,
            local_kind=stores.info.backend_name,
        )
        backends.initialize()
        events = RoutedEvents(vectors, backends)
        memories = Memories(
            backends,
            events=events,
            changes=database.data_version,
            history=backend,
            keeps_history=backends.primary_is_local,
            duplicates=Duplicates(settings, vectors, backend, backends.primary_is_local),
        )
        retriever = Retriever(
            backend,
            vectors=vectors,
            reranker=SettingsReranker(vectors.embeddings, settings),
            rrf_k=config.rrf_k,
            top_k=config.vec_top_k,
            fusion=FUSIONS[config.fusion],
            backend_name=stores.info.backend_name,
        )
        characters = (
            PerNodeCharacters()
            if config.shared_store
            else Characters(config, CharacterStore(database), ReflectionStore(database), memories)
        )
        characters.start()
        reindexer = Reindexer(
            vectors,
            settings,
            backend.page_by_memory_id,
            backend.mark_all_for_reindex,
            leases=stores.lease_store,
            timing=LeaseTiming(ttl_s=config.lease_ttl_s),
        )
        working_sets = getattr(backend, "working_sets", None)
        metrics = Metrics(
            StateSources(
                db_path=stores.info.db_path,
                embedding_cache=_built(vectors.embeddings).cache.stats,
                reindex=lambda: _reindex_gauges(reindexer),
                working_sets=working_sets.status if working_sets is not None else None,
            )
        )
        engine = Engine(
            backend,
            settings,
            background,
            retriever,
            events=events,
            on_retrieval=lambda r: metrics.observe_retrieval(r.strategy_used, bool(r.fallback_reason)),
            access_delay_s=config.access_flush_s,
            writer=backends,
            backend_retrieval=backends.retrieve,
            past=backend,
            embeddings=vectors.embeddings,
            keeps_history=backends.primary_is_local,
        )
        return cls(
            config=config,
            database=database,
            backend=backend,
            memories=memories,
            settings=settings,
            engine=engine,
            background=background,
            characters=characters,
            vectors=vectors,
            qdrant_settings=qdrant_settings,
            introspection=Introspection(
                backend.keyword_probe,
                vectors,
                settings,
                qdrant_settings,
                retrieval=retriever.status,
                backends=backends.check_all,
                reindex=reindexer.status,
                keyword_backend=stores.info.keyword_name,
                working_sets=working_sets.status if working_sets is not None else None,
            ),
            reindexer=reindexer,
            metrics=metrics,
            credentials=Credentials(stores.credential_store),
            backends=backends,
            stores=stores,
            feed=ChangeFeed(
                backend,
                keeps_history=backends.primary_is_local,
                poll_s=config.watch_poll_s,
                heartbeat_s=config.watch_heartbeat_s,
            ),
            expiry=Ticker("memsvc-expiry-sweep", config.expiry_sweep_s, ExpirySweep(backend).sweep),
        )

    @staticmethod
    def _vector_tier(
        config: Config, stores: Stores, settings: Settings, background: BackgroundWriter
    ) -> tuple[VectorTier, QdrantSettingsManager]:
        """Tier-1 vector rows (sqlite-vec or pgvector) are deleted in the transaction that
        deletes their memories; Qdrant points are removed after it, in the background."""
        embeddings = Embeddings(EmbeddingConfig.from_config(config))
        index, backend = stores.vector_index, stores.backend
        qdrant_settings = QdrantSettingsManager(stores.settings_store, config.data_dir)
        if config.shared_store:
            qdrant_settings.shared_across_hosts()
            if qdrant_settings.get().enabled and qdrant_settings.get().local_path is not None:
                stores.close()
                raise ConfigError(local_mode_across_hosts("the stored Qdrant settings enable local mode"))
        connector = QdrantConnector(qdrant_settings, str(config.data_dir), _qdrant_index)
        vectors = VectorTier(embeddings, index, connector, settings, backend, background, top_k=config.vec_top_k)
        backend.add_delete_hook(
            lambda conn, rows: index.delete_in_transaction(conn, [memory_id for _, memory_id in rows])
        )
        backend.add_delete_hook(lambda conn, rows: vectors.removed([memory_id for memory_id, _ in rows]))
        return vectors, qdrant_settings

    def load_model(self) -> None:
        """Load the embedding model the stored settings select before the server reports
        ready: requests never wait for a model (they fall back to keywords while it loads),
        so a server that served first answered its first Retrieves, on every worker, with
        keywords only. A default static model that still has to be distilled is left to its
        first use (minutes; the set-up builds it), and a model that cannot load leaves the
        server serving keyword search, as it would on first use."""
        resolved = self.vectors.embeddings.resolve(self.settings.get())
        source = resolved.source
        if source is None or source.loaded or (isinstance(source, StaticSource) and not source.built):
            return
        try:
            source.warm()
        except EmbeddingError as exc:
            log.warning("embedding.load_failed", extra={"source": source.name, "error": str(exc)})

    def warm(self) -> None:
        """What is cheaper to prepare once the server serves than before it does: the
        extraction rules (about a second to compile), so starting stays fast and the first
        Extract does not wait for them; and the chores of a serving process (the expiry
        sweep), which offline commands opening an App never start."""
        extraction.warm()
        self.expiry.start()

    def close(self) -> None:
        """Finish acknowledged background writes (appended messages flushed to their files
        included), then close the database."""
        self.metrics.close()
        self.expiry.stop()
        self.characters.close()
        self.backends.shutdown()
        self.engine.access.flush()
        self.background.drain()
        self.vectors.qdrant.close()
        self.backend.shutdown()


def _reindex_gauges(reindexer: Reindexer) -> dict[str, float]:
    """The database's reindex as its lease row says, whichever process runs it: with several
    server processes every one reports the same job (its own last job would leave the
    others' gauges empty, or stale)."""
    status = reindexer.status()
    p = status.progress
    if p is None:
        return {"running": 1.0} if status.running else {}
    return {
        "pending": p.pending,
        "processed": p.processed,
        "errors": p.errors,
        "rate_per_second": p.rate_per_second,
        "running": 1.0 if status.running else 0.0,
    }


def _qdrant_index(settings, data_dir: str):
    """Imported only when Qdrant is enabled: qdrant-client alone costs about a second of
    start-up (health must answer SERVING within 2 s)."""
    from memsvc.vectors.qdrant import QdrantIndex

    return QdrantIndex.from_settings(settings, data_dir)


def _built(embeddings: EmbeddingsPort) -> Embeddings:
    """The embedding service App._vectors built: the core sees it through its port, the
    process metrics read its cache."""
    assert isinstance(embeddings, Embeddings)
    return embeddings
