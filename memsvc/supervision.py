"""Keeping a child process running: the restart loop shared by the Envoy gateway and the
gRPC worker processes of `memsvc serve`.

A child that exits while the server runs is logged, reported, and started again after a
backoff; once the backoffs are used up without the child staying up for `stable_s`, the
supervisor gives up with an error, which stops the server (a child that cannot stay up is a
fault an operator must see, not something to retry forever).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class RestartPolicy:
    """A child is restarted after each wait in `backoff_s`; once they are used up without it
    staying up for `stable_s`, it is given up (and `memsvc serve` exits)."""

    backoff_s: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)
    stable_s: float = 60.0


class Child(Protocol):
    """What a supervisor needs of a child: start it, wait until it serves, stop it."""

    process: subprocess.Popen | None

    @property
    def pid(self) -> int | None: ...

    def spawn(self) -> None: ...

    def wait_ready(self) -> int: ...

    def stop(self) -> None: ...


class Supervisor:
    """Keeps one child running: `start` must succeed, `run` watches it until `stop`.

    `on_state(up)` is awaited whenever the child goes down or comes back. Events are logged
    under `name`: <name>.exited, <name>.restart_failed, <name>.restarted. `error` is the
    exception type of a child that cannot start or keeps exiting."""

    def __init__(
        self,
        name: str,
        child: Child,
        on_state: Callable[[bool], Awaitable[None]],
        error: type[Exception],
        logger: logging.Logger,
        policy: RestartPolicy = RestartPolicy(),
    ):
        self.name = name
        self.child = child
        self._on_state = on_state
        self._error = error
        self._log = logger
        self._policy = policy
        self._stopping = False
        self._up_since = 0.0

    async def start(self) -> int:
        """Start the child and wait until it serves; `error` if it cannot."""
        self.child.spawn()  # on the event loop's thread, which lives as long as the server
        loop = asyncio.get_running_loop()
        try:
            port = await loop.run_in_executor(None, self.child.wait_ready)
        except self._error:
            await loop.run_in_executor(None, self.child.stop)
            raise
        self._up_since = time.monotonic()
        return port

    async def run(self) -> None:
        """Watch the child until `stop`; raises `error` once restarts are used up."""
        attempts = 0
        while True:
            code = await self._exited()
            if self._stopping:
                return
            if time.monotonic() - self._up_since >= self._policy.stable_s:
                attempts = 0
            self._log.error(
                f"{self.name}.exited",
                extra={
                    "pid": self.child.pid,
                    "exit_code": code,
                    "restarts_left": len(self._policy.backoff_s) - attempts,
                },
            )
            await self._on_state(False)
            attempts = await self._restart(attempts)
            if self._stopping:
                return
            self._log.warning(
                f"{self.name}.restarted", extra={"pid": self.child.pid, "attempt": attempts, **self.restarted_fields()}
            )
            await self._on_state(True)

    def restarted_fields(self) -> dict[str, object]:
        """Extra fields of the <name>.restarted event."""
        return {}

    def gave_up(self, attempts: int) -> Exception:
        """The error `run` raises once `attempts` restarts did not keep the child up."""
        return self._error(f"{self.name} exited and was restarted {attempts} times without staying up")

    async def _restart(self, attempts: int) -> int:
        """Retry with backoff until the child is ready again; returns the attempts used so far."""
        while attempts < len(self._policy.backoff_s):
            await asyncio.sleep(self._policy.backoff_s[attempts])
            attempts += 1
            if self._stopping:
                return attempts
            try:
                await self.start()
                return attempts
            except self._error as exc:
                self._log.error(f"{self.name}.restart_failed", extra={"attempt": attempts, "error": str(exc)})
        raise self.gave_up(attempts)

    async def _exited(self) -> int:
        process = self.child.process
        assert process is not None
        while (code := process.poll()) is None:
            await asyncio.sleep(0.1)
        return code

    async def stop(self) -> None:
        self._stopping = True
        await asyncio.get_running_loop().run_in_executor(None, self.child.stop)
