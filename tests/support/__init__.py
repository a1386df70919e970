"""Test helpers (stand-ins for external paid APIs only)."""
