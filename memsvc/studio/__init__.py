"""Memory Studio: the web dashboard's static files (HTML, CSS and JavaScript modules, no
build step), shipped as package data and answered by the REST gateway at /studio/. The page
calls only the documented REST routes, on the same origin, with the bearer token the person
signs in with."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

# What the gateway serves from this folder; anything else here (this module, caches) is not.
SERVED_SUFFIXES = (".html", ".css", ".js", ".svg")


def package_dir() -> Path:
    """The installed folder of the static files (absolute, links resolved), which Envoy
    reads at start-up."""
    return Path(str(resources.files(__name__))).resolve()


def file_names() -> list[str]:
    """The served files' names, sorted so the generated gateway config is stable."""
    return sorted(p.name for p in package_dir().iterdir() if p.is_file() and p.suffix in SERVED_SUFFIXES)
