"""The OAuth tests' authorization server is scripts/oauth_dev_server.py, the one a person
starts to try memsvc's OAuth locally (README, docs/auth.md): one implementation, so what the
tests prove is what the documented example runs. scripts/ is no package, so the file is
loaded by its path; it is registered in sys.modules first because its dataclasses look their
module up there while they are built."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "oauth_dev_server.py"
MODULE_NAME = "oauth_dev_server"


def _load() -> ModuleType:
    if MODULE_NAME in sys.modules:
        return sys.modules[MODULE_NAME]
    spec = importlib.util.spec_from_file_location(MODULE_NAME, SCRIPT)
    assert spec is not None and spec.loader is not None, SCRIPT
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    spec.loader.exec_module(module)
    return module


_script = _load()
Client = _script.Client
OAuthServer = _script.OAuthServer

__all__ = ["Client", "OAuthServer"]
