"""Regenerate everything derived from proto/: the Python stubs and descriptor set in gen/,
the Python SDK's own copy of the stubs (clients/python/memsvc_client/_proto/), deploy/envoy.yaml
and the example of several replicas, deploy/envoy.three-replicas.yaml, the OpenAPI document
deploy/openapi.json, and the TypeScript SDK's code (clients/typescript/src/gen/, by its own
generator: protoc-gen-es comes with the SDK's npm dependencies, `npm ci` in clients/typescript).

    python scripts/generate.py            # write into the repository
    python scripts/generate.py --check    # regenerate into a temp dir, exit 1 on drift

`--check` covers the Python side; the TypeScript SDK's suite checks its own code for drift
(clients/typescript/test/generated.test.ts), since it needs the npm dependencies.

The stubs are generated from `proto/memsvc/v1/*.proto` with `proto/` as the include root, so
their Python modules are `memsvc.v1.*_pb2`; pyproject maps the package `memsvc.v1` onto
`gen/memsvc/v1`, which lets them live beside the hand-written `memsvc` without shadowing it.

The SDK (distribution memsvc-client) must not need the server package, so it ships the same
stubs under `memsvc_client._proto.memsvc.v1`: gen's files with two lines made the SDK's own
(`_sdk_copy`). Their descriptors keep the file names `memsvc/v1/*.proto`: the protobuf pool
then treats both copies as one file, so the server and the SDK import side by side in one
process (renamed files would register every message twice and fail with "duplicate symbol").
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PACKAGE_DIR = Path("memsvc") / "v1"
DESCRIPTOR_NAME = "memsvc.pb"
ENVOY_YAML = Path("deploy") / "envoy.yaml"
# Envoy in front of three memsvc replicas sharing one PostgreSQL (docs/scale-out.md's layout).
ENVOY_REPLICAS_YAML = Path("deploy") / "envoy.three-replicas.yaml"
EXAMPLE_REPLICAS = (("10.0.0.1", 50051), ("10.0.0.2", 50051), ("10.0.0.3", 50051))
# The OpenAPI document of the REST routes (memsvc.gateway.openapi), which Envoy serves at /api/openapi.json.
OPENAPI_JSON = Path("deploy") / "openapi.json"
ENVOY_FILES = (ENVOY_YAML, ENVOY_REPLICAS_YAML, OPENAPI_JSON)
# Envoy's transcoder needs the error detail types to render google.rpc.Status details.
ERROR_PROTOS = ["google/rpc/status.proto", "google/rpc/error_details.proto"]
# The Python SDK's copy of the stubs: importable as memsvc_client._proto.memsvc.v1.
SDK_PROTO_DIR = Path("clients") / "python" / "memsvc_client" / "_proto"
SDK_INIT = '"""Generated from proto/ by scripts/generate.py for the memsvc-client SDK; do not edit."""\n'
# The TypeScript SDK's generator and the protoc plugin it runs (an npm dev dependency).
TS_GENERATOR = Path("clients") / "typescript" / "scripts" / "generate.mjs"
TS_PLUGIN = Path("clients") / "typescript" / "node_modules" / ".bin" / "protoc-gen-es"
# Compared for drift: everything this script writes lives under these folders or is one of ENVOY_FILES.
GENERATED_DIRS = (Path("gen"), SDK_PROTO_DIR)


def _include_dirs() -> list[str]:
    """protoc's own well-known types plus the .proto files googleapis-common-protos ships."""
    wkt = resources.files("grpc_tools") / "_proto"
    import google.api.annotations_pb2 as annotations

    googleapis_root = Path(annotations.__file__).resolve().parent.parent.parent
    return [str(PROTO_ROOT), str(wkt), str(googleapis_root)]


def _protoc(args: list[str]) -> None:
    code = protoc.main(["grpc_tools.protoc", *[f"-I{d}" for d in _include_dirs()], *args])
    if code != 0:
        raise SystemExit(f"protoc failed ({code}) for {args}")


def generate(out: Path) -> list[Path]:
    """Write gen/ and the Envoy configs (`ENVOY_FILES`) under `out`; return the files written."""
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / PACKAGE_DIR).glob("*.proto"))
    gen = out / "gen"
    pkg = gen / PACKAGE_DIR
    pkg.mkdir(parents=True, exist_ok=True)
    _protoc([f"--python_out={gen}", f"--pyi_out={gen}", f"--grpc_python_out={gen}", *protos])
    descriptor = pkg / DESCRIPTOR_NAME
    _protoc([f"--descriptor_set_out={descriptor}", "--include_imports", *protos, *ERROR_PROTOS])
    (pkg / "__init__.py").write_text('"""Generated from proto/memsvc/v1 by scripts/generate.py; do not edit."""\n')

    sys.path.insert(0, str(ROOT))
    from memsvc.gateway.envoy_config import EnvoySettings, render_yaml

    descriptor_path = f"gen/{PACKAGE_DIR}/{DESCRIPTOR_NAME}"
    (out / ENVOY_YAML).parent.mkdir(parents=True, exist_ok=True)
    (out / ENVOY_YAML).write_text(render_yaml(EnvoySettings.committed(descriptor_path)))
    (out / ENVOY_REPLICAS_YAML).write_text(render_yaml(EnvoySettings.committed(descriptor_path, EXAMPLE_REPLICAS)))
    from memsvc.gateway import openapi

    openapi.write(descriptor, out / OPENAPI_JSON)
    _sdk_copy(pkg, out / SDK_PROTO_DIR)
    return sorted(p for folder in GENERATED_DIRS for p in (out / folder).rglob("*") if p.is_file()) + [
        out / name for name in ENVOY_FILES
    ]


def _sdk_copy(stubs: Path, sdk: Path) -> None:
    """gen's stubs (`stubs`) as the SDK's package `memsvc_client._proto.memsvc.v1` under `sdk`.

    protoc names Python modules after the proto paths, so a service module imports its
    messages as `from memsvc.v1 import x_pb2`, the server package. In the SDK's copy that import
    is relative, and the message classes name the SDK's module (pickling looks classes up by
    it). Each rewrite must match exactly once: a protoc whose output differs fails here
    instead of shipping stubs that import the server.
    """
    target = sdk / PACKAGE_DIR
    target.mkdir(parents=True, exist_ok=True)
    for folder in (sdk, sdk / PACKAGE_DIR.parent, target):
        (folder / "__init__.py").write_text(SDK_INIT)
    for source in sorted(stubs.glob("*_pb2*.py*")):
        text = source.read_text()
        if source.name.endswith("_pb2_grpc.py"):
            text = _rewrite_once(text, r"^from memsvc\.v1 import (\w+_pb2) as ", r"from . import \1 as ", source)
        elif source.name.endswith("_pb2.py"):
            text = _rewrite_once(
                text, r"'memsvc\.v1\.(\w+_pb2)', _globals\)", r"'memsvc_client._proto.memsvc.v1.\1', _globals)", source
            )
        (target / source.name).write_text(text)


def _rewrite_once(text: str, pattern: str, replacement: str, source: Path) -> str:
    rewritten, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
    if count != 1:
        raise SystemExit(f"{source.name}: expected one match of {pattern!r}, found {count}")
    return rewritten


def _differences(fresh_root: Path) -> list[str]:
    problems = []
    fresh_files = {
        p.relative_to(fresh_root) for d in GENERATED_DIRS for p in (fresh_root / d).rglob("*") if p.is_file()
    }
    fresh_files |= set(ENVOY_FILES)
    committed = {
        p.relative_to(ROOT)
        for d in GENERATED_DIRS
        for p in (ROOT / d).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    committed |= {name for name in ENVOY_FILES if (ROOT / name).exists()}
    for rel in sorted(fresh_files | committed):
        if rel not in committed:
            problems.append(f"missing from the repository: {rel}")
        elif rel not in fresh_files:
            problems.append(f"not generated by this script (stale): {rel}")
        elif not filecmp.cmp(fresh_root / rel, ROOT / rel, shallow=False):
            problems.append(f"differs from a fresh generation: {rel}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed files drift")
    args = parser.parse_args(argv)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            generate(Path(tmp))
            problems = _differences(Path(tmp))
        for line in problems:
            print(line)
        if problems:
            print("run: python scripts/generate.py")
            return 1
        print("generated files are up to date")
        return 0
    for folder in GENERATED_DIRS:
        shutil.rmtree(ROOT / folder, ignore_errors=True)
    for path in generate(ROOT):
        print(path.relative_to(ROOT))
    return _generate_typescript()


def _generate_typescript() -> int:
    if not (ROOT / TS_PLUGIN).exists():
        print(
            f"{TS_GENERATOR.parent.parent}/src/gen not written: run `npm ci` in clients/typescript first",
            file=sys.stderr,
        )
        return 1
    env = {**os.environ, "MEMSVC_PYTHON": sys.executable}
    return subprocess.run(["node", str(ROOT / TS_GENERATOR)], env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
