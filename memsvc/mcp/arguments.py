"""Tool arguments checked against the published JSON schema before a tool runs.

An agent corrects a call from the error it gets, so a bad argument must come back as one
plain sentence per problem ("limit: 0 is less than the minimum of 1"), not as a validation
dump. The schema that is checked is the one `tools/list` publishes, so what an agent is told
and what is enforced cannot drift; a `null` argument counts as not given, as agents often
send optional arguments that way; an argument the tool does not know is refused rather than
silently ignored (a misspelled `apiKeyId` must not fall back to a default tenant).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from jsonschema import Draft202012Validator
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent

MAX_PROBLEM_CHARS = 200


def plain_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The generated schema without what only Python needs: `X | None` becomes X (null means
    absent), `title` and `default: null` go, unknown properties are refused."""
    properties = {}
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        branches = [b for b in prop.pop("anyOf", []) if b.get("type") != "null"]
        if len(branches) == 1:
            prop = {**branches[0], **prop}
        prop.pop("title", None)
        if prop.get("default", 0) is None:
            prop.pop("default")
        properties[name] = prop
    out = {"type": "object", "properties": properties, "additionalProperties": False}
    if schema.get("required"):
        out["required"] = list(schema["required"])
    return out


def problems(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """One sentence per violation, prefixed by the argument it concerns."""
    out = []
    for error in sorted(Draft202012Validator(schema).iter_errors(arguments), key=lambda e: list(e.path)):
        where = ".".join(str(part) for part in error.path)
        text = f"{where}: {error.message}" if where else error.message
        out.append(text if len(text) <= MAX_PROBLEM_CHARS else text[: MAX_PROBLEM_CHARS - 1] + "…")
    return out


class ArgumentCheck:
    """Server middleware: drops null arguments, then refuses a `tools/call` whose arguments
    break the tool's schema with an error result naming each problem."""

    def __init__(self, tools: list[Tool]):
        self._schemas = {tool.name: tool.parameters for tool in tools}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if ctx.method != "tools/call" or not isinstance(params, Mapping) or params.get("name") not in self._schemas:
            return await call_next(ctx)
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            return await call_next(ctx)  # malformed request: the SDK's own protocol error
        given = {k: v for k, v in arguments.items() if v is not None}
        found = problems(self._schemas[params["name"]], given)
        if found:
            # Worded as the SDK words a failing tool, so every refusal reads alike.
            text = f"Error executing tool {params['name']}: invalid argument: {'; '.join(found)}"
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        return await call_next(replace(ctx, params={**params, "arguments": given}))
