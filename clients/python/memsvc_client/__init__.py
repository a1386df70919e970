"""memsvc-client: the Python SDK of memsvc, conversation memory for LLM apps.

    from memsvc_client import Memsvc

    with Memsvc("127.0.0.1:50051", api_key_id="user-42") as memsvc:
        memsvc.memories.add("I prefer dark mode in my editor")
        print([m.content for m in memsvc.retrieve("which theme do I like?")])

`Memsvc` is the synchronous client, `AsyncMemsvc` the asyncio one; both speak gRPC through
the stubs shipped in this package (no server package needed). Failed calls raise the
subclasses of `MemsvcError` in `memsvc_client.errors`; results are the frozen dataclasses of
`memsvc_client.types`.
"""

from memsvc_client._connection import RetryPolicy
from memsvc_client.aio import AsyncHistoryIterator, AsyncMemsvc, AsyncReindexStream, AsyncWatchStream
from memsvc_client.client import HistoryIterator, Memsvc, ReindexStream, Stubs, WatchStream
from memsvc_client.errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    Conflict,
    DeadlineExceeded,
    FailedPrecondition,
    FieldViolation,
    Internal,
    InvalidArgument,
    MemsvcError,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from memsvc_client.types import (
    AddResult,
    BatchItem,
    BatchResult,
    ExtractedFact,
    ExtractResult,
    HistoryEntry,
    InjectResult,
    Memory,
    MemoryEvent,
    MemoryHistory,
    MemoryPage,
    MemorySettings,
    MemoryStats,
    NewMemory,
    ReindexProgress,
    Resolution,
    RetrievedMemory,
    RetrieveResult,
)

__version__ = "0.1.0"

__all__ = [
    "Aborted",
    "AddResult",
    "AlreadyExists",
    "AsyncHistoryIterator",
    "AsyncMemsvc",
    "AsyncReindexStream",
    "AsyncWatchStream",
    "BatchItem",
    "BatchResult",
    "Cancelled",
    "Conflict",
    "DeadlineExceeded",
    "ExtractResult",
    "ExtractedFact",
    "FailedPrecondition",
    "FieldViolation",
    "HistoryEntry",
    "HistoryIterator",
    "InjectResult",
    "Internal",
    "InvalidArgument",
    "Memory",
    "MemoryEvent",
    "MemoryHistory",
    "MemoryPage",
    "MemorySettings",
    "MemoryStats",
    "Memsvc",
    "MemsvcError",
    "NewMemory",
    "NotFound",
    "PermissionDenied",
    "ReindexProgress",
    "ReindexStream",
    "Resolution",
    "ResourceExhausted",
    "RetrieveResult",
    "RetrievedMemory",
    "RetryPolicy",
    "Stubs",
    "Unauthenticated",
    "Unavailable",
    "WatchStream",
]
