"""What ``switchboard up``'s own imports leave for later (issue 25's warm start, docs/startup.md).

A fresh interpreter imports what the launcher imports before it starts anything (its command's
module, then every service's settings and code through ``host.Preload``, as ``up`` does) and
reports what it loaded and built. Cheaper and more exact than starting a stack
(``test_idle_imports.py`` checks the running stack): a module brought back to the start-up by an
eager import fails here at once, naming itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

PROBE = """
import json, sys
from switchboard import process_env
process_env.prepare()
import switchboard.cli.main
import switchboard.cli.up
from switchboard import host, registry
failed = host.Preload(registry.SERVICES).run()
modules = sorted(sys.modules)
from switchboard_gateway.webchat import protocol
frames = [
    c for c in vars(protocol).values() if isinstance(c, type) and issubclass(c, protocol.Frame)
]
print(json.dumps({
    "failed": failed,
    "modules": modules,
    "frames": len(frames),
    "frames_built": sorted(c.__name__ for c in frames if c.__pydantic_complete__),
}))
"""

# Top-level packages the launcher's imports must not load, and who imports them later.
LATER = {
    "yaml": "the agent's skills: switchboard.skills.parse_skill, at the first SKILL.md read",
    "httpx": "the fetches of the tools, media and scheduler (switchboard.net.fetch, web_search)",
    "rich": "httpx's command line, which httpx imports whenever rich is installed",
    "jsonschema": "argument validation: a tool's first call (tools' registry, agent's local tools)",
    "referencing": "jsonschema's, with it",
}
# Our modules likewise.
LATER_OURS = {
    "switchboard_gateway.webchat.connection": "the first WebChat socket (webchat/route.py)",
    "switchboard_gateway.webchat.protocol": "the first WebChat socket, through its connection",
}


def launcher_imports() -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SB_")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def test_the_launchers_imports_leave_the_lazy_modules_and_models_for_later() -> None:
    result = launcher_imports()
    assert result["failed"] == []
    modules = set(result["modules"])
    # The probe saw the real thing: every service's code is in.
    assert {f"switchboard_{s}.server" for s in ("gateway", "agent", "tools", "memory")} <= modules
    top = {name.split(".")[0] for name in modules}
    early = {name: why for name, why in LATER.items() if name in top}
    assert not early, f"imported at start-up: {early}"
    ours = {name: why for name, why in LATER_OURS.items() if name in modules}
    assert not ours, f"imported at start-up: {ours}"
    assert "switchboard_gateway.webchat.route" in modules  # the socket's route is there
    # The WebSocket chat's frames (defer_build): none built by their import either.
    assert result["frames"] >= 20
    assert result["frames_built"] == []
