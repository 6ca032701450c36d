"""Tool executor metrics."""

from prometheus_client import Counter, Gauge, Histogram

EXECUTIONS = Counter("sb_tool_executions_total", "Tool executions", ["tool", "outcome"])
EXECUTION_SECONDS = Histogram("sb_tool_execution_seconds", "Tool execution time", ["tool"])
BUSY_SLOTS = Gauge("sb_tools_busy_slots", "Executor slots in use on this replica")
MCP_CALLS = Counter(
    "sb_mcp_calls_total", "Calls of MCP server tools by outcome", ["server", "outcome"]
)
MCP_CONNECTS = Counter(
    "sb_mcp_connects_total", "Connections (starts) of MCP servers by outcome", ["server", "outcome"]
)
MCP_TOOLS = Gauge("sb_mcp_tools", "Tools an MCP server offers (after allow/deny)", ["server"])
