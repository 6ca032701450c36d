"""``GET /api/health``: the system as the gateway sees it, for the Control UI's Health page
(operators, behind the token like every ``/api`` route).

- every service of the registry and each of its replicas: the health answers over NATS
  (``sb.health.<service>.replicas``: every replica answers, not one of the queue group), with
  readiness, the failing checks' names and the version; gathered for :data:`GATHER_S`;
- the backlogs of the work queues: JetStream consumer info of the router's (INBOUND), the
  agents' lanes (LANES ``dispatch``) and the executors' (TOOLS ``executor``);
- the dead letters: the DEADLETTER stream's messages per subject.

Bounded in time (each part has its timeout, all run at once); a part that fails is reported as
unavailable with a fixed message, its reason logged, never sent. Model failovers are counted in
the agent's metrics (``sb_agent_failovers_total``), which the gateway cannot read: Prometheus
has them."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from fastapi import APIRouter
from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from switchboard import registry
from switchboard.runtime import ServiceRuntime

log = logging.getLogger(__name__)
GATHER_S = 1.5  # how long the replicas' answers are gathered (a replica evaluates its checks first)
INFO_TIMEOUT_S = 2.0  # one JetStream info request
MAX_REPLIES = 1000  # answers kept (a reply flood cannot grow the answer)
# (what, stream base name, durable consumer): the queues whose backlog the page shows.
QUEUES = (
    ("router", "INBOUND", "router"),
    ("lanes", "LANES", "dispatch"),
    ("executor", "TOOLS", "executor"),
)
UNAVAILABLE = "unavailable: the gateway could not read it (see its log)"


def replica_json(answer: dict[str, Any]) -> dict[str, Any]:
    """A replica's health answer as the API shows it: the failing checks' names only."""
    checks = answer.get("checks")
    failing = [k for k, ok in checks.items() if not ok] if isinstance(checks, dict) else []
    return {
        "instance": str(answer.get("instance", "")),
        "ready": answer.get("ready") is True,
        "failing": sorted(str(k) for k in failing),
        "version": str(answer.get("version") or "unknown"),
    }


async def gather_replicas(rt: ServiceRuntime, window_s: float = GATHER_S) -> list[dict[str, Any]]:
    """Every service of the registry with the replicas that answered within ``window_s``."""
    answers: list[dict[str, Any]] = []
    inbox = rt.nc.new_inbox()

    async def on_reply(msg: Msg) -> None:
        if len(answers) >= MAX_REPLIES:
            return
        try:
            data = json.loads(msg.data)
        except ValueError:
            log.warning("a health answer that is not JSON on %s", msg.subject)
            return
        if isinstance(data, dict):
            answers.append(data)

    sub = await rt.nc.subscribe(inbox, cb=on_reply)
    try:
        for service in registry.SERVICES:
            await rt.nc.publish(rt.subjects.health_replicas(service.name), b"", reply=inbox)
        await rt.nc.flush(timeout=max(1, round(window_s)))
        await asyncio.sleep(window_s)
    finally:
        await sub.unsubscribe()
    services = []
    for service in registry.SERVICES:
        replicas = sorted(
            (replica_json(a) for a in answers if a.get("service") == service.name),
            key=lambda r: str(r["instance"]),
        )
        services.append(
            {
                "name": service.name,
                "ready": bool(replicas) and all(r["ready"] for r in replicas),
                "replicas": replicas,
            }
        )
    return services


async def queue_backlog(rt: ServiceRuntime, what: str, base: str, durable: str) -> dict[str, Any]:
    stream = rt.subjects.stream(base)
    entry: dict[str, Any] = {"queue": what, "stream": stream, "consumer": durable}
    try:
        info = await asyncio.wait_for(
            rt.js.consumer_info(stream, durable, timeout=INFO_TIMEOUT_S), INFO_TIMEOUT_S
        )
    except NotFoundError:
        return {**entry, "error": "no such consumer yet (its service has not started)"}
    except Exception as exc:  # reported as unavailable; the reason stays in the log
        log.warning("could not read the backlog of %s/%s: %r", stream, durable, exc)
        return {**entry, "error": UNAVAILABLE}
    return {
        **entry,
        "pending": int(info.num_pending or 0),
        "ack_pending": int(info.num_ack_pending or 0),
        "redelivered": int(info.num_redelivered or 0),
        "waiting_pulls": int(info.num_waiting or 0),
    }


async def dead_letters(rt: ServiceRuntime) -> dict[str, Any]:
    stream = rt.subjects.stream("DEADLETTER")
    try:
        info = await asyncio.wait_for(
            rt.js.stream_info(stream, subjects_filter=">"), INFO_TIMEOUT_S
        )
    except Exception as exc:  # reported as unavailable; the reason stays in the log
        log.warning("could not read the dead letters (%s): %r", stream, exc)
        return {"stream": stream, "error": UNAVAILABLE}
    subjects = dict(info.state.subjects or {})
    return {
        "stream": stream,
        "messages": int(info.state.messages or 0),
        "subjects": {k: int(v) for k, v in sorted(subjects.items())},
    }


def router(rt: ServiceRuntime) -> APIRouter:
    """The route, answering from ``rt``'s NATS connection."""
    api = APIRouter()

    @api.get("/api/health")
    async def health() -> dict[str, Any]:
        services, dead, *queues = await asyncio.gather(
            gather_replicas(rt),
            dead_letters(rt),
            *(queue_backlog(rt, *q) for q in QUEUES),
        )
        return {
            "ready": all(s["ready"] for s in services),
            "services": services,
            "queues": queues,
            "dead_letters": dead,
            "failovers": None,  # the agent's metric; the gateway cannot read it
        }

    return api
