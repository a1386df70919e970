"""The access rule table covers every RPC, and the matrix of callers × RPCs holds through
gRPC: status as the policy says, and nothing changed where the call was refused."""

from __future__ import annotations

import pytest
from conftest import make_config, start_server
from support.access_matrix import KINDS, World, describe, grpc_call, methods, run_matrix, short

from memsvc.api.access import RULES


def test_every_rpc_of_every_service_has_a_rule_and_no_rule_is_stale():
    paths = {path for path, _ in methods()}
    assert len(paths) == 41, sorted(paths)
    assert sorted(paths - RULES.keys()) == [], "RPCs without an access rule"
    assert sorted(RULES.keys() - paths) == [], "rules for RPCs that do not exist"
    assert {short(p) for p in paths} == set(KINDS), "the matrix states a policy for every RPC"


def test_the_descriptor_walk_sees_every_generated_service():
    """The walk reads the generated modules' descriptors; a service added to the package
    without being listed would escape it, so compare with the package's descriptor pool."""
    import importlib
    import pkgutil

    import memsvc.v1 as package

    found = set()
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.endswith("_pb2"):
            module = importlib.import_module(f"memsvc.v1.{info.name}")
            found |= {s.full_name for s in module.DESCRIPTOR.services_by_name.values()}
    assert found == {path.split("/")[1] for path, _ in methods()}


@pytest.fixture(scope="module")
def matrix_server(tmp_path_factory):
    handle = start_server(make_config(tmp_path_factory.mktemp("matrix"), recent_flush_s=3600.0, access_flush_s=0.0))
    yield handle
    handle.stop()


def test_the_access_matrix_through_grpc(matrix_server):
    world = World.build(matrix_server)
    channel = matrix_server.channel()
    problems = run_matrix(world, lambda path, method, request, token: grpc_call(channel, path, method, request, token))
    assert problems == [], describe(problems)
