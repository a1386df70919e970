"""The core's exceptions. They know nothing of gRPC: `memsvc.api.errors` maps each class to
a status code and rich details in one place."""

from __future__ import annotations

import errno
from dataclasses import dataclass, field


@dataclass(frozen=True)
class FieldViolation:
    field: str
    description: str


def shorten(value: str, limit: int = 80) -> str:
    """User input quoted in a message is cut: error text travels in gRPC trailers, and an
    echoed 20 KB id would turn NOT_FOUND into a header-size failure."""
    return value if len(value) <= limit else value[:limit] + "…"


class MemsvcError(Exception):
    """Base class; `reason` is the stable machine-readable code clients may switch on."""

    reason: str = "ERROR"

    def __init__(self, message: str, *, reason: str | None = None, metadata: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        self.metadata: dict[str, str] = dict(metadata or {})


class ValidationError(MemsvcError):
    """Bad input. Carries every violation found, not just the first."""

    reason = "INVALID_ARGUMENT"

    def __init__(self, violations: list[FieldViolation] | FieldViolation, message: str | None = None):
        items = [violations] if isinstance(violations, FieldViolation) else list(violations)
        text = message or "; ".join(f"{v.field}: {v.description}" for v in items)
        super().__init__(text)
        self.violations = items

    @classmethod
    def single(cls, field_name: str, description: str) -> ValidationError:
        return cls(FieldViolation(field_name, description))


class NotFoundError(MemsvcError):
    reason = "NOT_FOUND"


class ConflictError(MemsvcError):
    """The request cannot apply to the current state (snapshot conflict, partial rename...)."""

    reason = "CONFLICT"


class PreconditionError(MemsvcError):
    """The system is not in a state where this can run (no embedding source, ...)."""

    reason = "FAILED_PRECONDITION"


class PermissionDeniedError(MemsvcError):
    reason = "PERMISSION_DENIED"


class UnavailableError(MemsvcError):
    """A dependency is down and no fallback exists."""

    reason = "UNAVAILABLE"


class StorageFullError(MemsvcError):
    """The data directory's filesystem (or the database's size limit) has no room for the
    write. The write did not happen and nothing stored before it is lost; the same request
    succeeds once space is freed, without a restart."""

    reason = "STORAGE_FULL"

    @classmethod
    def no_space(cls) -> StorageFullError:
        return cls(
            "storage is full (no space left in the data directory): the write was not made; free space and retry"
        )


# Errno values that mean "no room to write": the disk, or the user's quota, is full.
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def storage_full(exc: BaseException) -> StorageFullError | None:
    """`exc` as a StorageFullError when it is one, or an OSError saying there is no space
    (a history file, a registry, anything written under the data directory), else None."""
    if isinstance(exc, StorageFullError):
        return exc
    if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
        return StorageFullError.no_space()
    return None


class OperationFailedError(MemsvcError):
    """A multi-step operation failed part-way (and was rolled back, or says what was not).

    Unlike a bug, its message is composed for the client ("rename failed at step registry:
    ...; rolled back"), so the API keeps it instead of sanitizing it away.
    """

    reason = "OPERATION_FAILED"


class StorageVersionError(MemsvcError):
    """The database was written by a newer memsvc; refusing to touch it."""

    reason = "SCHEMA_TOO_NEW"


@dataclass
class Violations:
    """Collects violations so a validator can report all of them at once."""

    items: list[FieldViolation] = field(default_factory=list)

    def add(self, field_name: str, description: str) -> None:
        self.items.append(FieldViolation(field_name, description))

    def raise_if_any(self) -> None:
        if self.items:
            raise ValidationError(self.items)
