"""Qdrant, the opt-in vector tier 2. The protocol every vector tier implements is a kernel
port (`memsvc.kernel.vector_index`); the sqlite-vec index (tier 1, embedded) is storage and
lives in `memsvc.storage`, so one package owns every SQL statement. No grpc here."""
