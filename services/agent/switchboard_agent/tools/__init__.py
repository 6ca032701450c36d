"""Tools as the agent sees them: the executor client, agent-local tools, the tool
policy, and the ``cron`` and ``message`` tools."""
