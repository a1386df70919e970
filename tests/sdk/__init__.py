"""The Python SDK (clients/python, memsvc_client) through the real memsvc gRPC server."""
