"""Structured logging: one JSON object per line, carrying the current request id.

The request id lives in a contextvar set by the API's request interceptor, so anything
logged while serving a request (core included) is correlated without passing it around.
Memory contents and secrets are never logged at INFO: callers log ids and counts.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from datetime import UTC, datetime

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("memsvc_request_id", default=None)

_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def __init__(self, with_process: bool = False):
        super().__init__()
        self._with_process = with_process

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        if self._with_process:  # several server processes write to one stderr
            entry["process"] = record.process
        rid = request_id_var.get()
        if rid:
            entry["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure(level: str = "INFO", with_process: bool = False) -> None:
    """Route the root logger to stderr as JSON lines. Safe to call more than once.
    `with_process`: each line names the process (pid) that wrote it."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(with_process))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
