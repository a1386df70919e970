"""Memory, backend and Qdrant settings: lenient on read, strict on write."""
