"""Envoy configuration for the REST gateway, built as data and dumped with PyYAML.

The transcoder serves the documented REST paths from the same descriptor set the gRPC
server was generated from, so there is one contract and no hand-written HTTP handler.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from memsvc import studio
from memsvc.api.oauth import PRM_PATH, OAuthSettings, challenge, protected_resource_metadata
from memsvc.gateway import openapi, request_guard
from memsvc.kernel.web_access import web_access

SERVICES = (
    "memsvc.v1.MemoryService",
    "memsvc.v1.EngineService",
    "memsvc.v1.SettingsService",
    "memsvc.v1.CredentialService",
)
CLUSTER = "memsvc_grpc"
# Large enough for a full recent-history save (2,097,152 characters of chat, up to 4 bytes
# each in UTF-8, plus JSON framing); the gRPC server's message limit matches it.
MAX_REQUEST_BYTES = 16 * 1024 * 1024
# A memsvc replica's gRPC address: (host, port).
Replica = tuple[str, int]


@dataclass(frozen=True)
class EnvoySettings:
    """Where Envoy listens and where it finds the gRPC server and the descriptor set."""

    descriptor_path: str
    listen_host: str = "127.0.0.1"
    listen_port: int = 8080
    upstream_host: str = "127.0.0.1"
    upstream_port: int = 50051
    # The loopback port of the MCP streamable-HTTP server `memsvc serve` runs beside gRPC;
    # Envoy serves it at /mcp. -1 (or 0, a port not known in advance): no /mcp route.
    mcp_port: int = 50052
    # Envoy's admin interface can stop Envoy (POST /quitquitquit) and has no authentication,
    # so by default it listens only on a unix socket that only memsvc's user may open; a TCP
    # port (loopback, reachable by every local user) is there only when asked for.
    admin_socket: str = "data/envoy-admin.sock"
    admin_port: int = -1
    admin_host: str = "127.0.0.1"
    health_path: str = "/healthz"
    max_request_bytes: int = MAX_REQUEST_BYTES
    max_connections: int = 10_000
    # Where Envoy reads the studio's static files: relative to the repository root in
    # deploy/envoy.yaml (like the descriptor set), the installed package folder at run time.
    studio_dir: str = "memsvc/studio"
    # Several memsvc replicas sharing one store, any of which may answer any request: one
    # cluster balanced round robin over those that pass their health check. Empty: the one
    # upstream_host:upstream_port.
    replicas: tuple[Replica, ...] = ()
    # The operator's extra Host names and Origins (MEMSVC_ALLOWED_HOSTS / _ORIGINS): the
    # request guard's rule is memsvc.kernel.web_access.web_access of these and listen_host.
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    # Envoy's own span of each request (OpenTelemetry, exported over OTLP/HTTP to this URL,
    # in the trace the request's traceparent names or a new one, whose context it passes to
    # memsvc): None, the committed file's value, traces nothing.
    traces_url: str | None = None
    # Sent with every export (a collector's key): kept out of the repr.
    traces_headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    traces_service_name: str = "memsvc-envoy"
    # The share of requests without a sampled parent that Envoy traces, in percent.
    traces_sampling_percent: float = 100.0
    # The CA bundle an https collector's certificate is checked against.
    traces_ca_file: str | None = None
    # Whether the operator lets traces hold query texts (MEMSVC_TRACE_CONTENT): else the
    # query string is left out of Envoy's span.
    traces_content: bool = False
    # OAuth (MEMSVC_OAUTH_ISSUER / _AUDIENCE): Envoy serves the RFC 9728 metadata and adds
    # the WWW-Authenticate challenge to every 401. None, the committed file's value: neither.
    oauth_issuer: str | None = None
    oauth_audience: str | None = None

    @classmethod
    def committed(cls, descriptor_path: str, replicas: tuple[Replica, ...] = ()) -> EnvoySettings:
        """The defaults that deploy/envoy.yaml (and, with replicas, the example of several)
        is generated with (run from the repo root)."""
        return cls(descriptor_path=descriptor_path, replicas=replicas)

    def upstreams(self) -> tuple[Replica, ...]:
        """Every gRPC address Envoy balances over (the replicas, else the one upstream)."""
        return self.replicas or ((self.upstream_host, self.upstream_port),)

    def upstream_names(self) -> list[str]:
        """The upstreams as `host:port` (an IPv6 host in brackets), for logs: what this Envoy
        really fronts, whether one server or several replicas."""
        return [f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in self.upstreams()]

    @property
    def several(self) -> bool:
        return len(self.upstreams()) > 1


def parse_replica(text: str) -> Replica:
    """`host:port` (an IPv6 address in brackets, `[::1]:50051`) as a Replica; ValueError
    saying what is wrong otherwise, so a typo is refused before Envoy is started."""
    host, sep, port = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or any(c in host for c in " /[]") or (":" in host and not text.strip().startswith("[")):
        raise ValueError(f"replica {text!r} is not host:port (an IPv6 address in brackets: [::1]:50051)")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"replica {text!r}: the port must be a number from 1 to 65535")
    return host, int(port)


def _typed(type_name: str, **fields: Any) -> dict[str, Any]:
    return {"@type": f"type.googleapis.com/{type_name}", **fields}


def _address(host: str, port: int) -> dict[str, Any]:
    return {"socket_address": {"address": host, "port_value": port}}


def _transcoder(s: EnvoySettings) -> dict[str, Any]:
    return {
        "name": "envoy.filters.http.grpc_json_transcoder",
        "typed_config": _typed(
            "envoy.extensions.filters.http.grpc_json_transcoder.v3.GrpcJsonTranscoder",
            proto_descriptor=s.descriptor_path,
            services=list(SERVICES),
            print_options={
                "add_whitespace": False,
                "always_print_primitive_fields": True,
                "always_print_enums_as_ints": False,
                "preserve_proto_field_names": False,
            },
            convert_grpc_status=True,
            request_validation_options={
                "reject_unknown_method": True,
                "reject_unknown_query_parameters": True,
            },
            max_request_body_size=s.max_request_bytes,
        ),
    }


def _access_log() -> list[dict[str, Any]]:
    """One JSON object per request on stdout, like the server's own logs."""
    fields = {
        "ts": "%START_TIME%",
        "request_id": "%REQ(X-REQUEST-ID)%",
        # The transcoder rewrites :method and :path to the gRPC call; these are what the
        # client sent.
        "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
        "status": "%RESPONSE_CODE%",
        "duration_ms": "%DURATION%",
    }
    return [
        {
            "name": "envoy.access_loggers.stdout",
            "typed_config": _typed(
                "envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
                log_format={"json_format": fields},
            ),
        }
    ]


# Replies Envoy makes itself (unknown path or query parameter, unparsable JSON, upstream
# down) get the same {"code", "message"} body as errors from memsvc; code is the gRPC code
# that the HTTP status corresponds to.
_LOCAL_REPLY_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 413: 8, 429: 8, 431: 8, 503: 14, 504: 4}
# All request headers together, the URL included (Envoy answers 431 above it). memsvc's gRPC
# server accepts more metadata than this can become (the URL is forwarded once more, as
# x-envoy-original-path, plus gRPC's per-entry overhead), so no header size reaches it as a
# RESOURCE_EXHAUSTED.
MAX_REQUEST_HEADERS_KB = 32


def _guard_replies() -> list[dict[str, Any]]:
    """The request guard's refusals already carry the JSON error body (with the field
    violation): they pass through unchanged."""
    return [{"filter": {"header_filter": {"header": {"name": request_guard.GUARD_HEADER, "present_match": True}}}}]


# A header name with a character gRPC metadata keys may not hold, and not a pseudo-header
# (RE2, matched against the whole lower-cased name).
_NOT_METADATA_KEY = r"[^:].*[^a-z0-9._-].*|[^:a-z0-9._-].*"


def _strip_grpc_headers() -> dict[str, Any]:
    """Drops client headers that gRPC would read as its own: names ending in `-bin` (binary
    metadata, base64 on the wire), names starting with `grpc-` (grpc-timeout,
    grpc-encoding, ...) and `te` (gRPC's own `te: trailers`, which the transcoder sets).

    A `te` with any other value (on a request Envoy passes through as gRPC) is worse than one
    failed call: measured, later requests from anyone on the HTTP/2 connection Envoy shares
    with memsvc then fail with INTERNAL ("Error parsing 'te' metadata") until it reconnects.

    The gRPC server's HTTP/2 layer fails the whole call with INTERNAL (a 500, before
    authentication) on such a header whose value it cannot parse. A REST client has no gRPC
    metadata to pass and memsvc reads none, so they are removed at the edge, before the
    transcoder adds the gRPC headers of its own; their names cannot be listed in advance,
    hence a suffix and a prefix match rather than the route's exact-name header removal.
    A gRPC or gRPC-Web client on this port loses them too; its `te: trailers` is set again
    by every route to memsvc (`_GRPC_TE`), after this filter.

    A name gRPC metadata cannot carry at all (a character outside `a-z 0-9 . _ -`, such as
    `~`, `|` or `%`, legal in HTTP) fails the call the same way ("Illegal header key"), so such
    a name goes too; pseudo-headers (`:path`, ...) are Envoy's own and stay.
    """
    matchers = (
        {"suffix": "-bin"},
        {"prefix": "grpc-"},
        {"exact": "te"},
        {"safe_regex": {"regex": _NOT_METADATA_KEY}},
    )
    return {
        "name": "envoy.filters.http.header_mutation",
        "typed_config": _typed(
            "envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
            mutations={"request_mutations": [{"remove_on_match": {"key_matcher": m}} for m in matchers]},
        ),
    }


# gRPC's `te: trailers`, set by the router on every request to memsvc (after the filters):
# the transcoder sets it on a REST request, but a gRPC or gRPC-Web client's own `te` is one of
# the headers `_strip_grpc_headers` removes, and without it memsvc refuses every call.
_GRPC_TE = {"header": {"key": "te", "value": "trailers"}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}


GRPC_WEB_FILTER = "envoy.filters.http.grpc_web"


def _grpc_web() -> dict[str, Any]:
    """gRPC-Web (a browser's gRPC: application/grpc-web[-text][+proto]) becomes gRPC, and the
        answer gRPC-Web again; off on every route but those of gRPC paths (`_upstream_routes`,
    `_NOT_REST`: it has no per-route config, so it can only be turned off). After the
        request guard, which sees what the browser sent (its Host and Origin), before the
        transcoder, which passes gRPC through untouched."""
    return {"name": GRPC_WEB_FILTER, "typed_config": _typed("envoy.extensions.filters.http.grpc_web.v3.GrpcWeb")}


def _health_replies(s: EnvoySettings) -> list[dict[str, Any]]:
    """The probe's answer is the serving status alone: nothing about tenants or versions."""
    path = {"header_filter": {"header": {"name": ":path", "string_match": {"exact": s.health_path}}}}
    return [
        {
            "filter": {
                "and_filter": {
                    "filters": [
                        path,
                        {
                            "status_code_filter": {
                                "comparison": {
                                    "op": "EQ",
                                    "value": {"default_value": status, "runtime_key": f"memsvc.health_reply.{status}"},
                                }
                            }
                        },
                    ]
                }
            },
            "body_format_override": {"json_format": {"status": text}},
        }
        for status, text in ((200, "SERVING"), (503, "NOT_SERVING"))
    ]


def _local_replies(s: EnvoySettings) -> dict[str, Any]:
    return {
        "mappers": _health_replies(s)
        + _guard_replies()
        + [
            {
                "filter": {
                    "status_code_filter": {
                        "comparison": {
                            "op": "EQ",
                            "value": {"default_value": status, "runtime_key": f"memsvc.local_reply.{status}"},
                        }
                    }
                },
                "body_format_override": {"json_format": {"code": code, "message": "%LOCAL_REPLY_BODY%"}},
            }
            for status, code in _LOCAL_REPLY_CODES.items()
        ],
    }


def min_healthy_percent(replicas: int) -> float:
    """The share of replicas that must pass their health check for the probe to say SERVING:
    one replica's share, rounded down to a hundredth (33.33 of three), so one healthy replica
    is enough and none is not. Envoy compares 100 × healthy with replicas × this value, so
    rounding down keeps one replica above it whatever the floating-point error.

    Not more than one: with several replicas Envoy sends requests only to healthy ones, so
    the gateway answers as long as any replica does; a probe that failed on the first lost
    replica would make the load balancer in front drop a gateway that still serves. Lost
    capacity is for alerting (Envoy's membership_healthy statistic), not for this probe.
    One upstream: 100, it must be healthy."""
    if replicas == 1:
        return 100
    return math.floor(10_000 / replicas) / 100


def _health_probe(s: EnvoySettings) -> dict[str, Any]:
    """`GET <health_path>` answered by Envoy itself, without a token: 200 while its active
    gRPC health check of memsvc (the standard grpc.health.v1 service, overall status) passes,
    503 once it fails (memsvc draining, down or unreachable); with several replicas, 200 while
    at least one of them passes (`min_healthy_percent`). Other paths pass through."""
    return {
        "name": "envoy.filters.http.health_check",
        "typed_config": _typed(
            "envoy.extensions.filters.http.health_check.v3.HealthCheck",
            pass_through_mode=False,
            headers=[
                {"name": ":path", "string_match": {"exact": s.health_path}},
                {"name": ":method", "string_match": {"safe_regex": {"regex": "GET|HEAD"}}},
            ],
            cluster_min_healthy_percentages={CLUSTER: {"value": min_healthy_percent(len(s.upstreams()))}},
        ),
    }


def _health_checks() -> list[dict[str, Any]]:
    """Envoy asks memsvc's grpc.health.v1 service every second, with or without traffic (the
    default would be once a minute when idle), so the probe lags memsvc by about a second;
    two failures in a row mark it down, one success up again."""
    return [
        {
            "timeout": "2s",
            "interval": "1s",
            "no_traffic_interval": "1s",
            "unhealthy_threshold": 2,
            "healthy_threshold": 1,
            "grpc_health_check": {},
        }
    ]


# The retry triggers that mean the request never reached a replica's handler: the connection
# could not be made, the replica refused the HTTP/2 stream (REFUSED_STREAM: not processed,
# such as past a draining server's GOAWAY), or the connection was reset before the request
# was sent. Anything later (a reset after the request went out, UNAVAILABLE, a 5xx) may come
# from a replica that already committed a CreateMemory or an upsert, so a write is not
# retried on it. Not even a CreateMemory with a key: the upsert would apply twice, and a
# second attempt answers `created: false` for the row the first one created, or overwrites
# what another client wrote to that key in between.
RETRY_ON = ("connect-failure", "refused-stream", "reset-before-request")
# A read is retried on any reset as well, however late (a replica killed while it answered):
# it changes nothing but its memories' access counts, which a retried read may count twice.
READ_RETRY_ON = (*RETRY_ON, "reset")


def read_methods() -> tuple[str, ...]:
    """The gRPC paths of the read-only calls: those the access rule table (memsvc.api.access)
    lets a read-only credential, or anyone, make. Derived, not listed, so a new RPC is a
    read here exactly when it is one for authorization."""
    from memsvc.api.access import ANYONE, RULES
    from memsvc.core.credentials import READ

    return tuple(sorted(path for path, rule in RULES.items() if rule.permission in (READ, ANYONE)))


def _retry_policy(replicas: int, retry_on: tuple[str, ...]) -> dict[str, Any]:
    """Each other replica tried once, never the one that just failed."""
    return {
        "retry_on": ",".join(retry_on),
        "num_retries": replicas - 1,
        "retry_host_predicate": [
            {
                "name": "envoy.retry_host_predicates.previous_hosts",
                "typed_config": _typed("envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"),
            }
        ],
        "host_selection_retry_max_attempts": 5,
    }


def _upstream_routes(s: EnvoySettings) -> list[dict[str, Any]]:
    """Everything else to memsvc. timeout 0s: the Reindex stream may run for minutes; idle
    streams are still cut by stream_idle_timeout. With several replicas, a request that
    could not reach one is retried on another (`RETRY_ON`), a read also when it was cut off
    (`READ_RETRY_ON`). Routes match the gRPC path: the transcoder rewrites a REST request's
    path to its RPC and clears the route cache, so a REST read and a gRPC one route alike.

    The routes of gRPC paths (`GRPC_PREFIXES`) come first, with gRPC-Web on; the last one
    takes the rest, REST paths above all, with gRPC-Web off: a REST request that claims to be
    gRPC-Web is a REST request (the guard and the transcoder answer it), never a gRPC call."""
    route: dict[str, Any] = {"cluster": CLUSTER, "timeout": "0s"}
    routes = []
    if s.several:
        replicas = len(s.upstreams())
        # One exact route per read: a single regular expression of them all exceeds the
        # program size Envoy allows an RE2 matcher.
        routes += [
            _to_memsvc({"path": path}, {**route, "retry_policy": _retry_policy(replicas, READ_RETRY_ON)})
            for path in read_methods()
        ]
        route = {**route, "retry_policy": _retry_policy(replicas, RETRY_ON)}
    routes += [_to_memsvc({"prefix": prefix}, route) for prefix in GRPC_PREFIXES]
    not_post = [_grpc_not_post(prefix) for prefix in GRPC_PREFIXES]
    return not_post + routes + [_to_memsvc({"prefix": "/"}, route, grpc_web=False)]


def _grpc_not_post(prefix: str) -> dict[str, Any]:
    """A request on a gRPC path with a gRPC or gRPC-Web content type that is not a POST is
    answered here, UNIMPLEMENTED (Envoy's gRPC status for a 404) naming the rule: memsvc's
    gRPC server would fail it with INTERNAL, or reset it (a 503). REST paths are the
    transcoder's, whatever the content type claims."""
    return {
        "match": {
            "prefix": prefix,
            "headers": [
                {"name": "content-type", "string_match": {"prefix": "application/grpc"}},
                {"name": ":method", "string_match": {"exact": "POST"}, "invert_match": True},
            ],
        },
        "direct_response": {"status": 404, "body": {"inline_string": "a gRPC call is a POST request"}},
    }


# The paths of gRPC calls (/<service>/<method>): memsvc's services, health and reflection.
GRPC_PREFIXES = (*(f"/{name}/" for name in SERVICES), "/grpc.health.v1.Health/", "/grpc.reflection.")


def _to_memsvc(match: dict[str, Any], action: dict[str, Any], grpc_web: bool = True) -> dict[str, Any]:
    """A route to memsvc's gRPC server, which always carries gRPC's `te` (`_GRPC_TE`); the
    gRPC-Web filter off on it unless `grpc_web`."""
    route = {"match": match, "route": action, "request_headers_to_add": [_GRPC_TE]}
    if not grpc_web:
        route["typed_per_filter_config"] = {
            GRPC_WEB_FILTER: _typed("envoy.config.route.v3.FilterConfig", disabled=True)
        }
    return route


TRACES_CLUSTER = "otel_collector"
TRACER = "envoy.tracers.opentelemetry"
# How often Envoy exports the spans it holds (its default: every 5 s, or at 5 spans).
TRACES_FLUSH_MS = 1000


def _tracing(s: EnvoySettings) -> dict[str, Any]:
    """The connection manager's tracing: one span per request, continuing the request's W3C
    traceparent when it has one (the caller's trace), its context sent on to memsvc."""
    assert s.traces_url is not None
    http_service: dict[str, Any] = {"http_uri": {"uri": s.traces_url, "cluster": TRACES_CLUSTER, "timeout": "5s"}}
    if s.traces_headers:
        http_service["request_headers_to_add"] = [
            {"header": {"key": name, "value": value}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
            for name, value in s.traces_headers
        ]
    return {
        "random_sampling": {"value": s.traces_sampling_percent},
        "provider": {
            "name": TRACER,
            "typed_config": _typed(
                "envoy.config.trace.v3.OpenTelemetryConfig",
                service_name=s.traces_service_name,
                http_service=http_service,
            ),
        },
    }


def _traces_cluster(s: EnvoySettings) -> list[dict[str, Any]]:
    """The collector Envoy exports its spans to; over TLS (the system's trust, the name
    checked) for an https URL."""
    if s.traces_url is None:
        return []
    url = urlsplit(s.traces_url)
    host = url.hostname or "127.0.0.1"
    tls = url.scheme == "https"
    cluster: dict[str, Any] = {
        "name": TRACES_CLUSTER,
        "type": "STRICT_DNS",
        "connect_timeout": "2s",
        "load_assignment": {
            "cluster_name": TRACES_CLUSTER,
            "endpoints": [
                {"lb_endpoints": [{"endpoint": {"address": _address(host, url.port or (443 if tls else 80))}}]}
            ],
        },
    }
    if tls:
        validation: dict[str, Any] = {
            "match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": host}}],
        }
        if s.traces_ca_file:
            validation["trusted_ca"] = {"filename": s.traces_ca_file}
        cluster["transport_socket"] = {
            "name": "envoy.transport_sockets.tls",
            "typed_config": _typed(
                "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                sni=host,
                common_tls_context={"validation_context": validation},
            ),
        }
    return [cluster]


def _traced_path(s: EnvoySettings) -> list[dict[str, Any]]:
    """The REST path as Envoy's span records it (its http.url), without the query string:
    a query parameter can be what a caller searches for (ListMemories' `q`), which a trace
    holds only when the operator opts in (MEMSVC_TRACE_CONTENT). The transcoder has read the
    query by then; memsvc reads only the path of x-envoy-original-path."""
    if s.traces_url is None or s.traces_content:
        return []
    return [
        {
            "name": "memsvc.traced_path",
            "typed_config": _typed(
                "envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
                mutations={
                    "request_mutations": [
                        {
                            "append": {
                                "header": {"key": "x-envoy-original-path", "value": "%PATH(NQ:ORIG)%"},
                                "append_action": "OVERWRITE_IF_EXISTS",
                            }
                        }
                    ]
                },
            ),
        }
    ]


def _listener(s: EnvoySettings) -> dict[str, Any]:
    document = openapi.render_file(s.descriptor_path, SERVICES)
    manager = _typed(
        "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        stat_prefix="rest",
        codec_type="AUTO",
        generate_request_id=True,
        access_log=_access_log(),
        **({"tracing": _tracing(s)} if s.traces_url is not None else {}),
        route_config={
            "name": "memsvc",
            "virtual_hosts": [
                {
                    "name": "memsvc",
                    "domains": ["*"],
                    "routes": _mcp_routes(s)
                    + _oauth_routes(s)
                    + _studio_routes(s)
                    + _openapi_routes(document)
                    + _upstream_routes(s),
                }
            ],
            "max_direct_response_body_size_bytes": max(STUDIO_MAX_FILE_BYTES, len(document.encode())),
        },
        stream_idle_timeout="300s",
        max_request_headers_kb=MAX_REQUEST_HEADERS_KB,
        local_reply_config=_local_replies(s),
        http_filters=[
            _health_probe(s),
            *_oauth_challenge(s),
            _strip_grpc_headers(),
            request_guard.buffer_filter(s.max_request_bytes),
            request_guard.lua_filter(SERVICES, web_access(s.listen_host, s.allowed_hosts, s.allowed_origins)),
            _grpc_web(),
            _transcoder(s),
            *_traced_path(s),
            {
                "name": "envoy.filters.http.router",
                "typed_config": _typed("envoy.extensions.filters.http.router.v3.Router"),
            },
        ],
    )
    return {
        "name": "rest",
        "address": _address(s.listen_host, s.listen_port),
        # Without this a second Envoy (say, one left over from a killed server) could share
        # the port and answer half the connections.
        "enable_reuse_port": False,
        "filter_chains": [
            {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": manager}]}
        ],
    }


# Requests in flight to the replicas together (Envoy's default, written out because the
# retry limit is tied to it).
MAX_UPSTREAM_REQUESTS = 1024


def _replica_balancing() -> dict[str, Any]:
    """What several replicas add to the cluster.

    No panic routing (Envoy's default sends to every replica, dead ones included, once fewer
    than half pass their health check): requests go only to healthy replicas, however few,
    and with none Envoy answers 503 (UNAVAILABLE) at once.

    Outlier detection takes a replica out for a while when it keeps failing requests while
    its health check still passes (three 502/503/504 or connection failures in a row, or
    five 5xx; a gRPC status counts as its HTTP equivalent). At most half the replicas are
    ever taken out this way: when all fail alike (their shared database is down) taking them
    out would not help. A replica that is down for good is removed by its health check."""
    return {
        "common_lb_config": {"healthy_panic_threshold": {"value": 0}},
        # Envoy allows 3 retries in flight per cluster by default: a killed replica fails
        # every request sent its way at once, and past the third the rest were answered 503
        # unretried (measured: 644 of 976). As many retries in flight as the requests Envoy
        # lets in flight (its default max_requests) never refuses one a retry: each request
        # retries one attempt at a time, at most once per other replica.
        "circuit_breakers": {
            "thresholds": [
                {"priority": "DEFAULT", "max_requests": MAX_UPSTREAM_REQUESTS, "max_retries": MAX_UPSTREAM_REQUESTS}
            ]
        },
        "outlier_detection": {
            "consecutive_5xx": 5,
            "consecutive_gateway_failure": 3,
            "enforcing_consecutive_gateway_failure": 100,
            "interval": "5s",
            "base_ejection_time": "10s",
            "max_ejection_percent": 50,
        },
    }


def _cluster(s: EnvoySettings) -> dict[str, Any]:
    """memsvc's gRPC server, or its replicas: round robin over those whose grpc.health.v1
    check passes (`_health_checks`, the same for each replica)."""
    endpoints = [{"endpoint": {"address": _address(host, port)}} for host, port in s.upstreams()]
    return {
        "name": CLUSTER,
        "type": "STRICT_DNS",
        "connect_timeout": "1s",
        "lb_policy": "ROUND_ROBIN",
        "health_checks": _health_checks(),
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": _typed(
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                explicit_http_config={"http2_protocol_options": {}},
            )
        },
        "load_assignment": {
            "cluster_name": CLUSTER,
            "endpoints": [{"lb_endpoints": endpoints}],
        },
        **(_replica_balancing() if s.several else {}),
    }


MCP_CLUSTER = "memsvc_mcp"
MCP_PATH = "/mcp"
# Filters of the API (REST and gRPC-Web) that do not apply to a route outside it (MCP's JSON-RPC body, a
# studio file): the transcoder would refuse the path as an unknown method, the guard would
# check the body against gRPC messages.
_NOT_REST = ("envoy.filters.http.grpc_json_transcoder", "envoy.filters.http.lua", GRPC_WEB_FILTER)


def _plain_route(path: str, skip: tuple[str, ...] = _NOT_REST, **action: Any) -> dict[str, Any]:
    """An exact-path route that skips the REST contract's filters (`_NOT_REST`, or `skip`)."""
    return {
        "match": {"path": path},
        **action,
        "typed_per_filter_config": {f: _typed("envoy.config.route.v3.FilterConfig", disabled=True) for f in skip},
    }


def _mcp_routes(s: EnvoySettings) -> list[dict[str, Any]]:
    """/mcp to the MCP server as it is (plain HTTP, the caller's Authorization header
    included: the MCP server forwards it to gRPC, where it is checked). The request guard
    stays on: it refuses a Host or Origin as it does for REST (no REST route matches /mcp,
    so nothing else of it applies)."""
    if s.mcp_port <= 0:
        return []
    return [
        _plain_route(
            MCP_PATH, skip=("envoy.filters.http.grpc_json_transcoder",), route={"cluster": MCP_CLUSTER, "timeout": "0s"}
        )
    ]


def _mcp_clusters(s: EnvoySettings) -> list[dict[str, Any]]:
    if s.mcp_port <= 0:
        return []
    return [
        {
            "name": MCP_CLUSTER,
            "type": "STATIC",
            "connect_timeout": "1s",
            "load_assignment": {
                "cluster_name": MCP_CLUSTER,
                "endpoints": [{"lb_endpoints": [{"endpoint": {"address": _address("127.0.0.1", s.mcp_port)}}]}],
            },
        }
    ]


STUDIO_PATH = "/studio/"
# Envoy reads each file once, at start-up, and refuses a direct response above this size
# (its own default is 4 KiB).
STUDIO_MAX_FILE_BYTES = 1024 * 1024
_STUDIO_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
# Same origin as the API it calls, so nothing is allowed from elsewhere; no inline script or
# style, no framing.
_STUDIO_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


def _studio_file_route(s: EnvoySettings, path: str, name: str) -> dict[str, Any]:
    headers = {
        "content-type": _STUDIO_TYPES[Path(name).suffix],
        "cache-control": "no-cache",
        "x-content-type-options": "nosniff",
        "content-security-policy": _STUDIO_POLICY,
    }
    return _plain_route(
        path,
        direct_response={"status": 200, "body": {"filename": f"{s.studio_dir}/{name}"}},
        response_headers_to_add=[
            {"header": {"key": k, "value": v}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
            for k, v in headers.items()
        ],
    )


def _studio_routes(s: EnvoySettings) -> list[dict[str, Any]]:
    """The studio (the web dashboard), answered by Envoy itself: one exact route per file of
    the memsvc.studio package, `/studio/` being its index.html and `/studio` a redirect to
    it. No token is needed for these files; every call the page makes needs one."""
    names = studio.file_names()
    routes = [
        _plain_route(STUDIO_PATH.rstrip("/"), redirect={"path_redirect": STUDIO_PATH}),
        _studio_file_route(s, STUDIO_PATH, "index.html"),
    ]
    routes += [_studio_file_route(s, STUDIO_PATH + name, name) for name in names if name != "index.html"]
    return routes


def _openapi_routes(document: str) -> list[dict[str, Any]]:
    """`GET /api/openapi.json`: the OpenAPI document of the REST routes (memsvc.gateway.openapi,
    committed as deploy/openapi.json), answered by Envoy itself. It is rendered from the same
    descriptor set the transcoder loads, so it describes exactly the routes this Envoy serves.
    No token is needed, as for the studio's files; another method goes on to the transcoder
    (a 404, no RPC has the path)."""
    return [_json_document(openapi.DOCUMENT_PATH, document)]


def _json_document(path: str, document: str) -> dict[str, Any]:
    """A route on which Envoy answers GET and HEAD of `path` with the JSON `document` itself."""
    headers = {"content-type": "application/json", "cache-control": "no-cache", "x-content-type-options": "nosniff"}
    route = _plain_route(
        path,
        direct_response={"status": 200, "body": {"inline_string": document}},
        response_headers_to_add=[
            {"header": {"key": k, "value": v}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
            for k, v in headers.items()
        ],
    )
    route["match"]["headers"] = [{"name": ":method", "string_match": {"safe_regex": {"regex": "GET|HEAD"}}}]
    return route


def _oauth(s: EnvoySettings) -> OAuthSettings | None:
    if s.oauth_issuer is None or s.oauth_audience is None:
        return None
    return OAuthSettings(s.oauth_issuer, s.oauth_audience)


def _oauth_routes(s: EnvoySettings) -> list[dict[str, Any]]:
    """RFC 9728 Protected Resource Metadata, answered by Envoy itself: at the well-known path
    of the REST API and at its path form for /mcp (`<well-known>/mcp`), both naming the
    audience as the resource (a parent of /mcp, which an MCP client accepts)."""
    settings = _oauth(s)
    if settings is None:
        return []
    document = json.dumps(protected_resource_metadata(settings))
    return [_json_document(path, document) for path in (PRM_PATH, PRM_PATH + MCP_PATH)]


OAUTH_CHALLENGE_FILTER = "memsvc.oauth_challenge"
_CHALLENGE_LUA = """
local CHALLENGES = %s

function envoy_on_request(handle)
  local path = handle:headers():get(":path") or ""
  local mcp = path == "/mcp" or string.sub(path, 1, 5) == "/mcp?" or string.sub(path, 1, 5) == "/mcp/"
  local token = handle:headers():get("authorization") ~= nil
  handle:streamInfo():dynamicMetadata():set("memsvc.oauth", "kind", (mcp and "mcp" or "rest") .. (token and "_invalid" or ""))
end

function envoy_on_response(handle)
  if handle:headers():get(":status") ~= "401" or handle:headers():get("www-authenticate") ~= nil then
    return
  end
  local meta = handle:streamInfo():dynamicMetadata():get("memsvc.oauth")
  local kind = meta and meta["kind"] or "rest"
  handle:headers():add("www-authenticate", CHALLENGES[kind])
end
"""


def _oauth_challenge(s: EnvoySettings) -> list[dict[str, Any]]:
    """Every 401 (a gRPC UNAUTHENTICATED the transcoder turned into one, or the MCP server's)
    gets `WWW-Authenticate: Bearer resource_metadata="..."` (RFC 9728 section 5.1), with
    `error="invalid_token"` when the request carried a token; a 401 that has one keeps it."""
    settings = _oauth(s)
    if settings is None:
        return []
    challenges = {
        f"{kind}{suffix}": challenge(settings, path, invalid=bool(suffix))
        for kind, path in (("rest", ""), ("mcp", MCP_PATH))
        for suffix in ("", "_invalid")
    }
    table = "{" + ", ".join(f"[{json.dumps(k)}] = {json.dumps(v)}" for k, v in challenges.items()) + "}"
    return [
        {
            "name": OAUTH_CHALLENGE_FILTER,
            "typed_config": _typed(
                "envoy.extensions.filters.http.lua.v3.Lua",
                default_source_code={"inline_string": _CHALLENGE_LUA % table},
            ),
        }
    ]


def _overload_manager(s: EnvoySettings) -> dict[str, Any]:
    """Caps open client connections so a flood cannot exhaust file descriptors."""
    return {
        "resource_monitors": [
            {
                "name": "envoy.resource_monitors.global_downstream_max_connections",
                "typed_config": _typed(
                    "envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig",
                    max_active_downstream_connections=s.max_connections,
                ),
            }
        ]
    }


def _admin_address(s: EnvoySettings) -> dict[str, Any]:
    if s.admin_port >= 0:
        return _address(s.admin_host, s.admin_port)
    return {"pipe": {"path": s.admin_socket, "mode": 0o600}}


def build(s: EnvoySettings) -> dict[str, Any]:
    """The whole bootstrap config as plain data."""
    config: dict[str, Any] = {
        "admin": {"address": _admin_address(s)},
        "overload_manager": _overload_manager(s),
        "static_resources": {
            "listeners": [_listener(s)],
            "clusters": [_cluster(s), *_mcp_clusters(s), *_traces_cluster(s)],
        },
    }
    if s.traces_url is not None:
        config["layered_runtime"] = {
            "layers": [{"name": "memsvc", "static_layer": {"tracing.opentelemetry.flush_interval_ms": TRACES_FLUSH_MS}}]
        }
    return config


class _Dumper(yaml.SafeDumper):
    """Writes multi-line strings (the request guard's Lua code) as literal blocks, so the
    generated file reads as code."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render_yaml(s: EnvoySettings) -> str:
    header = "# Generated by `python scripts/generate.py` (memsvc.gateway.envoy_config); do not edit.\n"
    return header + yaml.dump(build(s), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)
