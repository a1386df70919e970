"""Use cases: memories, retrieval, injection, extraction, settings, reindex. Built on the kernel only: no gRPC, no SQL, no concrete adapter; adapters are passed in by `memsvc.app`."""
