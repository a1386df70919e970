"""Generated stubs, the descriptor set and the Envoy configs under deploy/ (one server, three
replicas) must match a fresh generation."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("generate", ROOT / "scripts" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_generated_files_match_a_fresh_generation():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_drift_check_catches_a_changed_file(tmp_path):
    generate = _generator()
    generate.generate(tmp_path)
    assert generate._differences(tmp_path) == []
    envoy = tmp_path / "deploy" / "envoy.yaml"
    envoy.write_text(
        envoy.read_text().replace("reject_unknown_query_parameters: true", "reject_unknown_query_parameters: false")
    )
    replicas = tmp_path / "deploy" / "envoy.three-replicas.yaml"
    replicas.write_text(replicas.read_text().replace("address: 10.0.0.3", "address: 10.0.0.4"))
    stub = tmp_path / "gen" / "memsvc" / "v1" / "memory_pb2.py"
    stub.write_text(stub.read_text() + "\n# edited\n")
    assert sorted(generate._differences(tmp_path)) == [
        "differs from a fresh generation: deploy/envoy.three-replicas.yaml",
        "differs from a fresh generation: deploy/envoy.yaml",
        "differs from a fresh generation: gen/memsvc/v1/memory_pb2.py",
    ]


def test_stubs_import_from_the_package_without_shadowing_memsvc():
    code = (
        "import memsvc, memsvc.v1.memory_pb2 as m, memsvc.server; "
        "assert memsvc.server.__file__.endswith('memsvc/server.py'); print(m.DESCRIPTOR.package)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "memsvc.v1"
