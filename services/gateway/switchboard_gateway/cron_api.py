"""Scheduled jobs for operators (``/api/cron``), served by the scheduler's gRPC ``Scheduler``:
list and add jobs, read, change and remove one, run one now.

A job is JSON: ``{"name", "kind", "cron", "timezone", "every", "at", "agent", "session_key",
"message", "url", "path", "body_json", "deliver_to": {"channel", "to", "account", "thread",
"chat_type"}, "enabled", "missed", "urgent"}`` (``every``: ``30s``, ``1h30m``; ``at``: ISO 8601
or ``+10m``); the answer adds ``next_run``, ``last_run``, ``last_result``, ``last_error``,
``runs``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

import grpc
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from switchboard import scheduling
from switchboard.errors import InvalidSchedule
from switchboard.v1 import messages_pb2, scheduler_pb2, scheduler_pb2_grpc

from .errors import SCHEDULER, ApiError, backend_error
from .hooks_config import Deliver

router = APIRouter(prefix="/api/cron")
TIMEOUT_S = 10.0
RUN_TIMEOUT_S = 60.0  # a webhook or a watched URL answers within the scheduler's fetch timeout


class JobBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, pattern=scheduling.JOB_NAME_PATTERN)
    kind: Literal["message", "heartbeat", "webhook", "watch_url", "watch_file"] | None = None
    cron: str | None = Field(default=None, max_length=200)
    timezone: str | None = Field(default=None, max_length=64)
    every: str | None = Field(default=None, max_length=32)
    at: str | None = Field(default=None, max_length=64)
    agent: str | None = Field(default=None, max_length=64)
    session_key: str | None = Field(default=None, max_length=256)
    message: str | None = Field(default=None, max_length=20_000)
    url: str | None = Field(default=None, max_length=2048)
    path: str | None = Field(default=None, max_length=512)
    body_json: str | None = Field(default=None, max_length=65_536)
    deliver_to: Deliver | None = None
    enabled: bool | None = None
    missed: Literal["skip", "run_once"] | None = None
    urgent: bool | None = None


def _stub(request: Request) -> scheduler_pb2_grpc.SchedulerStub:
    stub: scheduler_pb2_grpc.SchedulerStub = request.app.state.scheduler
    return stub


def _iso(ms: int) -> str | None:
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def job_json(j: scheduler_pb2.Job) -> dict[str, Any]:
    target = j.deliver_to
    return {
        "name": j.name,
        "kind": j.kind,
        "cron": j.cron or None,
        "timezone": j.timezone or None,
        "every": scheduling.format_duration_ms(j.every_ms) if j.every_ms else None,
        "at": _iso(j.at_ms),
        "agent": j.agent,
        "session_key": j.session_key or f"cron:{j.name}",
        "message": j.message,
        "url": j.url or None,
        "path": j.path or None,
        "deliver_to": {"channel": target.channel, "to": target.chat.id, "account": target.account}
        if target.channel
        else None,
        "enabled": j.enabled,
        "missed": j.missed,
        "urgent": j.urgent,
        "next_run": _iso(j.next_run_ms),
        "last_run": _iso(j.last_run_ms),
        "last_result": j.last_result,
        "last_error": j.last_error,
        "runs": j.runs,
    }


def to_proto(body: JobBody) -> tuple[scheduler_pb2.Job, list[str]]:
    """The proto job and the fields the body set (for Update)."""
    given = body.model_dump(exclude_none=True)
    job = scheduler_pb2.Job()
    fields: list[str] = []
    try:
        for key, value in given.items():
            if key == "every":
                job.every_ms, key = scheduling.parse_duration_ms(value), "every_ms"
            elif key == "at":
                job.at_ms, key = scheduling.parse_at_ms(value), "at_ms"
            elif key == "deliver_to":
                d = body.deliver_to
                assert d is not None
                job.deliver_to.CopyFrom(
                    messages_pb2.DeliveryTarget(
                        channel=d.channel,
                        account=d.account,
                        chat=messages_pb2.ChatRef(id=d.to, type=d.chat_type),
                        thread_id=d.thread,
                    )
                )
            else:
                setattr(job, key, value)
            fields.append(key)
    except InvalidSchedule as exc:
        raise ApiError(400, str(exc), param=key) from exc
    return job, fields


@router.get("")
async def list_jobs(request: Request, agent: str = "", session_key: str = "") -> dict[str, Any]:
    try:
        reply = await _stub(request).List(
            scheduler_pb2.ListJobsRequest(agent=agent, session_key=session_key),
            timeout=TIMEOUT_S,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, SCHEDULER, "List") from exc
    return {"jobs": [job_json(j) for j in reply.jobs]}


@router.post("", status_code=201)
async def add_job(body: JobBody, request: Request) -> dict[str, Any]:
    if not body.name:
        raise ApiError(400, "a job needs a name", param="name")
    job, _ = to_proto(body)
    try:
        added = await _stub(request).Add(job, timeout=TIMEOUT_S)
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, SCHEDULER, "Add") from exc
    return job_json(added)


@router.get("/{name}")
async def job_status(name: str, request: Request) -> dict[str, Any]:
    try:
        job = await _stub(request).Status(scheduler_pb2.JobName(name=name), timeout=TIMEOUT_S)
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, SCHEDULER, "Status") from exc
    return job_json(job)


@router.patch("/{name}")
async def update_job(name: str, body: JobBody, request: Request) -> dict[str, Any]:
    if body.name not in (None, name) or body.kind is not None:
        raise ApiError(400, "a job's name and kind cannot change; add a new job instead")
    job, fields = to_proto(body)
    try:
        updated = await _stub(request).Update(
            scheduler_pb2.UpdateJobRequest(name=name, job=job, fields=fields), timeout=TIMEOUT_S
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, SCHEDULER, "Update") from exc
    return job_json(updated)


@router.delete("/{name}")
async def remove_job(name: str, request: Request) -> dict[str, Any]:
    try:
        removed = await _stub(request).Remove(scheduler_pb2.JobName(name=name), timeout=TIMEOUT_S)
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, SCHEDULER, "Remove") from exc
    return job_json(removed)


@router.post("/{name}/run")
async def run_job(name: str, request: Request) -> dict[str, Any]:
    try:
        ran = await _stub(request).RunNow(scheduler_pb2.JobName(name=name), timeout=RUN_TIMEOUT_S)
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, SCHEDULER, "RunNow") from exc
    return {"job": job_json(ran.job), "result": ran.result, "error": ran.error or None}
