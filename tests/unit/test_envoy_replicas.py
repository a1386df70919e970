"""The Envoy config for several memsvc replicas, as built data: one round-robin cluster with
every replica an endpoint health-checked over grpc.health.v1, no panic routing, outlier
detection, retries of writes only when they never reached a replica and of reads also when
they were cut off (reads: what the access rule table lets a read-only credential call), a
retry limit that refuses no retry, and a /healthz probe that
says SERVING while any one replica is healthy. With no replicas (or one) the config is the
single-upstream one, so deploy/envoy.yaml and `memsvc serve`'s Envoy do not change."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml

from memsvc.api.access import RULES
from memsvc.core.credentials import ADMIN, WRITE
from memsvc.gateway.envoy_config import (
    CLUSTER,
    MAX_UPSTREAM_REQUESTS,
    EnvoySettings,
    build,
    min_healthy_percent,
    parse_replica,
    read_methods,
    render_yaml,
)

THREE = (("10.0.0.1", 50051), ("10.0.0.2", 50051), ("memsvc-3.internal", 50061))
BASE = EnvoySettings(descriptor_path="gen/memsvc/v1/memsvc.pb")


def _cluster(config: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in config["static_resources"]["clusters"] if c["name"] == CLUSTER)


def _manager(config: dict[str, Any]) -> dict[str, Any]:
    return config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]


def _upstream_route(config: dict[str, Any]) -> dict[str, Any]:
    routes = _manager(config)["route_config"]["virtual_hosts"][0]["routes"]
    return next(r for r in routes if r["match"] == {"prefix": "/"})["route"]


def _routes(config: dict[str, Any]) -> list[dict[str, Any]]:
    return _manager(config)["route_config"]["virtual_hosts"][0]["routes"]


def _probe_percent(config: dict[str, Any]) -> float:
    probe = next(f for f in _manager(config)["http_filters"] if f["name"] == "envoy.filters.http.health_check")
    return probe["typed_config"]["cluster_min_healthy_percentages"][CLUSTER]["value"]


def _endpoints(cluster: dict[str, Any]) -> list[tuple[str, int]]:
    [locality] = cluster["load_assignment"]["endpoints"]
    return [
        (
            e["endpoint"]["address"]["socket_address"]["address"],
            e["endpoint"]["address"]["socket_address"]["port_value"],
        )
        for e in locality["lb_endpoints"]
    ]


def test_three_replicas_are_one_round_robin_cluster_checked_over_grpc_health():
    cluster = _cluster(build(replace(BASE, replicas=THREE)))
    assert cluster["lb_policy"] == "ROUND_ROBIN"
    assert _endpoints(cluster) == list(THREE)
    [check] = cluster["health_checks"]
    # The standard grpc.health.v1 service, overall status (service name "").
    assert check["grpc_health_check"].get("service_name", "") == ""
    assert (check["interval"], check["timeout"], check["unhealthy_threshold"], check["healthy_threshold"]) == (
        "1s",
        "2s",
        2,
        1,
    )
    assert cluster["common_lb_config"] == {"healthy_panic_threshold": {"value": 0}}
    outlier = cluster["outlier_detection"]
    assert outlier["consecutive_gateway_failure"] == 3 and outlier["enforcing_consecutive_gateway_failure"] == 100
    assert outlier["consecutive_5xx"] == 5 and outlier["max_ejection_percent"] == 50


def test_the_probe_is_serving_while_one_replica_of_several_is_healthy():
    assert _probe_percent(build(replace(BASE, replicas=THREE))) == 33.33
    for replicas in range(2, 200):
        share = min_healthy_percent(replicas)
        # Envoy's test: unhealthy when 100 × healthy < replicas × share.
        assert not replicas * share > 100 * 1, replicas
        assert replicas * share > 100 * 0, replicas


def test_a_write_is_retried_on_another_replica_only_when_it_never_reached_one():
    policy = _upstream_route(build(replace(BASE, replicas=THREE)))["retry_policy"]
    assert set(policy["retry_on"].split(",")) == {"connect-failure", "refused-stream", "reset-before-request"}
    assert "retriable_status_codes" not in policy and "retry_back_off" not in policy
    assert policy["num_retries"] == 2
    assert [p["name"] for p in policy["retry_host_predicate"]] == ["envoy.retry_host_predicates.previous_hosts"]


def test_a_read_is_retried_on_another_replica_also_when_it_was_cut_off():
    routes = _routes(build(replace(BASE, replicas=THREE)))
    read_routes = {
        r["match"]["path"]: r["route"]
        for r in routes
        if "path" in r["match"] and "cluster" in r.get("route", {}) and r["route"]["cluster"] == CLUSTER
    }
    assert set(read_routes) == set(read_methods())
    for route in read_routes.values():
        policy = route["retry_policy"]
        assert set(policy["retry_on"].split(",")) == {
            "connect-failure",
            "refused-stream",
            "reset-before-request",
            "reset",
        }
        assert policy["num_retries"] == 2 and "retriable_status_codes" not in policy
    # They come before the catch-all, which would otherwise take them.
    assert routes.index(next(r for r in routes if r["match"] == {"prefix": "/"})) == len(routes) - 1


def test_the_reads_are_what_the_access_table_lets_a_read_only_credential_call():
    reads = set(read_methods())
    assert {
        "/memsvc.v1.EngineService/Retrieve",
        "/memsvc.v1.EngineService/Inject",
        "/memsvc.v1.EngineService/RetrievePreview",
        "/memsvc.v1.MemoryService/ListMemories",
        "/memsvc.v1.MemoryService/GetMemory",
    } <= reads
    assert all(RULES[path].permission not in (WRITE, ADMIN) for path in reads)
    # A write, an upsert by key included, is never among them.
    assert not reads & {
        "/memsvc.v1.MemoryService/CreateMemory",
        "/memsvc.v1.MemoryService/CreateMemories",
        "/memsvc.v1.EngineService/Extract",
        "/memsvc.v1.EngineService/Reindex",
    }


def test_no_retry_is_refused_for_want_of_retries_in_flight():
    [limits] = _cluster(build(replace(BASE, replicas=THREE)))["circuit_breakers"]["thresholds"]
    assert limits["max_retries"] == limits["max_requests"] == MAX_UPSTREAM_REQUESTS


def test_one_upstream_keeps_the_single_server_config():
    single = build(BASE)
    cluster = _cluster(single)
    assert _endpoints(cluster) == [("127.0.0.1", 50051)]
    assert "outlier_detection" not in cluster and "common_lb_config" not in cluster
    assert not [r for r in _routes(single) if "retry_policy" in r.get("route", {})]
    assert "circuit_breakers" not in cluster
    assert _probe_percent(single) == 100
    # One replica listed is the same as that address given as the upstream.
    one = replace(BASE, replicas=(("10.0.0.1", 50051),))
    assert render_yaml(one) == render_yaml(replace(BASE, upstream_host="10.0.0.1"))


def test_the_rendered_yaml_lists_every_replica():
    config = yaml.safe_load(render_yaml(replace(BASE, replicas=THREE)))
    assert _endpoints(_cluster(config)) == list(THREE)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("10.0.0.1:50051", ("10.0.0.1", 50051)),
        ("memsvc-2.internal:1", ("memsvc-2.internal", 1)),
        ("[::1]:65535", ("::1", 65535)),
    ],
)
def test_a_replica_is_host_colon_port(text, expected):
    assert parse_replica(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "10.0.0.1",
        "10.0.0.1:",
        ":50051",
        "10.0.0.1:0",
        "10.0.0.1:65536",
        "host:http",
        "::1:50051",
        "[::1]50051",
        "a b:1",
        "http://h:1",
    ],
)
def test_anything_else_is_refused_with_the_form_it_needs(text):
    with pytest.raises(ValueError, match="replica"):
        parse_replica(text)
