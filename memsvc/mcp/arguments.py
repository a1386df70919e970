"""Tool and prompt arguments checked against the published JSON schema before a tool or a
prompt runs.

An agent corrects a call from the error it gets, so a bad argument must come back as one
plain sentence per problem ("limit: 0 is less than the minimum of 1"), not as a validation
dump. The schema that is checked is the one `tools/list` publishes, so what an agent is told
and what is enforced cannot drift; a `null` argument counts as not given, as agents often
send optional arguments that way; an argument the tool does not know is refused rather than
silently ignored (a misspelled `apiKeyId` must not fall back to a default tenant). A tool's
refusal is a tool result (what the agent reads); a prompt has no result to carry it, so its
refusal is the JSON-RPC INVALID_PARAMS error with the same sentences.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from jsonschema import Draft202012Validator
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent

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


def prompt_schema(prompt: Prompt) -> dict[str, Any]:
    """The schema of a prompt's arguments: each a string (as prompt arguments are), a
    required one not empty, no other."""
    arguments = prompt.arguments or []
    return {
        "type": "object",
        "properties": {a.name: {"type": "string", **({"minLength": 1} if a.required else {})} for a in arguments},
        "required": [a.name for a in arguments if a.required],
        "additionalProperties": False,
    }


def problems(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """One sentence per violation, prefixed by the argument it concerns."""
    out = []
    for error in sorted(Draft202012Validator(schema).iter_errors(arguments), key=lambda e: list(e.path)):
        where = ".".join(str(part) for part in error.path)
        text = f"{where}: {error.message}" if where else error.message
        out.append(text if len(text) <= MAX_PROBLEM_CHARS else text[: MAX_PROBLEM_CHARS - 1] + "…")
    return out


class ArgumentCheck:
    """Server middleware: drops null arguments, then refuses a `tools/call` or `prompts/get`
    whose arguments break the tool's or prompt's schema, naming each problem."""

    def __init__(self, tools: list[Tool], prompts: list[Prompt]):
        self._tools = {tool.name: tool.parameters for tool in tools}
        self._prompts = {prompt.name: prompt_schema(prompt) for prompt in prompts}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if not isinstance(params, Mapping):
            return await call_next(ctx)
        schemas = {"tools/call": self._tools, "prompts/get": self._prompts}.get(ctx.method, {})
        name = params.get("name")
        if not isinstance(name, str) or name not in schemas:
            return await call_next(ctx)
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            return await call_next(ctx)  # malformed request: the SDK's own protocol error
        given = {k: v for k, v in arguments.items() if v is not None}
        found = problems(schemas[name], given)
        if not found:
            return await call_next(replace(ctx, params={**params, "arguments": given}))
        if ctx.method == "prompts/get":
            raise MCPError(code=INVALID_PARAMS, message=f"invalid argument: {'; '.join(found)}")
        # Worded as the SDK words a failing tool, so every refusal reads alike.
        text = f"Error executing tool {name}: invalid argument: {'; '.join(found)}"
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
