"""The symlink attack of issue 23, on the executor's side: with ``SB_EXEC_MODE=sandbox`` a
sandboxed command in the agent's workspace turns ``MEMORY.md`` (and friends) into symlinks to a
secret file outside. The command itself cannot read the secret (the sandbox does not mount it);
what could is a reader outside the sandbox that follows the link. None of the executor's own
readers (read, search_files, list_dir, edit, write, apply_patch: they run in the executor
process, as root in production) does. The secret is a file of a temporary directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from switchboard_tools.sandbox import LayeredSandbox

from .sandbox_checks import host_targets, need_confinement

PATCH = """--- a/{path}
+++ b/{path}
@@ -1 +1 @@
-original content
+pwned
"""


def relative(target: Path, start: Path) -> str:
    return os.path.relpath(target, start)


async def test_links_a_sandboxed_command_plants_are_not_followed(
    scall: Any, layered: LayeredSandbox, workspace: Path
) -> None:
    need_confinement(layered)
    with host_targets() as host:
        secret = host.READABLE_TEXT
        rel_file, rel_dir = (
            relative(host.readable, workspace),
            relative(host.writable_dir, workspace),
        )
        command = (
            f"ln -s {host.readable} MEMORY.md && ln -s {rel_file} USER.md && "
            f"ln -s {host.root} memory && ln -s {rel_dir} notes && "
            f"mkdir -p deep/er && ln -s ../../{rel_file} deep/er/AGENTS.md && "
            "cat MEMORY.md; echo exit=$?"
        )
        out = await scall("exec", {"command": command})
        assert out.details["isolation"]["measured"], out.content
        assert secret not in out.content  # the command itself cannot read it
        assert out.content.rstrip().endswith("exit=1"), out.content  # the links were made
        # Control: the links lead to the real, readable targets: a reader that followed
        # them would get the secret (or write the host's file).
        assert (workspace / "MEMORY.md").read_text() == secret
        assert (workspace / "USER.md").read_text() == secret
        assert (workspace / "memory" / host.readable.name).read_text() == secret
        assert (workspace / "deep" / "er" / "AGENTS.md").read_text() == secret
        assert (workspace / "notes" / host.writable.name).read_text() == host.WRITABLE_TEXT

        for path in (
            "MEMORY.md",
            "USER.md",
            f"memory/{host.readable.name}",
            "deep/er/AGENTS.md",
            f"notes/{host.writable.name}",
        ):
            got = await scall("read", {"path": path})
            assert got.is_error and "outside the workspace" in got.content, (path, got.content)
            assert secret not in got.content and host.WRITABLE_TEXT.strip() not in got.content
        for args in (
            {"glob": "*", "query": "host secret"},
            {"glob": "**/*", "query": "secret"},
            {"glob": "*.md", "query": "5c1e", "regex": True},
        ):
            got = await scall("search_files", args)
            assert secret not in got.content and "5c1e" not in got.content, (args, got.content)
        for path in ("memory", "notes"):
            got = await scall("search_files", {"path": path, "glob": "*", "query": "e"})
            assert got.is_error and secret not in got.content, got.content
            got = await scall("list_dir", {"path": path})
            assert got.is_error and host.readable.name not in got.content, got.content
        got = await scall("list_dir", {})
        assert not got.is_error and "MEMORY.md  (symlink)" in got.content, got.content
        assert secret not in got.content and str(host.root) not in got.content

        # Nothing writes through them either.
        for tool, args in (
            ("edit", {"path": "MEMORY.md", "old_text": secret, "new_text": "pwned"}),
            ("edit", {"path": f"notes/{host.writable.name}", "old_text": "o", "new_text": "x"}),
            ("write", {"path": "USER.md", "content": "pwned", "append": True}),
            ("write", {"path": f"notes/{host.writable.name}", "content": "pwned"}),
            ("write", {"path": "notes/planted.txt", "content": "pwned"}),
            ("apply_patch", {"patch": PATCH.format(path=f"notes/{host.writable.name}")}),
        ):
            got = await scall(tool, args)
            assert got.is_error, (tool, args, got.content)
            assert secret not in got.content
        assert host.untouched()
        # Control: the same patch applies to a copy of the file inside the workspace.
        (workspace / "copy.txt").write_text(host.WRITABLE_TEXT)
        got = await scall("apply_patch", {"patch": PATCH.format(path="copy.txt")})
        assert not got.is_error, got.content
        assert (workspace / "copy.txt").read_text() == "pwned\n"
