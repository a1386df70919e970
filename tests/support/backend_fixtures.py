"""pytest fixtures for the backend stand-ins (import them into a test module to use them):
a fresh loopback Obsidian Local REST API and Notion API per test, stopped after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.fake_notion import FakeNotion
from support.fake_obsidian import FakeObsidian


@pytest.fixture
def obsidian() -> Iterator[FakeObsidian]:
    with FakeObsidian() as api:
        yield api


@pytest.fixture
def notion() -> Iterator[FakeNotion]:
    with FakeNotion() as api:
        yield api
