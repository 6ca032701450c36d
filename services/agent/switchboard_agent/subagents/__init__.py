"""Sub-agents: a run hands tasks to child sessions (``sessions_spawn``), and the
session tools that list, read and message sessions."""
