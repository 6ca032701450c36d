"""Private workspaces (docs/trust.md): a run that is not the owner's sends
``ToolCall.workspace_session`` and every tool of the call works in that session's own
``<root>/<agent>/sessions/<dir>``, whatever ``SB_WORKSPACE_SCOPE`` says. The agent's workspace
(``<root>/<agent>``, the owner's ``MEMORY.md`` and ``USER.md``) and other sessions' stay out of
reach: the file tools, exec in the sandbox, and the process tool's handles.

Targets are files of a test's own temporary workspaces root. Where filesystem confinement is
what stops a command, the attack is also run with it off (the control), which must succeed."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard import bus
from switchboard.v1 import messages_pb2
from switchboard_tools.builtin import builtin_registry
from switchboard_tools.errors import ToolError
from switchboard_tools.procs import ProcessLimits, ProcessManager
from switchboard_tools.registry import ToolContext, ToolOutput
from switchboard_tools.sandbox import LayeredSandbox, SandboxProfile
from switchboard_tools.server import workspace_session
from switchboard_tools.workspace import SESSIONS_DIR, open_workspace, session_dir_name

from .executor_procs import SUBJECTS, ExecutorProcesses, ToolBus
from .sandbox_checks import need_confinement

AGENT = "agent-1"
OWNER_KEY = f"{AGENT}:telegram:42"  # the owner's DM: the agent's workspace
GROUP_KEY = f"{AGENT}:telegram:group:-100"  # a group: a private workspace
STRANGER_KEY = f"{AGENT}:telegram:7"  # a paired user's DM: another private workspace
MEMORY = "owner memory: the safe code is 4411-e7c2\n"
AGENTS = "# the owner's AGENTS.md\n"
SECRET = "4411-e7c2"
# How a confinement attack is run (as in test_attacks): None = through the exec tool with
# everything this host has; a layer = that layer alone; "control" = every confinement off.
CONFINEMENT = ("namespaces", "landlock", "seccomp")
FS_RUNS = [None, "namespaces", "landlock", "control"]

Call = Callable[..., Awaitable[messages_pb2.ToolResult]]


def test_the_workspace_session_wins_over_the_scope() -> None:
    call = messages_pb2.ToolCall(session_key=GROUP_KEY + ":sub:s1", workspace_session=GROUP_KEY)
    assert workspace_session(call, "agent") == GROUP_KEY
    assert workspace_session(call, "session") == GROUP_KEY
    call.workspace_session = ""  # the owner's run: the operator's scope, as before
    assert workspace_session(call, "agent") is None
    assert workspace_session(call, "session") == GROUP_KEY + ":sub:s1"


# -- over the bus, through a real executor ----------------------------------------------------


def caller(client: ToolBus) -> Call:
    async def call(
        key: str, private: str, tool: str, args: dict[str, Any]
    ) -> messages_pb2.ToolResult:
        message = messages_pb2.ToolCall(
            call_id=f"call-{uuid.uuid4().hex[:12]}",
            run_id=f"run-{uuid.uuid4().hex[:12]}",
            session_key=key,
            agent=AGENT,
            tool=tool,
            args_json=json.dumps(args),
            timeout_s=30,
            workspace_session=private,
        )
        await bus.js_publish(client.js, SUBJECTS.tools_call("default"), message)
        return await client.result(message)

    return call


async def test_a_private_session_works_in_its_own_workspace(
    nats_url: str, layered: LayeredSandbox
) -> None:
    need_confinement(layered)
    client = await ToolBus.connect(nats_url)  # creates the streams the executor waits for
    try:
        async with ExecutorProcesses(nats_url, {"SB_EXEC_MODE": "sandbox"}) as executors:
            await executors.start("tools-private")
            await client.listen("sb.tools.result.>")
            call = caller(client)
            agent_ws = executors.workspace(AGENT)
            sessions = agent_ws / SESSIONS_DIR
            for name, text in (("MEMORY.md", MEMORY), ("AGENTS.md", AGENTS)):
                done = await call(OWNER_KEY, "", "write", {"path": name, "content": text})
                assert not done.is_error, done.content
            # Control: the owner's own run reads MEMORY.md, with the file tools and from the
            # sandbox (whose uid can read it: what stops the others is where they work).
            assert (await call(OWNER_KEY, "", "read", {"path": "MEMORY.md"})).content == MEMORY
            owner_cat = await call(OWNER_KEY, "", "exec", {"command": "cat MEMORY.md"})
            assert owner_cat.content == MEMORY, owner_cat.content

            # The group's files land in its own workspace.
            done = await call(GROUP_KEY, GROUP_KEY, "write", {"path": "AGENTS.md", "content": "x"})
            assert not done.is_error, done.content
            mine = sessions / session_dir_name(GROUP_KEY)
            assert (mine / "AGENTS.md").read_text() == "x"
            assert (agent_ws / "AGENTS.md").read_text() == AGENTS  # the owner's, untouched
            got = await call(GROUP_KEY, GROUP_KEY, "read", {"path": "AGENTS.md"})
            assert got.content == "x", got.content
            # A sub-agent of the group works in the group's workspace too.
            sub = await call(GROUP_KEY + ":sub:s1", GROUP_KEY, "read", {"path": "AGENTS.md"})
            assert sub.content == "x", sub.content

            # The agent's workspace is out of reach of every file tool...
            for tool, args in (
                ("read", {"path": "MEMORY.md"}),
                ("read", {"path": "../../MEMORY.md"}),
                ("read", {"path": str(agent_ws / "MEMORY.md")}),
                ("read", {"path": str(agent_ws.resolve() / "MEMORY.md")}),
                ("list_dir", {"path": "../.."}),
                ("search_files", {"path": "../..", "glob": "*", "query": SECRET}),
                ("edit", {"path": "../../MEMORY.md", "old_text": SECRET, "new_text": "x"}),
                ("write", {"path": "../../USER.md", "content": "pwned"}),
            ):
                got = await call(GROUP_KEY, GROUP_KEY, tool, args)
                assert got.is_error, (tool, args, got.content)
                assert SECRET not in got.content, (tool, args, got.content)
            listed = await call(GROUP_KEY, GROUP_KEY, "list_dir", {})
            assert listed.content == ".:\nAGENTS.md  (1 bytes)", listed.content
            found = await call(GROUP_KEY, GROUP_KEY, "search_files", {"glob": "*", "query": "4"})
            assert SECRET not in found.content

            # ...and of its commands (the sandbox binds the session's workspace only).
            command = (
                f"cat MEMORY.md; cat ../../MEMORY.md; cat {agent_ws}/MEMORY.md; ls -a ../..; "
                f"ln -s ../../MEMORY.md m; cat m; cat ../{session_dir_name(STRANGER_KEY)}/n"
            )
            got = await call(GROUP_KEY, GROUP_KEY, "exec", {"command": command})
            isolation = json.loads(got.isolation_json)
            assert isolation["measured"] and isolation["workspace_confined"], isolation
            assert SECRET not in got.content, got.content
            # The link the command made leads nowhere for the file tools either.
            got = await call(GROUP_KEY, GROUP_KEY, "read", {"path": "m"})
            assert got.is_error and SECRET not in got.content, got.content

            # Another private session sees neither the owner's files nor the group's.
            done = await call(STRANGER_KEY, STRANGER_KEY, "write", {"path": "n", "content": "s"})
            assert not done.is_error, done.content
            got = await call(STRANGER_KEY, STRANGER_KEY, "read", {"path": "AGENTS.md"})
            assert got.is_error and got.content == "File not found: AGENTS.md", got.content
            name = session_dir_name(GROUP_KEY)
            got = await call(STRANGER_KEY, STRANGER_KEY, "read", {"path": f"../{name}/AGENTS.md"})
            assert got.is_error and "outside the workspace" in got.content, got.content
            got = await call(STRANGER_KEY, STRANGER_KEY, "exec", {"command": "cat n"})
            assert got.content == "s", got.content  # its own file, from its own sandbox

            # The process tool: the owner's processes (their output may be the owner's
            # files) are not the group's to list, poll or kill; the group's are its own.
            start = {"action": "start", "command": "cat MEMORY.md; sleep 60", "wait_s": 2}
            started = await call(OWNER_KEY, "", "process", start)
            assert not started.is_error and SECRET in started.content, started.content
            handle = json.loads(started.details_json)["handle"]
            listing = await call(GROUP_KEY, GROUP_KEY, "process", {"action": "list"})
            assert listing.content == "No processes.", listing.content
            for action in ("poll", "kill"):
                got = await call(
                    GROUP_KEY, GROUP_KEY, "process", {"action": action, "handle": handle}
                )
                assert got.is_error and "No process" in got.content and SECRET not in got.content
            start = {"action": "start", "command": "sleep 60", "wait_s": 0}
            theirs = await call(GROUP_KEY, GROUP_KEY, "process", start)
            theirs_handle = json.loads(theirs.details_json)["handle"]
            listing = await call(OWNER_KEY, "", "process", {"action": "list"})
            assert handle in listing.content and theirs_handle not in listing.content
            got = await call(
                STRANGER_KEY, STRANGER_KEY, "process", {"action": "poll", "handle": theirs_handle}
            )
            assert got.is_error and "No process" in got.content
            for key, private, which in (
                (OWNER_KEY, "", handle),
                (GROUP_KEY, GROUP_KEY, theirs_handle),
            ):
                got = await call(key, private, "process", {"action": "kill", "handle": which})
                assert not got.is_error and json.loads(got.details_json)["was_running"]
            assert sorted(os.listdir(sessions)) == sorted(
                session_dir_name(k) for k in (GROUP_KEY, STRANGER_KEY)
            )
    finally:
        await client.close()


# -- in one process: what confines a private session's commands, and its processes ------------


@pytest.fixture
def root() -> Iterator[Path]:
    """A workspaces root the sandbox uid can reach (as the ``workspace`` fixture's)."""
    base = Path(tempfile.mkdtemp(prefix="sb-private-"))
    base.chmod(0o711)
    try:
        yield base / "workspaces"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def private_ctx(root: Path, key: str, private: str) -> tuple[ToolContext, int]:
    """A call's context as the executor builds it (``workspace_session``, ``open_workspace``);
    the caller closes the descriptor."""
    session = workspace_session(
        messages_pb2.ToolCall(session_key=key, workspace_session=private), "agent"
    )
    workspace, fd = open_workspace(root, AGENT, session)
    ctx = ToolContext(AGENT, key, "call-1", workspace, 20.0, workspace_fd=fd,
                      workspace_session=session or "")  # fmt: skip
    return ctx, fd


@pytest.mark.parametrize("only", FS_RUNS)
async def test_a_private_sessions_commands_cannot_read_the_agents_memory(
    root: Path, layered: LayeredSandbox, need: Callable[..., None], only: str | None
) -> None:
    need_confinement(layered)
    agent_ws, fd = open_workspace(root, AGENT)
    os.close(fd)
    (agent_ws / "MEMORY.md").write_text(MEMORY)
    (agent_ws / "MEMORY.md").chmod(0o644)
    ctx, fd = private_ctx(root, GROUP_KEY, GROUP_KEY)
    try:
        assert ctx.workspace == agent_ws / SESSIONS_DIR / session_dir_name(GROUP_KEY)
        command = f"cat ../../MEMORY.md; cat {agent_ws}/MEMORY.md; cat MEMORY.md"
        if only is None:
            registry = builtin_registry(layered, exec_mode="sandbox")
            out = await registry.execute("exec", json.dumps({"command": command}), ctx)
            assert out.details["isolation"]["measured"], out.content
            output = out.content
        else:
            if only != "control":
                need(only)
            layers = {name: name == only for name in CONFINEMENT}
            result = await layered.run(
                ["/bin/sh", "-c", command],
                cwd=ctx.workspace,
                timeout_s=10,
                output_cap=10000,
                profile=SandboxProfile(network=True),  # not what is attacked here
                workspace=ctx.workspace,
                layers=layers,
            )
            assert {name: (result.isolation or {})[name] for name in CONFINEMENT} == layers
            output = result.output
    finally:
        os.close(fd)
    if only == "control":  # nothing confines it: the agent's MEMORY.md is right there
        assert SECRET in output, output
    else:
        assert SECRET not in output, output


async def test_processes_are_kept_per_workspace(root: Path, layered: LayeredSandbox) -> None:
    need_confinement(layered)
    manager = ProcessManager(layered, ProcessLimits(max_per_agent=4, max_lifetime_s=60.0))
    registry = builtin_registry(layered, processes=manager, exec_mode="sandbox")
    owner, owner_fd = private_ctx(root, OWNER_KEY, "")
    group, group_fd = private_ctx(root, GROUP_KEY, GROUP_KEY)
    stranger, stranger_fd = private_ctx(root, STRANGER_KEY, STRANGER_KEY)

    async def process(ctx: ToolContext, **args: Any) -> ToolOutput:
        return await registry.execute("process", json.dumps(args), ctx)

    try:
        (owner.workspace / "MEMORY.md").write_text(MEMORY)
        out = await process(owner, action="start", command="cat MEMORY.md; sleep 60", wait_s=2)
        assert not out.is_error and SECRET in out.content, out.content
        handle = out.details["handle"]
        out = await process(group, action="start", command="pwd; sleep 60", wait_s=2)
        assert not out.is_error and str(group.workspace) in out.content, out.content
        theirs = out.details["handle"]
        for ctx, own, other in ((group, theirs, handle), (stranger, None, theirs)):
            listed = await process(ctx, action="list")
            assert [p["handle"] for p in listed.details["processes"]] == ([own] if own else [])
            for action in ("poll", "kill"):
                out = await process(ctx, action=action, handle=other)
                assert out.is_error and "No process" in out.content, out.content
                assert SECRET not in out.content
        listed = await process(owner, action="list")
        assert [p["handle"] for p in listed.details["processes"]] == [handle]
        # What another replica forwards: the owner of the process checks the scope too.
        request = {"op": "poll", "agent": AGENT, "handle": theirs}
        with pytest.raises(ToolError, match="No process"):
            await manager.handle_request(request)  # no scope: the agent's workspace
        polled = await manager.handle_request({**request, "scope": GROUP_KEY})
        assert polled["running"]
        assert manager.list_local(AGENT, GROUP_KEY)[0]["handle"] == theirs
        # Both still run: nothing above reached them.
        for ctx, which in ((owner, handle), (group, theirs)):
            out = await process(ctx, action="kill", handle=which)
            assert not out.is_error and out.details["was_running"], out.content
    finally:
        await manager.shutdown()
        for fd in (owner_fd, group_fd, stranger_fd):
            os.close(fd)
