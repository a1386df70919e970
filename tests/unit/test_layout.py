"""The package layout's rules, checked on the source: a line of code knows from its folder
what it may touch. `core/` never imports grpc, `api/` never reaches SQLite, only `storage/`
imports the SQLite binding, and no module imports another module's private names."""

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
    return [f"{path.relative_to(PACKAGE)}: {module}" for path in _modules(folder) for module, _ in _imports(path)
            if any(module == f or module.startswith(f + ".") for f in forbidden)]


def test_core_imports_no_grpc_and_no_sqlite() -> None:
    assert _offenders("core", ("grpc", "apsw", "sqlite3", "sqlite_vec", "memsvc.api")) == []


def test_api_does_not_reach_sqlite() -> None:
    assert _offenders("api", ("apsw", "sqlite3", "sqlite_vec", "memsvc.storage")) == []


def test_only_storage_imports_the_sqlite_binding() -> None:
    outside = [p for p in _modules() if "storage" not in p.relative_to(PACKAGE).parts]
    found = [f"{p.relative_to(PACKAGE)}: {m}" for p in outside for m, _ in _imports(p)
             if m.split(".")[0] in ("apsw", "sqlite3")]
    assert found == []


def test_only_storage_imports_the_postgresql_driver() -> None:
    outside = [p for p in _modules() if "storage" not in p.relative_to(PACKAGE).parts]
    found = [f"{p.relative_to(PACKAGE)}: {m}" for p in outside for m, _ in _imports(p)
             if m.split(".")[0] in ("psycopg", "psycopg_pool", "pgvector")]
    assert found == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_another_modules_private_names(path: Path) -> None:
    """A private module (`memsvc.embedding._http`) may serve its own package; a private
    name of one module is that module's alone."""
    package = ".".join(("memsvc", *path.relative_to(PACKAGE).parent.parts))
    private = [f"{module}.{name}" for module, names in _imports(path) if module.startswith("memsvc")
               for name in names if name.startswith("_") and not name.startswith("__")
               and not (module == package and (PACKAGE.parent / module.replace(".", "/") / f"{name}.py").is_file())]
    assert private == []
