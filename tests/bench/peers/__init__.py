"""`make bench-peers`: Switchboard and nanobot side by side, in one run, on the same work.

Each peer answers through its OpenAI-compatible chat API, against its own instant fake model
(``tests/fakes/llm.py``, ``tool_then_text``): one user message, one cheap built-in tool call,
the reply. Nanobot runs from its own virtualenv (``.venv-peers``) as a subprocess and is never
imported here. See docs/peers.md.
"""
