"""Gateway metrics."""

from prometheus_client import Counter, Histogram

REQUESTS = Counter("sb_gateway_requests_total", "HTTP requests", ["route", "status"])
INBOUND = Counter("sb_inbound_messages_total", "Inbound messages published", ["channel"])
REPLY_SECONDS = Histogram("sb_gateway_reply_seconds", "Inbound message to full reply", ["channel"])
OUTBOUND = Counter(
    "sb_outbound_messages_total", "Reply parts handed to a channel platform", ["channel", "outcome"]
)
