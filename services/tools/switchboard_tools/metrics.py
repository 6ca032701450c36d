"""Tool executor metrics."""

from prometheus_client import Counter, Gauge, Histogram

EXECUTIONS = Counter("sb_tool_executions_total", "Tool executions", ["tool", "outcome"])
EXECUTION_SECONDS = Histogram("sb_tool_execution_seconds", "Tool execution time", ["tool"])
BUSY_SLOTS = Gauge("sb_tools_busy_slots", "Executor slots in use on this replica")
