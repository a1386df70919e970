"""The kernel: what every other package may import and what imports nothing else of memsvc.

Plain domain objects and their exceptions, the ports the use cases call through (the memory
backend, the vector index, the embedding errors) and the pure helpers they share (terms and
tokens, time phrases, the outbound URL policy, the inline/blocking rule, a TTL cache).
Use cases (`memsvc.core`) sit on it; adapters (storage, embedding, vectors, backends, api,
mcp, gateway) sit at the edge; dependencies point inward."""
