"""What the agent publishes: a committed run's reply as chat-sized parts on
OUTBOUND, single chat parts (the message tool, approval notices), and run events."""
