"""Generated from proto/memsvc/v1 by scripts/generate.py; do not edit."""
