"""memsvc: conversation memory for LLM gateways and companion apps."""
