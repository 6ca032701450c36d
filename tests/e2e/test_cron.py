"""Scheduled jobs the way an operator and the agent use them, against `switchboard up` with a
scripted fake model: `switchboard cron add|list --json|run|rm` through the gateway to the
scheduler, the fired event going through the router and the lane to the agent, whose reply is
recorded (or delivered to the job's chat); a heartbeat that answers HEARTBEAT_OK delivers
nothing; the agent's `cron` tool through POST /tools/invoke (sub-agents denied)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from switchboard.embedded import free_port
from switchboard.v1 import messages_pb2
from tests.e2e.helpers import client, final_text, history, wait_for
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.stack import Stack, start_stack, stop_stack
from tests.support.streams import outbound_parts


def script(req: FakeRequest) -> Reply:
    """A heartbeat whose HEARTBEAT.md says nothing needs doing answers the no-op token; other
    runs echo what they were told."""
    if "## HEARTBEAT.md" in req.system and "nothing to do" in req.system:
        return Reply(text="HEARTBEAT_OK")
    return Reply(text="noted: " + req.last_user_text.splitlines()[-1])


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    # Not under pytest's tmp tree (see tests/support/servers.py: pgserver and root).
    home = Path(tempfile.mkdtemp(prefix="sb-cron-"))
    with FakeLLM(script) as llm:
        env = {
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": f"{llm.base_url}/v1",
            "SB_NATS_PORT": str(free_port()),  # known, so the test can read OUTBOUND
        }
        s = start_stack(home / "home", env, timeout=120)
        s.nats_url = f"nats://127.0.0.1:{env['SB_NATS_PORT']}"  # type: ignore[attr-defined]
        try:
            yield s
        finally:
            stop_stack(s)
            shutil.rmtree(home, ignore_errors=True)


def cron(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SB_")},
        "SB_HOME": str(stack.home),
        "SB_HTTP_PORT": str(stack.http_port),
        "SB_GATEWAY_TOKEN": stack.token,  # the stack was given one (no token file)
    }
    return subprocess.run(
        [sys.executable, "-m", "switchboard.cli.main", "cron", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def parts(stack: Stack) -> list[messages_pb2.OutboundMessage]:
    async def read() -> list[messages_pb2.OutboundMessage]:
        nc = await nats.connect(stack.admin_nats_url(stack.nats_url))  # type: ignore[attr-defined]
        try:
            return [m for _, m in await outbound_parts(nc.jetstream())]
        finally:
            await nc.close()

    return asyncio.run(read())


def test_cron_cli_adds_lists_runs_and_removes_jobs_the_agent_answers(stack: Stack) -> None:
    bad = cron(stack, "add", "bad", "--cron", "61 * * * *", "--message", "x")
    assert bad.returncode == 1
    assert "400: invalid cron expression '61 * * * *'" in bad.stderr, bad.stderr
    key = "main:api:digest"
    added = cron(
        stack, "add", "digest", "--every", "1h30m", "--session", key, "--message", "sum up"
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("added digest: every 1h30m, next run ")
    soon = cron(
        stack, "add", "soon", "--at", "+2s", "--session", "main:api:soon", "--message", "hi"
    )
    assert soon.returncode == 0, soon.stderr

    listed = cron(stack, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    jobs = {j["name"]: j for j in json.loads(listed.stdout)}
    assert jobs["digest"]["every"] == "1h30m" and jobs["digest"]["session_key"] == key
    assert jobs["soon"]["at"] is not None

    ran = cron(stack, "run", "digest")
    assert (ran.returncode, ran.stdout.strip()) == (0, "ran digest: published"), ran.stderr
    with client(stack.url, stack.token) as c:
        # The fired event went router -> lane -> agent; the model's answer is in the session.
        assert wait_for(lambda: final_text(c, key), timeout=60) == "noted: sum up"
        first = history(c, key)[0]["content"][0]["text"]
        assert first.startswith("[Scheduled job 'digest', due ")
        # The one-shot fired on its own schedule.
        assert wait_for(lambda: final_text(c, "main:api:soon"), timeout=60) == "noted: hi"

    after = {j["name"]: j for j in json.loads(cron(stack, "list", "--json").stdout)}
    assert after["digest"]["runs"] == 1 and after["digest"]["enabled"]
    assert (after["soon"]["runs"], after["soon"]["enabled"]) == (1, False)
    assert cron(stack, "rm", "digest").stdout.strip() == "removed digest"
    missing = cron(stack, "rm", "digest")
    assert missing.returncode == 1 and "404: no job named 'digest'" in missing.stderr
    assert [j["name"] for j in json.loads(cron(stack, "list", "--json").stdout)] == ["soon"]


def test_a_heartbeat_that_answers_heartbeat_ok_delivers_nothing(stack: Stack) -> None:
    workspace = stack.home / "workspaces" / "main"  # embedded mode's: $SB_HOME/workspaces
    workspace.mkdir(parents=True, exist_ok=True)
    heartbeat = workspace / "HEARTBEAT.md"
    heartbeat.write_text("Check the plants; if they are fine there is nothing to do.\n")
    added = cron(
        stack, "add", "hb", "--kind", "heartbeat", "--every", "1h", "--deliver", "telegram:4242"
    )
    assert added.returncode == 0, added.stderr
    assert cron(stack, "run", "hb").returncode == 0
    with client(stack.url, stack.token) as c:
        assert wait_for(lambda: final_text(c, "cron:hb"), timeout=60) == "HEARTBEAT_OK"
        assert parts(stack) == []  # recorded in the transcript, sent to no chat

        heartbeat.write_text("Tell the user to water the plants.\n")
        assert cron(stack, "run", "hb").returncode == 0
        found = wait_for(lambda: parts(stack), timeout=60)
    [part] = found
    assert (part.channel, part.chat.id, part.session_key) == ("telegram", "4242", "cron:hb")
    assert part.text.startswith("noted: ")


def test_the_cron_tool_through_tools_invoke(stack: Stack) -> None:
    key = "main:api:tooling"
    with client(stack.url, stack.token) as c:

        def invoke(args: dict[str, object], session: str = key) -> tuple[int, dict[str, object]]:
            r = c.post("/tools/invoke", json={"tool": "cron", "args": args, "sessionKey": session})
            return r.status_code, r.json()

        status, body = invoke(
            {"action": "add", "name": "standup", "cron": "0 9 * * MON-FRI", "message": "standup"}
        )
        assert status == 200 and body["ok"] is True, body
        listed = c.get("/api/cron").json()["jobs"]
        [job] = [j for j in listed if j["name"] == "standup"]
        assert job["session_key"] == key and job["agent"] == "main"  # the run's own session
        status, body = invoke({"action": "add", "name": "x", "cron": "bad", "message": "m"})
        assert status == 200 and body["ok"] is False
        assert "invalid cron expression 'bad'" in json.dumps(body["content"])
        status, body = invoke({"action": "list"})
        assert "standup: cron '0 9 * * MON-FRI' (UTC)" in json.dumps(body["content"])
        # A sub-agent may not schedule (the default sub-agent policy denies cron).
        status, body = invoke({"action": "list"}, f"{key}:sub:helper")
        assert status == 403 and body["error"]["code"] == "policy_denied"  # type: ignore[index]
        status, body = invoke({"action": "remove", "name": "standup"})
        assert status == 200 and body["ok"] is True
        assert [j for j in c.get("/api/cron").json()["jobs"] if j["name"] == "standup"] == []
