"""An MCP server's tool as a :class:`~switchboard_tools.registry.Tool` (so its arguments are
validated against its JSON Schema by the registry, as for every built-in tool), and the reading
of a ``tools/call`` result into a :class:`~switchboard_tools.registry.ToolOutput`."""

from __future__ import annotations

import json
import logging
import re
from typing import Any, ClassVar, Protocol

import mcp_types
from jsonschema import Draft202012Validator, SchemaError

from switchboard_tools.mcp.config import McpServerConfig
from switchboard_tools.registry import Tool, ToolContext, ToolOutput

log = logging.getLogger(__name__)

# What model APIs accept as a tool name; a server's tool whose namespaced name is not such a
# name is not offered.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Longest result text handed back to the model (characters).
MAX_RESULT_CHARS = 256 * 1024
SEPARATOR = "__"


class McpServer(Protocol):
    """What a tool needs of its server (``switchboard_tools.mcp.supervisor.McpServer``)."""

    @property
    def name(self) -> str: ...

    # How the server runs (a stdio server's measured isolation); {} when not known.
    isolation: dict[str, Any]

    async def call(self, tool: str, args: dict[str, Any]) -> mcp_types.CallToolResult: ...


def namespaced(server: str, tool: str) -> str:
    return f"{server}{SEPARATOR}{tool}"


class McpTool(Tool):
    """Tool ``remote`` of ``server``, offered as ``<server>__<remote>``. :class:`Tool` keeps a
    tool's name, description and schema as class attributes, so each server tool gets a class
    of its own: make them with :func:`mcp_tool`."""

    groups: ClassVar[tuple[str, ...]] = ("mcp",)

    def __init__(self, server: McpServer, remote: str) -> None:
        self.server = server
        self.remote = remote

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        result = await self.server.call(self.remote, args)
        output = result_output(self.server.name, result)
        if self.server.isolation:
            output.details["isolation"] = self.server.isolation
        return output


def mcp_tool(
    server: McpServer, remote: str, description: str, parameters: dict[str, Any]
) -> McpTool:
    name = namespaced(server.name, remote)
    attributes = {"name": name, "description": description, "parameters": parameters}
    cls: type[McpTool] = type(f"McpTool[{name}]", (McpTool,), attributes)
    return cls(server, remote)


def adapt(server: McpServer, config: McpServerConfig, item: mcp_types.Tool) -> McpTool | None:
    """The listed tool ``item`` as offered (``None``: left out by ``config``'s allow/deny, or
    with a name or input schema a model API would refuse, which is logged)."""
    if not config.offers(item.name):
        return None
    name = namespaced(server.name, item.name)
    schema = item.input_schema
    problem = None
    if not TOOL_NAME.match(name):
        problem = "its name is not a valid tool name"
    elif schema.get("type") != "object":
        problem = "its input schema is not of type object"
    else:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError:
            problem = "its input schema is not a valid JSON Schema"
    if problem is not None:
        log.warning("MCP server %s: tool %r not offered: %s", server.name, item.name, problem)
        return None
    description = item.description or item.title or f"Tool {item.name} of MCP server {server.name}"
    return mcp_tool(server, item.name, description, schema)


def result_output(server: str, result: mcp_types.CallToolResult) -> ToolOutput:
    """The result's text content (other content is named, not inlined; structured content when
    there is no text), an error when the server flagged it as one (its own text, which the MCP
    protocol defines as meant for the model)."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[binary resource {resource.uri} omitted]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource: {block.uri}]")
        else:
            parts.append(f"[{block.type} content ({block.mime_type}) omitted]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[truncated: the result had {len(text)} characters]"
    details: dict[str, Any] = {"mcp_server": server}
    if result.is_error:
        details["error"] = "mcp_tool_error"
        text = text or "The MCP tool reported an error without a message."
    return ToolOutput(text, is_error=bool(result.is_error), details=details)
