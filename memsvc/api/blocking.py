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


async def run_shielded(fn: Callable[..., T], *args, **kwargs) -> T:
    """As `run`, but a cancelled RPC (client gone, deadline passed) does not interrupt the
    call: it runs to the end on its worker thread, whose result is then dropped. For
    commits that must not stop half-way once their checks have passed."""
    task = asyncio.ensure_future(run(fn, *args, **kwargs))
    # Its outcome after a cancellation has nobody to go to; retrieving it keeps asyncio
    # from logging "exception was never retrieved" (the core logs what matters).
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
    return await asyncio.shield(task)
