"""Exporting spans: the OpenTelemetry SDK's pipeline (tracer provider, sampler, batch
processor, OTLP/HTTP exporter) built from the configuration's OTEL_* options, only when an
endpoint turns tracing on. Off, nothing of the SDK is imported and no exporter exists.

Each server gets its own provider (`start`), so servers started one after another in one
process (the tests) export where each one's configuration says; `make_global` also hands the
provider to the libraries in the process that trace through opentelemetry-api's global one
(the MCP SDK's spans), which `memsvc serve` does for its process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memsvc.config import Config
from memsvc.kernel import tracing

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import Sampler
    from opentelemetry.trace import Tracer

log = logging.getLogger("memsvc.tracing")

INSTRUMENTATION = "memsvc"


@dataclass
class Tracing:
    """The pipeline of one server: started with it, flushed and shut down with it."""

    provider: TracerProvider
    tracer: Tracer
    url: str

    def make_global(self) -> None:
        """The process's global tracer provider (once per process: later calls keep the first)."""
        from opentelemetry import trace

        trace.set_tracer_provider(self.provider)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Export what is still queued (within `timeout_s`) and stop; spans end nowhere after."""
        if tracing.current() is self.tracer:
            tracing.use(None)
        self.provider.force_flush(int(timeout_s * 1000))
        self.provider.shutdown()


def sampler(config: Config) -> Sampler:
    """OTEL_TRACES_SAMPLER (and _ARG) as the SDK's sampler."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, TraceIdRatioBased

    name = config.otel_traces_sampler
    root = {"always_on": ALWAYS_ON, "always_off": ALWAYS_OFF}.get(name.removeprefix("parentbased_"))
    chosen = root if root is not None else TraceIdRatioBased(config.traces_ratio)
    return ParentBased(chosen) if name.startswith("parentbased_") else chosen


def start(config: Config) -> Tracing | None:
    """The pipeline `config` asks for, its tracer in use by memsvc.kernel.tracing; None (and
    tracing off) when no endpoint is set."""
    url = config.traces_url
    if url is None:
        tracing.use(None)
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # Resource.create also reads OTEL_RESOURCE_ATTRIBUTES, as the SDK documents it.
    resource = Resource.create({SERVICE_NAME: config.otel_service_name})
    provider = TracerProvider(resource=resource, sampler=sampler(config), shutdown_on_exit=False)
    exporter = OTLPSpanExporter(endpoint=url, headers=dict(config.traces_headers))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer(INSTRUMENTATION)
    tracing.use(tracer)
    log.info("tracing.started", extra={"endpoint": _shown(url), "sampler": config.otel_traces_sampler})
    return Tracing(provider, tracer, url)


def _shown(url: str) -> str:
    """The URL without user info or query (either may carry a key)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
