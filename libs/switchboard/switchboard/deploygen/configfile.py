"""The configuration file in containers (docs/config-file.md, "In containers"): every service
reads ``switchboard.toml`` from a directory mounted read-only at :data:`MOUNT_DIR`, named by
``SB_CONFIG_FILE``, and watches it, so an edit reaches the running services without a restart.

A directory, never the file itself: Kubernetes updates a ConfigMap volume by swapping a symlink,
which a ``subPath`` mount never sees; Compose bind-mounts the inode a single file had when the
container started, so an editor that saves by renaming a new file over it goes unseen, and
Compose cannot mount a file that does not exist (it would make a directory in its place).

The same example, commented so that it sets nothing, is the ConfigMap of k8s/base and
config/switchboard.example.toml."""

from __future__ import annotations

import textwrap

MOUNT_DIR = "/etc/switchboard"
FILE_NAME = "switchboard.toml"
PATH = f"{MOUNT_DIR}/{FILE_NAME}"
CONFIGMAP = "switchboard-config-file"  # not switchboard-config: that one is envFrom's variables
VOLUME = "config-file"
COMPOSE_DIR = "${SB_CONFIG_DIR:-./config}"  # the host directory, for Compose
EXAMPLE_PATH = "config/switchboard.example.toml"

PROSE = textwrap.wrap(
    "Switchboard's configuration file (docs/config-file.md), read by every service from"
    f" SB_CONFIG_FILE={PATH} and watched: a change of a setting that reloads (the router's"
    " policies, allowlists, owners and bindings; the agent's model chain, budgets, tool policies"
    " and approval rules; the scheduler's quiet hours) applies"
    " within seconds; any other is logged as needing a restart. A file that fails validation"
    " is refused as a whole and the running configuration stays. A variable set in the"
    " container's environment wins over the file. Secrets stay out of it: write them as"
    " env:NAME references to variables the service already has (from its Secret in"
    " Kubernetes, from .env in Compose). Nothing is set here: uncomment what you need.",
    94,
)
BANNER = [
    "# Generated from libs/switchboard/switchboard/deploygen/configfile.py by",
    "# `python -m switchboard.deploygen`: edit that, not this file (`make lint` checks it).",
]

# Valid as it is once uncommented (tests/deploy/test_config_file_mount.py loads it); only
# settings that reload, so that an edit of the example shows the feature.
EXAMPLE = """\
[router]
dm_policy = "allowlist"
owners = ["telegram:42"]

[router.channel_security.telegram]
allow_from = ["42", "43"]

[agent]
model = "anthropic:claude-sonnet-4-5"
model_fallbacks = ["openai:gpt-4o-mini"]
budget = { session_usd = 5.0 }
tool_approvals = ["exec"]

[scheduler.quiet_hours]
main = { start = "22:00", end = "07:00", tz = "UTC" }
"""


def commented() -> list[str]:
    """The example file: the prose, then the example with every line commented out."""
    lines = [f"# {line}" for line in PROSE] + [""]
    lines += [f"# {line}" if line else "#" for line in EXAMPLE.splitlines()]
    return lines


def example_file() -> str:
    """The whole of config/switchboard.example.toml."""
    copy = [
        "# Copy it to switchboard.toml in this directory and edit the copy: Compose mounts the",
        f"# directory (SB_CONFIG_DIR names another) at {MOUNT_DIR} in every service.",
    ]
    return "\n".join([*BANNER, *copy, *commented()]) + "\n"


def configmap() -> str:
    """The whole of k8s/base/config-file.yaml: the ConfigMap every Deployment mounts."""
    lines = [
        *BANNER,
        "# The configuration file, mounted as a directory (no subPath, so that an edit reaches the",
        f"# pods: the kubelet syncs it within about a minute) at {MOUNT_DIR}. Replace it in an",
        "# overlay (k8s/README.md) with a configMapGenerator of the same name, behavior: replace",
        "# and disableNameSuffixHash: true (a hashed name would roll the pods out instead).",
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        f"  name: {CONFIGMAP}",
        "data:",
        f"  {FILE_NAME}: |",
        *(f"    {line}" if line else "" for line in commented()),
    ]
    return "\n".join(lines) + "\n"
