"""The tracing options, as memsvc.config reads OpenTelemetry's standard variables: tracing is
on only when an OTLP endpoint is set (the traces URL derived as the OTLP specification says),
off with OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED; the transport, sampler and URL are
checked (the transport only while tracing is on), a header never shows in a message or a
repr. The Envoy config built from them is accepted by the real Envoy binary (`--mode
validate`), for a plain and a TLS collector, and is readable by memsvc's user only; with
tracing off it holds no tracer."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, TraceIdRatioBased

from memsvc.api.trace_export import sampler
from memsvc.config import Config, ConfigError, load
from memsvc.gateway.launcher import Gateway, envoy_binary

HEADER_SECRET = "collector-key-5f3a"


def _config(**env: str) -> Config:
    return load(env={"MEMSVC_DATA_DIR": "/tmp/unused", **env})


def test_tracing_is_off_unless_an_endpoint_is_set():
    assert _config().traces_url is None
    assert _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318").traces_url == "http://127.0.0.1:4318/v1/traces"
    assert _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://c:4318/base/").traces_url == "http://c:4318/base/v1/traces"
    both = _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://a:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://b:9/t")
    assert both.traces_url == "http://b:9/t"  # the signal's own URL, used as it is
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert _config(**endpoint, OTEL_TRACES_EXPORTER="none").traces_url is None
    assert _config(**endpoint, OTEL_SDK_DISABLED="true").traces_url is None


def test_only_otlp_over_http_is_accepted_and_only_while_tracing_is_on():
    _config(OTEL_EXPORTER_OTLP_PROTOCOL="grpc").validate()  # another program's setting, tracing off
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://c:4318", OTEL_EXPORTER_OTLP_PROTOCOL="grpc").validate()
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://c:4318", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="grpc").validate()
    _config(
        OTEL_EXPORTER_OTLP_ENDPOINT="http://c:4318",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf",  # the signal's own wins
    ).validate()
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER"):
        _config(OTEL_TRACES_EXPORTER="zipkin").validate()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "http:// or https://"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://c/v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:99999"}, "not a valid URL"),
        ({"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER must be"),
        ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, "from 0 to 1"),
        ({"OTEL_TRACES_SAMPLER_ARG": "half"}, "from 0 to 1"),
        ({"OTEL_SERVICE_NAME": " "}, "OTEL_SERVICE_NAME"),
    ],
)
def test_bad_tracing_options_are_refused_at_start(env: dict[str, str], message: str):
    with pytest.raises(ConfigError, match=message):
        _config(**env).validate()


def test_headers_are_decoded_and_never_shown():
    config = _config(
        OTEL_EXPORTER_OTLP_ENDPOINT="http://c:4318",
        OTEL_EXPORTER_OTLP_HEADERS=f"Authorization=Bearer%20{HEADER_SECRET},x-tenant=a",
    )
    assert config.traces_headers == (("authorization", f"Bearer {HEADER_SECRET}"), ("x-tenant", "a"))
    assert HEADER_SECRET not in repr(config)
    own = _config(OTEL_EXPORTER_OTLP_HEADERS="a=1", OTEL_EXPORTER_OTLP_TRACES_HEADERS="b=2")
    assert own.traces_headers == (("b", "2"),)
    with pytest.raises(ConfigError) as refused:
        _config(OTEL_EXPORTER_OTLP_HEADERS=f"{HEADER_SECRET}")
    assert HEADER_SECRET not in str(refused.value)


def test_the_sampler_is_the_sdks_of_the_same_name():
    assert sampler(_config(OTEL_TRACES_SAMPLER="always_on")) is ALWAYS_ON
    assert sampler(_config(OTEL_TRACES_SAMPLER="always_off")) is ALWAYS_OFF
    ratio = sampler(_config(OTEL_TRACES_SAMPLER="traceidratio", OTEL_TRACES_SAMPLER_ARG="0.25"))
    assert isinstance(ratio, TraceIdRatioBased) and ratio.rate == 0.25
    default = sampler(_config())
    assert isinstance(default, ParentBased) and "AlwaysOn" in default.get_description()
    based = sampler(_config(OTEL_TRACES_SAMPLER="parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG="0.5"))
    assert isinstance(based, ParentBased) and "TraceIdRatioBased{0.5}" in based.get_description()


def _gateway(tmp_path: Path, **env: str) -> Gateway:
    config = load(env={"MEMSVC_DATA_DIR": str(tmp_path / "data"), **env})
    return Gateway.for_config(config, grpc_port=50051)


def _validate(path: Path) -> None:
    result = subprocess.run(
        [envoy_binary(), "--mode", "validate", "-c", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


@pytest.mark.parametrize(
    ("endpoint", "tls"), [("http://127.0.0.1:4318", False), ("https://collector.example.com/otlp", True)]
)
def test_envoys_tracing_config_is_accepted_by_envoy(tmp_path: Path, endpoint: str, tls: bool):
    gateway = _gateway(
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_EXPORTER_OTLP_HEADERS=f"authorization=Bearer%20{HEADER_SECRET}",
        OTEL_SERVICE_NAME="memory",
        OTEL_TRACES_SAMPLER="parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG="0.2",
    )
    assert HEADER_SECRET not in repr(gateway.settings)
    path = gateway.write_config()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # it holds the collector's key
    _validate(path)
    config = yaml.safe_load(path.read_text())
    manager = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    tracer = manager["tracing"]["provider"]["typed_config"]
    assert tracer["service_name"] == "memory-envoy"
    assert tracer["http_service"]["http_uri"]["uri"] == endpoint + "/v1/traces"
    assert tracer["http_service"]["request_headers_to_add"][0]["header"]["value"] == f"Bearer {HEADER_SECRET}"
    assert manager["tracing"]["random_sampling"]["value"] == pytest.approx(20.0)
    (collector,) = [c for c in config["static_resources"]["clusters"] if c["name"] == "otel_collector"]
    port = collector["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
    assert port["port_value"] == (443 if tls else 4318)
    assert ("transport_socket" in collector) is tls


def test_with_tracing_off_envoy_has_no_tracer(tmp_path: Path):
    path = _gateway(tmp_path, OTEL_EXPORTER_OTLP_PROTOCOL="grpc").write_config()
    text = path.read_text()
    assert (
        "tracing"
        not in yaml.safe_load(text)["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0][
            "typed_config"
        ]
    )
    assert "otel_collector" not in text and "layered_runtime" not in text and "memsvc.traced_path" not in text
