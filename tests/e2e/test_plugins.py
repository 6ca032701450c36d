"""Plugins and hooks end to end, every service a real process and the model the fake
OpenAI-compatible API. The plugins are a real package (``tests/plugins/sb_test_plugin``,
built and installed with pip into a temporary directory on the services' ``PYTHONPATH``, so
``importlib.metadata`` finds its entry points as it would in a venv; nothing is installed into
the venv itself). Enabled: ``sbtest`` (a tool and hooks), ``sbflaky`` (hooks that raise or
hang), ``sbstrict`` (given an invalid configuration), ``sbbroken`` (raises on import),
``sbmissing`` (not installed), ``sbecho`` (the model provider ``echo``; the agent ``echoer``
uses ``echo:parrot``, the agent ``flaky`` ``echo:fail``, which raises) and ``sbbadprov`` (the
provider ``badprov``, whose factory raises; the agent ``badprov`` uses ``badprov:x``) and
``sbchan`` (the gateway's chat channel ``filechat``, whose replies go to a file). The fake
OpenAI model is every chain's fallback.

Checked: the agent starts and reports each plugin in its ``/readyz`` details; the plugin's tool
is offered and runs; ``before_model_call`` changes the request; the observing hooks see the
messages, the tool call and the session's lane; the failing hooks are counted and the runs go
on; ``before_tool_call`` blocks ``exec`` (the model reads why, the command never runs) and
rewrites ``get_time``'s time zone (the real executor answers for the new one); a plugin's model
answers its agent, and a failing one (or one its factory cannot build, reported in ``/readyz``)
falls back to the built-in model; the plugin's channel takes a webhook (its secret checked)
and the reply comes back through its ``send``.

One system for the module: each test reads the journal lines, hook error counts and OUTBOUND
parts that came during it (and only its own session's start and end), the fake model's calls
reset before each."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e import helpers
from tests.e2e.helpers import final_text, metric, wait_for
from tests.e2e.test_message_tool import parts, publish_dm
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.services import ServiceProcesses, fresh_model, with_fake_model

PACKAGE = Path(__file__).parents[1] / "plugins" / "sb_test_plugin"
PROMPT_MARK = "SBTEST-HOOK: the sbtest plugin saw this request."


def script(req: FakeRequest) -> Reply:
    """``reverse <text>``, ``run <command>``, ``mars time``: one tool call; after its result,
    the answer quotes it."""
    if req.last_tool_results:
        return Reply(text="done: " + " | ".join(req.last_tool_results))
    text = req.last_user_text
    if text.startswith("reverse "):
        return Reply(tool_calls=[("reverse_text", {"text": text[8:]})])
    if text.startswith("run "):
        return Reply(tool_calls=[("exec", {"command": text[4:]})])
    if text == "mars time":
        return Reply(tool_calls=[("get_time", {"timezone": "Mars/Olympus"})])
    return Reply(text="hello")


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test plugin package, built and installed by pip into a directory of its own (from
    a copy: the build leaves files next to its sources)."""
    tmp_path = tmp_path_factory.mktemp("plugin")
    source = tmp_path / "src"
    shutil.copytree(PACKAGE, source)
    target = tmp_path / "site"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"),
            *("--no-deps", "--no-build-isolation", "--no-index", "--target", str(target)),
            str(source),
        ],
        check=True,
        timeout=300,
    )
    return target


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory,
    module_nats_url: str,
    module_database_url: str,
    plugin_path: Path,
) -> Iterator[ServiceProcesses]:
    tmp_path = tmp_path_factory.mktemp("plugins")
    journal = tmp_path / "journal.jsonl"
    env = {
        "PYTHONPATH": str(plugin_path),
        "SB_PLUGINS": json.dumps(
            [
                *("sbtest", "sbflaky", "sbstrict", "sbbroken", "sbmissing"),
                *("sbecho", "sbbadprov", "sbchan"),
            ]
        ),
        "SB_PLUGINS_CONFIG": json.dumps(
            {
                "sbtest": {
                    "journal": str(journal),
                    "blocked_tool": "exec",
                    "rewrite_to": "Asia/Tokyo",
                },
                "sbstrict": {"level": "high"},
                "sbecho": {"prefix": "parrot-echo"},
                "sbchan": {"secret": "filechat-secret", "outbox": str(tmp_path / "outbox")},
            }
        ),
        "SB_AGENT_MODELS": json.dumps(
            {"echoer": "echo:parrot", "flaky": "echo:fail", "badprov": "badprov:x"}
        ),
        "SB_MODEL_FALLBACKS": json.dumps(["openai:gpt-4o-mini"]),
        "SB_HOOK_TIMEOUT_S": "1",
    }
    home = tmp_path / "home"
    with with_fake_model(home, module_nats_url, module_database_url, script, env) as procs:
        procs.journal = journal  # type: ignore[attr-defined]
        procs.outbox = tmp_path / "outbox"  # type: ignore[attr-defined]
        yield procs


@pytest.fixture
def services(system: ServiceProcesses) -> ServiceProcesses:
    """The module's system; what its journal and agent metrics held before this test."""
    fresh_model(system)
    system.journal_start = len(read_journal(system))  # type: ignore[attr-defined]
    system.metrics_before = agent_ops(system, "/metrics").text  # type: ignore[attr-defined]
    return system


def agent_ops(procs: ServiceProcesses, path: str) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{procs.ops_ports['agent']}{path}", timeout=5)


def read_journal(procs: ServiceProcesses) -> list[dict[str, Any]]:
    path: Path = procs.journal  # type: ignore[attr-defined]
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def journal(procs: ServiceProcesses) -> list[dict[str, Any]]:
    """The journal's lines written since this test began."""
    start: int = procs.journal_start  # type: ignore[attr-defined]
    return read_journal(procs)[start:]


def hook_errors(procs: ServiceProcesses, plugin: str, hook: str) -> float:
    """sb_agent_hook_errors_total{plugin, hook} counted since this test began."""
    before: str = procs.metrics_before  # type: ignore[attr-defined]
    now = agent_ops(procs, "/metrics").text
    labels = {"plugin": plugin, "hook": hook}
    return metric(now, "sb_agent_hook_errors_total", **labels) - metric(
        before, "sb_agent_hook_errors_total", **labels
    )


def events(procs: ServiceProcesses, name: str) -> list[dict[str, Any]]:
    return [e for e in journal(procs) if e["event"] == name]


def ask(procs: ServiceProcesses, key: str, text: str) -> str:
    with helpers.client(procs.url, procs.token) as c:
        agent = key.partition(":")[0]
        r = c.post(f"/api/sessions/{key}/messages", json={"text": text, "agent": agent})
        assert r.status_code in (200, 202), r.text
        return str(wait_for(lambda: final_text(c, key), timeout=60, what=f"the reply to {text}"))


def test_plugins_load_or_are_reported_and_hooks_see_a_chat_run(
    services: ServiceProcesses,
) -> None:
    ready = agent_ops(services, "/readyz")
    assert ready.status_code == 200, ready.text  # the broken plugins do not stop the agent
    plugins = ready.json()["details"]["plugins"]
    assert plugins["sbtest"] == {
        "state": "loaded",
        "version": "0.1.0",
        "provides": ["hooks", "tools"],
    }
    assert plugins["sbflaky"]["state"] == "loaded"
    assert plugins["sbbroken"] == {"state": "failed", "detail": "failed to import (RuntimeError)"}
    assert plugins["sbstrict"] == {
        "state": "failed",
        "detail": "SB_PLUGINS_CONFIG is invalid at level: it fails the schema's 'type' rule",
    }
    assert plugins["sbmissing"]["state"] == "not_installed"
    assert "high" not in ready.text  # a configuration value is never echoed

    # A Telegram DM: the plugin's tool runs; every hook sees the run; the flaky hooks fail.
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    before = parts(services.nats_url)
    publish_dm(services.nats_url, "reverse stressed", "pl-1")
    [(_, reply)] = wait_for(
        lambda: [p for p in parts(services.nats_url) if p not in before],
        timeout=60,
        what="the reply",
    )
    assert reply.text == "done: desserts"
    first = llm.calls[0].request
    assert "reverse_text" in first.tools
    assert first.system.endswith(PROMPT_MARK)  # before_model_call rewrote the request
    key = "main:telegram:4242"
    wait_for(
        lambda: [e for e in events(services, "session_end") if e["session_key"] == key],
        timeout=30,
        what="session_end",
    )
    # (Another session's lane may be let go meanwhile: its session_end is not this chat's.)
    names = [e["event"] for e in journal(services) if e.get("session_key", key) == key]
    assert names[:2] == ["session_start", "message_received"]
    assert names[-1] == "session_end"
    assert names.count("before_model_call") == 2
    [received] = events(services, "message_received")
    assert (received["session_key"], received["text"]) == (key, "reverse stressed")
    [after] = events(services, "after_tool_call")
    assert (after["name"], after["content"], after["is_error"]) == (
        "reverse_text",
        "desserts",
        False,
    )
    [sent] = events(services, "message_sent")
    assert (sent["channel"], sent["chat_id"], sent["text"]) == (
        "telegram",
        "4242",
        "done: desserts",
    )
    assert hook_errors(services, "sbflaky", "after_tool_call") == 1
    # message_sent never returns: the 1 s deadline ended it.
    assert hook_errors(services, "sbflaky", "message_sent") == 1
    assert hook_errors(services, "sbtest", "after_tool_call") == 0


def test_before_tool_call_blocks_one_call_and_rewrites_another(
    services: ServiceProcesses,
) -> None:
    workspace = Path(services.env["SB_WORKSPACES_DIR"]) / "main"
    blocked = ask(services, "main:api:guarded", "run touch hooked-marker")
    # The model reads the refusal as the call's tool error (OpenAI's wire: "Error: ...").
    assert blocked == "done: Error: Tool call blocked: exec is switched off by the sbtest plugin."
    assert not (workspace / "hooked-marker").exists()  # the executor never saw it
    [call] = events(services, "before_tool_call")
    assert call == {
        "event": "before_tool_call",
        "tool": "exec",
        "args": {"command": "touch hooked-marker"},
    }

    rewritten = ask(services, "main:api:mars", "mars time")
    # Without the rewrite the executor would refuse "Mars/Olympus" (not a time zone).
    assert rewritten.startswith("done: ") and rewritten.endswith(", Asia/Tokyo)")
    outcome = events(services, "after_tool_call")[-1]
    assert outcome["name"] == "get_time" and outcome["is_error"] is False


def test_plugin_models_answer_and_fail_over_to_the_built_in_one(
    services: ServiceProcesses,
) -> None:
    plugins = agent_ops(services, "/readyz").json()["details"]["plugins"]
    assert plugins["sbecho"] == {"state": "loaded", "version": "0.2.0", "provides": ["providers"]}
    assert plugins["sbbadprov"] == {
        "state": "loaded",
        "version": "0.1.0",
        "provides": ["providers"],
        "detail": "The model badprov:x (plugin sbbadprov) could not be set up (RuntimeError).",
    }
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    assert ask(services, "echoer:api:p1", "hi there") == "parrot-echo(parrot): hi there"
    assert llm.calls == []  # the plugin's model answered, not the fake OpenAI one

    assert ask(services, "flaky:api:p1", "hello?") == "hello"  # echo:fail raised: fallback
    assert ask(services, "badprov:api:p1", "anyone?") == "hello"  # never built: fallback
    asked = [c.request.last_user_text for c in llm.calls]
    assert asked == ["hello?", "anyone?"]
    failovers = agent_ops(services, "/metrics").text
    for source in ("echo:fail", "badprov:x"):
        labels = {"from": source, "to": "openai:gpt-4o-mini", "reason": "unavailable"}
        assert metric(failovers, "sb_agent_failovers_total", **labels) == 1


def test_a_plugin_channel_takes_webhooks_and_sends_replies(services: ServiceProcesses) -> None:
    gateway = httpx.get(f"http://127.0.0.1:{services.ops_ports['gateway']}/readyz", timeout=5)
    plugins = gateway.json()["details"]["plugins"]
    assert plugins["sbchan"] == {"state": "loaded", "version": "0.1.0", "provides": ["channels"]}
    assert "sbtest" not in plugins and "sbecho" not in plugins  # the agent's, not the gateway's
    assert plugins["sbbroken"]["state"] == "failed"
    assert "sbchan" not in agent_ops(services, "/readyz").json()["details"]["plugins"]

    url = f"{services.url}/channels/filechat/main"
    call = {"id": "fc-1", "from": "alice", "text": "hi filechat"}
    refused = httpx.post(url, json=call, headers={"x-filechat-secret": "nope"}, timeout=10)
    assert refused.status_code == 401
    garbled = httpx.post(
        url, content=b"{", headers={"x-filechat-secret": "filechat-secret"}, timeout=10
    )
    assert garbled.status_code == 400  # the plugin's ValueError, refused without detail
    assert "Expecting" not in garbled.text
    taken = httpx.post(url, json=call, headers={"x-filechat-secret": "filechat-secret"}, timeout=10)
    assert taken.status_code == 200, taken.text
    outbox: Path = services.outbox  # type: ignore[attr-defined]
    [sent] = wait_for(
        lambda: [json.loads(x) for x in outbox.read_text().splitlines()] if outbox.exists() else [],
        timeout=60,
        what="the filechat reply",
    )
    assert sent == {"account": "main", "to": "alice", "text": "hello"}
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    assert [c.request.last_user_text for c in llm.calls] == ["hi filechat"]
