"""Router metrics."""

from prometheus_client import Counter, Histogram

ROUTED = Counter("sb_router_messages_total", "Inbound messages routed", ["channel", "outcome"])
REFUSED = Counter(
    "sb_router_refused_total",
    "Inbound messages refused by security, never run",
    ["channel", "reason"],
)
ROUTE_SECONDS = Histogram("sb_router_route_seconds", "Time to route one inbound message")
PAIRING = Counter(
    "sb_router_pairing_total",
    "DM and group pairing events: requested (a code sent), approved, denied, revoked",
    ["channel", "event"],
)
