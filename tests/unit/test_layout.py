"""The package layout's rules, checked on the source: a line of code knows from its folder
what it may touch. `core/` never imports grpc, `api/` never reaches SQLite, only `storage/`
imports the SQLite binding, no module imports another module's private names, and the
package graph points inward (kernel, use cases, adapters, composition) without a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "memsvc"


def _modules(folder: str = "") -> list[Path]:
    return sorted(p for p in (PACKAGE / folder).rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every import statement in the file."""
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [alias.name for alias in node.names]))
    return out


def _offenders(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE)}: {module}"
        for path in _modules(folder)
        for module, _ in _imports(path)
        if any(module == f or module.startswith(f + ".") for f in forbidden)
    ]


def test_core_imports_no_grpc_and_no_sqlite() -> None:
    assert _offenders("core", ("grpc", "apsw", "sqlite3", "sqlite_vec", "memsvc.api")) == []


def test_api_does_not_reach_sqlite() -> None:
    assert _offenders("api", ("apsw", "sqlite3", "sqlite_vec", "memsvc.storage")) == []


def test_only_storage_imports_the_sqlite_binding() -> None:
    outside = [p for p in _modules() if "storage" not in p.relative_to(PACKAGE).parts]
    found = [
        f"{p.relative_to(PACKAGE)}: {m}"
        for p in outside
        for m, _ in _imports(p)
        if m.split(".")[0] in ("apsw", "sqlite3")
    ]
    assert found == []


def test_only_storage_imports_the_postgresql_driver() -> None:
    outside = [p for p in _modules() if "storage" not in p.relative_to(PACKAGE).parts]
    found = [
        f"{p.relative_to(PACKAGE)}: {m}"
        for p in outside
        for m, _ in _imports(p)
        if m.split(".")[0] in ("psycopg", "psycopg_pool", "pgvector")
    ]
    assert found == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_another_modules_private_names(path: Path) -> None:
    """A private module (`memsvc.embedding._http`) may serve its own package; a private
    name of one module is that module's alone."""
    package = ".".join(("memsvc", *path.relative_to(PACKAGE).parent.parts))
    private = [
        f"{module}.{name}"
        for module, names in _imports(path)
        if module.startswith("memsvc")
        for name in names
        if name.startswith("_")
        and not name.startswith("__")
        and not (module == package and (PACKAGE.parent / module.replace(".", "/") / f"{name}.py").is_file())
    ]
    assert private == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_private_module_of_another_package(path: Path) -> None:
    """`memsvc.embedding._http` serves `memsvc.embedding` only; what another package needs
    from it belongs in a public module (the kernel, when every package needs it)."""
    own = ".".join(("memsvc", *path.relative_to(PACKAGE).parent.parts))
    found = [
        module
        for module, _ in _imports(path)
        if module.startswith("memsvc.")
        and any(part.startswith("_") and not part.startswith("__") for part in module.split("."))
        and module.rsplit(".", 1)[0] != own
    ]
    assert found == []


# The package graph. Dependencies point inward: the kernel (domain objects, errors, ports and
# the pure helpers) imports nothing of memsvc; the use cases (core) import only the kernel;
# adapters sit at the edge and import inward; composition (app, server, processes, the
# commands) wires them. A package may import any package of a lower layer; within a layer
# only the edges listed in SIDEWAYS, each with its reason.
LAYERS: list[tuple[str, set[str]]] = [
    ("kernel", {"kernel"}),
    ("foundation", {"v1", "logs", "process_tree", "supervision", "outbound", "studio"}),
    ("use cases", {"core"}),
    ("configuration", {"config", "metrics"}),
    (
        "adapters",
        {"storage", "working_set", "embedding", "vectors", "backends", "characters", "api", "gateway", "mcp", "client"},
    ),
    (
        "composition",
        {"app", "server", "processes", "cli", "cli_admin", "cli_cluster", "cli_models", "cli_tokens", "__main__"},
    ),
]
SIDEWAYS: dict[tuple[str, str], str] = {
    ("storage", "working_set"): "storage feeds the in-memory working set through its store port",
    ("characters", "storage"): "the character and reflection stores are typed by storage's rows (app builds them)",
    ("api", "characters"): "MemoryService's character RPCs call the character-memory use cases",
    ("gateway", "api"): "Envoy's route table is generated from the API's one rule table",
    ("mcp", "api"): "the MCP tools convert arguments with the API's converter",
    ("mcp", "client"): "the MCP server reaches memsvc as a gRPC client",
    ("server", "app"): "the gRPC server serves one assembled App",
    ("processes", "server"): "the process tree runs gRPC servers",
    ("cli", "cli_admin"): "the command line's sub-commands",
    ("cli", "cli_cluster"): "the command line's sub-commands",
    ("cli", "cli_models"): "the command line's sub-commands",
    ("cli", "cli_tokens"): "the command line's sub-commands",
    ("cli", "processes"): "`memsvc serve` starts the process tree",
    ("cli", "server"): "`memsvc serve` in one process",
    ("__main__", "cli"): "`python -m memsvc`",
}


def package_graph(root: Path) -> dict[str, set[str]]:
    """Top-level package (or module) of `root` → the ones it imports, from every import
    statement, type-only imports included: a type is a dependency too."""
    name = root.name
    graph: dict[str, set[str]] = {}
    for path in sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts):
        rel = path.relative_to(root)
        source = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if source == "__init__":
            continue
        targets = graph.setdefault(source, set())
        for module, names in _imports(path):
            parts = module.split(".")
            if parts[0] != name:
                continue
            for target in [parts[1]] if len(parts) > 1 else names:
                if target != source and target != "__init__":
                    targets.add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path that ends where it starts, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    rank = {package: i for i, (_, packages) in enumerate(LAYERS) for package in packages}
    out = [f"{package}: in no layer" for package in graph if package not in rank]
    for source, targets in graph.items():
        for target in targets:
            if source not in rank or target not in rank or rank[target] < rank[source]:
                continue
            if rank[target] > rank[source]:
                out.append(f"{source} ({LAYERS[rank[source]][0]}) imports {target} ({LAYERS[rank[target]][0]})")
            elif (source, target) not in SIDEWAYS:
                out.append(f"{source} imports {target}, beside it in {LAYERS[rank[source]][0]}, unlisted")
    return sorted(out)


def test_every_import_points_inward() -> None:
    assert layer_violations(package_graph(PACKAGE)) == []


def test_the_package_graph_has_no_cycle() -> None:
    assert find_cycle(package_graph(PACKAGE)) is None


def test_every_sideways_edge_listed_is_still_used() -> None:
    graph = package_graph(PACKAGE)
    assert [edge for edge in SIDEWAYS if edge[1] not in graph.get(edge[0], set())] == []


def _plant(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_planted_cycle_is_found(tmp_path: Path) -> None:
    """The checks above would pass on a graph they cannot read: a cycle planted across three
    packages (one import inside a function, one type-only) must be reported."""
    root = _plant(
        tmp_path / "memsvc",
        {
            "core/a.py": "from memsvc.storage.b import B\n",
            "storage/b.py": "def f():\n    from memsvc.embedding import c\n",
            "embedding/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import memsvc.core.a\n",
            "kernel/d.py": "X = 1\n",
        },
    )
    graph = package_graph(root)
    assert graph == {"core": {"storage"}, "storage": {"embedding"}, "embedding": {"core"}, "kernel": set()}
    assert find_cycle(graph) == ["core", "storage", "embedding", "core"]
    assert "core (use cases) imports storage (adapters)" in layer_violations(graph)


def test_an_outward_import_and_an_unlisted_sideways_one_are_reported(tmp_path: Path) -> None:
    root = _plant(
        tmp_path / "memsvc",
        {
            "kernel/a.py": "from memsvc import config\n",
            "vectors/b.py": "from memsvc.embedding.x import y\n",
            "embedding/x.py": "y = 1\n",
            "config.py": "",
        },
    )
    assert layer_violations(package_graph(root)) == [
        "kernel (kernel) imports config (configuration)",
        "vectors imports embedding, beside it in adapters, unlisted",
    ]
