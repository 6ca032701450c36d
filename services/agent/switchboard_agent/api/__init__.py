"""What the agent serves to the other services: the gRPC Sessions, Approvals and
ToolAccess services, and the chat commands the router sends on NATS (``/new``,
``/compact``...). They sit above the features they combine."""
