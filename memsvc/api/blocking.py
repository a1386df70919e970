"""Blocking core calls (SQLite, models) run on the server's worker threads, never on the
event loop; the pool is the loop's default executor, sized by MEMSVC_WORKERS. The hot path's
reads run on the loop first and move to a worker only when a step would wait
(`run_inline_first`, memsvc.kernel.inline)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from memsvc.kernel.inline import WouldBlock, inline

T = TypeVar("T")
P = ParamSpec("P")
INLINE = "inline"


async def run(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    loop = asyncio.get_running_loop()
    # copy_context keeps the request id visible to logs written from the worker thread.
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await loop.run_in_executor(None, call)


async def run_shielded(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """As `run`, but a cancelled RPC (client gone, deadline passed) does not interrupt the
    call: it runs to the end on its worker thread, whose result is then dropped. For
    commits that must not stop half-way once their checks have passed."""
    task = asyncio.ensure_future(run(fn, *args, **kwargs))
    # Its outcome after a cancellation has nobody to go to; retrieving it keeps asyncio
    # from logging "exception was never retrieved" (the core logs what matters).
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
    return await asyncio.shield(task)


async def run_inline_first(ran: Callable[[str], None], fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn` on the event loop's own thread, unless a step of it would wait (a network call,
    a model, a build, a write, a busy lock): then the whole call runs again on a worker
    thread, as `run` does. For reads only: the first try stops before any side effect.
    `ran` hears where the call ran: INLINE, or the step that sent it to a worker."""
    try:
        with inline():
            result = fn(*args, **kwargs)
    except WouldBlock as exc:
        ran(exc.step)
        return await run(fn, *args, **kwargs)
    ran(INLINE)
    return result
