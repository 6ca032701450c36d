"""Skills (docs/skills.md): folders of instructions an agent reads when a task calls for
them. A skill is ``<skills dir>/<folder>/SKILL.md``: YAML front matter, then the body::

    ---
    name: weather
    description: Current weather and forecasts for a city (uses curl and wttr.in).
    requires:
      bins: [curl]          # programs that must be on PATH
      env: [WTTR_TOKEN]     # environment variables that must be set
    ---
    To get the weather, run `curl -s wttr.in/<city>?format=3` with the exec tool...

Where skills come from, first wins for a name: the agent workspace's ``skills/`` folder, then
each shared folder of ``SB_SKILLS_DIRS`` in order. The agent puts every skill's name and
description in the system prompt and gives the body on demand (the ``skill_read`` tool);
``switchboard doctor`` reports the skills whose requirements are not met.

Skills are text, never code we run. Nothing here executes, imports or evaluates a skill: the
front matter is read with ``yaml.safe_load`` (plain data, no tags that build objects), a
requirement is checked by looking a program up on the ``PATH`` the exec tool gives commands
(:data:`EXEC_PATH`; ``shutil.which``: a ``stat``, no execution) and an environment variable
by its presence. A script a skill names runs only if the model calls the ``exec`` tool, which
the tool executor runs in its sandbox like any other command (and which the tool policy and
approval rules govern).

Reading is as careful as the bootstrap files' (``workspace_files``): a workspace's skills are
opened beneath the workspace directory (:func:`switchboard.beneath.open_beneath`), so a
symlink planted in the workspace cannot make the prompt show a file from outside it; only
regular files up to :data:`MAX_SKILL_BYTES` are read; text is cached by (device, inode, size,
mtime), so a run costs a directory listing and one ``stat`` per skill while nothing changes."""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from switchboard.beneath import O_CLOEXEC, open_beneath, open_no_symlinks
from switchboard.settings import Settings

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
SKILLS_FOLDER = "skills"  # in an agent workspace
MAX_SKILL_BYTES = 256 * 1024
MAX_DESCRIPTION = 1024
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}")  # a binary or variable name
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | O_CLOEXEC

# The PATH the tool executor gives commands (switchboard_tools.sandbox.process.SANDBOX_PATH):
# a skill's programs must be found there, since the exec tool is where they run.
EXEC_PATH = "/usr/local/bin:/usr/bin:/bin"
Which = Callable[[str], str | None]


def on_exec_path(program: str) -> str | None:
    return shutil.which(program, path=EXEC_PATH)


class SkillSettings(Settings):
    """``SB_SKILLS_DIRS``: shared skill folders (a JSON list of paths), after the workspace's."""

    # JSON list of shared skill folders, searched after the workspace's own skills/.
    skills_dirs: list[Path] = Field(default_factory=list)


class SkillFormatError(ValueError):
    """A SKILL.md that cannot be used; the message says why."""


@dataclass(frozen=True)
class Requirements:
    bins: tuple[str, ...] = ()
    env: tuple[str, ...] = ()

    def missing(self, environ: Mapping[str, str], which: Which = on_exec_path) -> list[str]:
        """What is not there, as ``binary <name>`` / ``env <NAME>``."""
        out = [f"binary {b}" for b in self.bins if which(b) is None]
        return out + [f"env {e}" for e in self.env if not environ.get(e)]


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    folder: str  # the folder's name in its skills dir
    source: Path  # the skills dir it came from
    shared: bool  # from SB_SKILLS_DIRS (else the agent's workspace)
    requires: Requirements = field(default_factory=Requirements)


@dataclass(frozen=True)
class Found:
    """A skill and what it lacks on this host (empty: available)."""

    skill: Skill
    missing: tuple[str, ...] = ()

    @property
    def available(self) -> bool:
        return not self.missing


@dataclass(frozen=True)
class Problem:
    """A SKILL.md that was not loaded, and why."""

    path: Path
    reason: str


def parse_skill(text: str, folder: str) -> tuple[str, str, Requirements, str]:
    """``(name, description, requirements, body)`` of a SKILL.md; raises
    :class:`SkillFormatError`. YAML is imported here, by the first skill read (a turn), not at
    the agent's start-up (docs/startup.md)."""
    import yaml

    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillFormatError("it does not start with YAML front matter (a line '---')")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise SkillFormatError("its front matter has no closing '---' line")
    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 2})" if where is not None else ""
        raise SkillFormatError(f"its front matter is not valid YAML{at}") from None
    if not isinstance(meta, dict):
        raise SkillFormatError("its front matter is not a mapping of keys to values")
    name = meta.get("name", folder)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise SkillFormatError("name: 1-64 of a-z 0-9 _ - (starting with a letter or digit)")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("description: missing (one line saying when to use the skill)")
    if len(description) > MAX_DESCRIPTION:
        raise SkillFormatError(f"description: longer than {MAX_DESCRIPTION} characters")
    requires = _requirements(meta.get("requires"))
    body = "".join(lines[end + 1 :]).strip("\n")
    return name, " ".join(description.split()), requires, body


def _requirements(raw: Any) -> Requirements:
    if raw is None:
        return Requirements()
    if not isinstance(raw, dict) or set(raw) - {"bins", "env"}:
        raise SkillFormatError("requires: a mapping with 'bins' and/or 'env' (lists of names)")
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("bins", "env"):
        value = raw.get(key) or []
        if not isinstance(value, list) or not all(
            isinstance(v, str) and _WORD.fullmatch(v) for v in value
        ):
            raise SkillFormatError(f"requires.{key}: a list of names (e.g. [curl, jq])")
        lists[key] = tuple(value)
    return Requirements(lists["bins"], lists["env"])


@dataclass(frozen=True)
class _Cached:
    key: tuple[int, int, int, int]  # device, inode, size, mtime_ns
    skill: Skill | None
    problem: Problem | None


class SkillCatalog:
    """The skills of an agent workspace and the shared folders, read from disk with a cache."""

    def __init__(
        self,
        shared: Sequence[Path] = (),
        environ: Mapping[str, str] | None = None,
        which: Which = on_exec_path,
    ) -> None:
        self.shared = list(shared)
        self.environ = environ if environ is not None else {}
        self.which = which
        self._cache: dict[Path, _Cached] = {}

    def find(self, workspace: Path | None) -> tuple[list[Found], list[Problem]]:
        """The skills ``workspace`` (an agent's workspace dir; None: shared only) sees, by
        name (the first of a name wins), and the SKILL.md files that could not be used."""
        found: dict[str, Found] = {}
        problems: list[Problem] = []
        sources: list[tuple[Path, bool]] = [(d, True) for d in self.shared]
        if workspace is not None:
            sources.insert(0, (workspace, False))
        for source, shared in sources:
            for skill, problem in self._scan(source, shared):
                if problem is not None:
                    problems.append(problem)
                elif skill is not None and skill.name not in found:
                    missing = skill.requires.missing(self.environ, self.which)
                    found[skill.name] = Found(skill, tuple(missing))
        return sorted(found.values(), key=lambda f: f.skill.name), problems

    def _scan(self, source: Path, shared: bool) -> Iterable[tuple[Skill | None, Problem | None]]:
        dirfd = _open_skills_dir(source, shared)
        if dirfd is None:
            return
        base = source if shared else source / SKILLS_FOLDER
        try:
            folders = sorted(n for n in os.listdir(dirfd) if not n.startswith("."))
            for folder in folders:
                yield self._read(dirfd, base, folder, shared)
        finally:
            os.close(dirfd)

    def _read(
        self, dirfd: int, source: Path, folder: str, shared: bool
    ) -> tuple[Skill | None, Problem | None]:
        relative = f"{folder}/{SKILL_FILE}"
        path = source / relative
        try:
            st = os.stat(relative, dir_fd=dirfd)
        except OSError:
            self._cache.pop(path, None)
            return None, None  # a folder without a SKILL.md (or a plain file): not a skill
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._cache.get(path)
        if cached is None or cached.key != key:
            skill, problem = _load(dirfd, source, folder, shared)
            if problem is not None:
                log.warning("skill %s not loaded: %s", path, problem.reason)
            cached = _Cached(key, skill, problem)
            self._cache[path] = cached
        return cached.skill, cached.problem


def _open_skills_dir(source: Path, shared: bool) -> int | None:
    """A descriptor of the skills dir: a shared dir as configured, a workspace's ``skills/``
    opened beneath the workspace (never through a symlink leading out of it)."""
    try:
        if shared:
            return os.open(source, _DIR_FLAGS)
        workspace = os.open(source, _DIR_FLAGS | os.O_NOFOLLOW)
        try:
            return open_no_symlinks(workspace, SKILLS_FOLDER, _DIR_FLAGS)
        finally:
            os.close(workspace)
    except OSError as exc:
        if exc.errno == errno.EXDEV:
            log.warning("%s/%s leads outside the workspace: skipped", source, SKILLS_FOLDER)
        elif exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            log.warning("skills in %s cannot be read (%s)", source, exc.strerror)
        return None


def _load(
    dirfd: int, source: Path, folder: str, shared: bool
) -> tuple[Skill | None, Problem | None]:
    path = source / folder / SKILL_FILE
    # A workspace's skills follow no symlink at all (one inside could lead SKILL.md to the
    # owner's MEMORY.md); the operator's shared folders may use links that stay inside.
    opener = open_beneath if shared else open_no_symlinks
    try:
        fd = opener(dirfd, f"{folder}/{SKILL_FILE}", os.O_RDONLY | os.O_NONBLOCK | O_CLOEXEC)
    except OSError as exc:
        why = {
            errno.EXDEV: "it leads outside its skills folder",
            errno.ELOOP: "it is or passes through a symbolic link",
        }.get(exc.errno or 0, exc.strerror)
        return None, Problem(path, str(why))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, Problem(path, "it is not a regular file")
        if st.st_size > MAX_SKILL_BYTES:
            return None, Problem(path, f"it is larger than {MAX_SKILL_BYTES // 1024} KiB")
        data = os.pread(fd, MAX_SKILL_BYTES + 1, 0)
    finally:
        os.close(fd)
    try:
        name, description, requires, body = parse_skill(data.decode("utf-8"), folder)
    except UnicodeDecodeError:
        return None, Problem(path, "it is not UTF-8 text")
    except SkillFormatError as exc:
        return None, Problem(path, str(exc))
    return Skill(name, description, body, folder, source, shared, requires), None
