"""The gRPC surface: servicers, wire ⇄ domain conversion, interceptors and the one error
mapping. Nothing here opens the database."""
