"""JSON log lines carrying the current trace and span ids."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any

from opentelemetry import trace

from .telemetry import current_service

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line; ``service`` is the service whose task logged (a process may
    host several), else the process's name. Times in UTC."""

    converter = staticmethod(time.gmtime)

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "service": current_service() or self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            line["trace_id"] = format(span.trace_id, "032x")
            line["span_id"] = format(span.span_id, "016x")
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def setup_logging(
    service: str, level: str = "INFO", json_lines: bool = True, stream: IO[str] | None = None
) -> None:
    """Process-wide: every record to ``stream`` (stderr by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    if json_lines:
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # websockets logs whole frames at DEBUG: the Discord gateway's IDENTIFY carries the bot token.
    for noisy in ("httpx", "httpx2", "httpcore", "nats", "uvicorn.access", "websockets"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    # mcp: a line per MCP request ("Terminating session: None"); the gateway logs each request
    logging.getLogger("mcp.server.streamable_http").setLevel(max(logging.WARNING, root.level))
