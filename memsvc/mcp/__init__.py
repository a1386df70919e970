"""The MCP server: memsvc's memories for agents (tools, resources, the recall prompt), over
stdio and streamable HTTP.

It is a client of the gRPC API, never of the database: every request is one or two RPCs
carrying the caller's own bearer token, so the server's access rules apply to an agent
exactly as to any other client, and nothing here decides who may see what.
"""
