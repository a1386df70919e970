"""Generated from proto/ by scripts/generate.py for the memsvc-client SDK; do not edit."""
