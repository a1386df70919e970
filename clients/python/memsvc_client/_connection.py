"""What both clients share about the connection: the channel options (message sizes, the
retry service config), the bearer-token metadata and the per-call deadline."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc

__all__ = ["DEFAULT_TARGET", "NOT_RETRIED", "RETRIED", "Connection", "RetryPolicy"]

DEFAULT_TARGET = "127.0.0.1:50051"
# The server's own limit (MEMSVC_MAX_MESSAGE_BYTES, default 16 MiB): gRPC's 4 MiB default
# would refuse a page of 200 memories of 32 KiB each that the server is willing to send.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

# Calls the channel retries on UNAVAILABLE: those whose repetition changes nothing a caller
# could tell apart from one run (memsvc has no idempotency key, so no write is safe to send
# twice: a create that reached the server before the connection broke would be stored twice,
# a delete would answer NOT_FOUND the second time). Retrieve and Inject count accesses of
# the memories they return, which a repeat counts again; that is a statistic, not data.
RETRIED: dict[str, tuple[str, ...]] = {
    "memsvc.v1.MemoryService": (
        "ListMemories",
        "GetMemory",
        # A read: each page of a memory's history.
        "GetMemoryHistory",
        # A round trip under a reserved owner that cleans up after itself.
        "CheckHealth",
        "ListRecentFiles",
        "GetRecentFile",
        "ScanLegacy",
    ),
    "memsvc.v1.EngineService": (
        "Retrieve",
        "Inject",
        "RetrievePreview",
        "ListEmbeddingProviders",
        "GetEngineStatus",
    ),
    "memsvc.v1.SettingsService": (
        "GetMemorySettings",
        "GetQdrantSettings",
        "CheckQdrantHealth",
        "SearchQdrant",
        "ListQdrantEmbeddingModels",
        "GetReviewConfig",
        "GetPowerfulMemoryConfig",
    ),
    "memsvc.v1.CredentialService": (
        "ListCredentials",
        "GetCaller",
        # Documented idempotent: revoking a revoked credential succeeds again.
        "RevokeCredential",
    ),
}
# Every other RPC, named so that a new RPC in the protos is a decision (a test checks that
# RETRIED and NOT_RETRIED together name every method, each once).
NOT_RETRIED: dict[str, tuple[str, ...]] = {
    "memsvc.v1.MemoryService": (
        "CreateMemory",
        "CreateMemories",
        "ClearMemories",
        "UpdateMemory",
        "DeleteMemory",
        "SaveRecentFile",
        "AppendRecentMessages",
        "RenameCharacter",
        "PurgeLegacy",
        # A server stream that may run for hours: gRPC would retry it only before its first
        # message, and a broken feed is the caller's to resume from its last token (it alone
        # knows which events it has handled), so the SDK never restarts it behind its back.
        "WatchMemories",
    ),
    # Extract stores facts; Summarize rewrites memories; Reindex starts a job (a second
    # attempt would be refused as REINDEX_RUNNING by the job the first one started).
    "memsvc.v1.EngineService": ("Extract", "Summarize", "Reindex"),
    "memsvc.v1.SettingsService": (
        "UpdateMemorySettings",
        "UpdateQdrantSettings",
        "CleanupQdrant",
        "SetReviewConfig",
        "SetPowerfulMemoryConfig",
    ),
    "memsvc.v1.CredentialService": ("CreateCredential",),
}


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How the channel retries the idempotent calls (`RETRIED`) that end with UNAVAILABLE:
    the server restarting, a connection refused or reset. gRPC waits a random time up to
    `initial_backoff` seconds before the second attempt, and multiplies that bound by
    `multiplier` per attempt up to `max_backoff`; the call's deadline covers every attempt.
    gRPC caps `max_attempts` (the first attempt included) at 5.
    """

    max_attempts: int = 5
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if not 2 <= self.max_attempts <= 5:
            raise ValueError("max_attempts must be 2..5 (gRPC's limit); pass retry=None for no retries")
        if not (self.initial_backoff > 0 and self.max_backoff >= self.initial_backoff and self.multiplier >= 1):
            raise ValueError("backoffs must be positive, max_backoff >= initial_backoff, multiplier >= 1")

    def service_config(self) -> str:
        """The `grpc.service_config` JSON retrying exactly the methods in `RETRIED`."""
        names = [{"service": service, "method": method} for service, methods in RETRIED.items() for method in methods]
        policy = {
            "maxAttempts": self.max_attempts,
            "initialBackoff": _duration(self.initial_backoff),
            "maxBackoff": _duration(self.max_backoff),
            "backoffMultiplier": self.multiplier,
            "retryableStatusCodes": ["UNAVAILABLE"],
        }
        return json.dumps({"methodConfig": [{"name": names, "retryPolicy": policy}]})


def _duration(seconds: float) -> str:
    """A protobuf Duration in JSON ("0.2s"), as the service config wants it."""
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


class Connection:
    """The settings of one client: where, with which token, how long a call may take.

    Both clients build their channel from `channel_options()` and send `metadata` with every
    call: the bearer token travels as call metadata (not grpc call credentials) so that it
    works on the plaintext loopback channel memsvc serves by default as well as over TLS.
    """

    def __init__(
        self,
        target: str,
        *,
        token: str | None,
        api_key_id: str | None,
        tls: bool | grpc.ChannelCredentials,
        timeout: float | None,
        retry: RetryPolicy | None,
        options: Sequence[tuple[str, Any]],
        metadata: Sequence[tuple[str, str]],
    ) -> None:
        if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError("timeout must be a positive number of seconds, or None for no deadline")
        if token is not None and (not token or token != token.strip()):
            raise ValueError("token must be a non-empty string without surrounding whitespace")
        self.target = target
        self.api_key_id = api_key_id
        self.timeout = timeout
        self.retry = retry
        self.credentials: grpc.ChannelCredentials | None = (
            grpc.ssl_channel_credentials() if tls is True else tls if tls is not False else None
        )
        pairs = [(str(k).lower(), str(v)) for k, v in metadata]
        if token is not None:
            pairs.append(("authorization", f"Bearer {token}"))
        self.metadata: tuple[tuple[str, str], ...] = tuple(pairs)
        self._options = list(options)

    def channel_options(self) -> list[tuple[str, Any]]:
        """Message limits and the retry service config, after the caller's `options`: of a
        key given twice, gRPC keeps the first, so the caller's win."""
        base: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ]
        if self.retry is not None:
            base += [("grpc.enable_retries", 1), ("grpc.service_config", self.retry.service_config())]
        else:
            base.append(("grpc.enable_retries", 0))
        return self._options + base

    def deadline(self, timeout: float | None) -> float | None:
        """The timeout of one call: its own when given, else the client's default."""
        chosen = self.timeout if timeout is None else timeout
        if chosen is not None and not chosen > 0:
            raise ValueError("timeout must be a positive number of seconds")
        return chosen

    def owner(self, api_key_id: str | None) -> str:
        """The apiKeyId of one call: its own when given, else the client's default ("" when
        neither: the server then answers INVALID_ARGUMENT where one is required)."""
        return api_key_id if api_key_id is not None else (self.api_key_id or "")
