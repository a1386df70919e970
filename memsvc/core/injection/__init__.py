"""Inject: where retrieved memories go in each provider's chat request body."""
