"""Gateway metrics."""

from prometheus_client import Counter, Gauge, Histogram

REQUESTS = Counter("sb_gateway_requests_total", "HTTP requests", ["route", "status"])
# Until the response's handler returns: a streamed reply (SSE) counts until its end.
REQUEST_SECONDS = Histogram("sb_gateway_request_seconds", "HTTP request handling time", ["route"])
INBOUND = Counter("sb_inbound_messages_total", "Inbound messages published", ["channel"])
REPLY_SECONDS = Histogram("sb_gateway_reply_seconds", "Inbound message to full reply", ["channel"])
OUTBOUND = Counter(
    "sb_outbound_messages_total", "Reply parts handed to a channel platform", ["channel", "outcome"]
)
# Channel connections under a lease (channels/lease.py) and Telegram polling (telegram_poll.py).
CHANNEL_LEASE_HELD = Gauge(
    "sb_channel_lease_held", "Channel connection leases this replica holds", ["channel", "account"]
)
POLL_RESTARTS = Counter(
    "sb_channel_poll_restarts_total",
    "Polls of a channel platform abandoned and started again",
    ["channel", "account", "reason"],
)
POLL_HEALTHY = Gauge(
    "sb_channel_poll_healthy",
    "1 while this replica polls the platform and its last poll succeeded",
    ["channel", "account"],
)
