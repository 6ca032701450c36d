"""The agent's side of memory: the memory service client, whose memory a run
reads (scope), the memory tools, and what the agent indexes on its own."""
