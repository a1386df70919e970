"""Blocking core calls (SQLite, models) run on the server's worker threads, never on the
event loop; the pool is the loop's default executor, sized by MEMSVC_WORKERS."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from typing import Callable, TypeVar

T = TypeVar("T")


async def run(fn: Callable[..., T], *args, **kwargs) -> T:
    loop = asyncio.get_running_loop()
    # copy_context keeps the request id visible to logs written from the worker thread.
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await loop.run_in_executor(None, call)
