"""Approval rules: which tool calls pause the run until a person approves. Pure, no I/O.

Syntax of one rule: ``TOOL`` or ``TOOL:ARG=PATTERN[,ARG=PATTERN...]``.

- ``TOOL`` is a policy entry: a tool name, ``group:<name>`` (the tools whose spec declares the
  group; a tool the run does not know is held by every group rule) or a ``*`` glob (see
  :mod:`..tools.policy`).
- ``ARG`` is a top-level argument name (letters, digits, ``_``, ``-``); ``PATTERN`` is a glob where
  only ``*`` is a wildcard, matched case-sensitively against the whole value. A comma followed by
  ``name=`` starts the next argument pattern; any other comma belongs to the pattern.
- All argument patterns of a rule must match. String values match as they are; numbers and booleans
  as their JSON text (``3``, ``true``); a missing, ``null``, object or list argument never matches.

Rules are about what a call does, not which tool does it (see :mod:`.call_facets`):

- a rule naming a tool that runs commands (``exec``, ``process``) or writes files (``write``,
  ``edit``, ``apply_patch``) covers the other tools that do the same: ``write:path=*.sh`` also
  gates ``edit`` and ``apply_patch`` on ``*.sh``, ``exec:command=rm *`` also gates ``process``
  starting ``rm``. A rule with other arguments than the shared ones (``command``, ``cwd``;
  ``path``, ``content``) stays with the tools it names;
- ``command`` patterns match the command line and each program it runs with its arguments:
  ``exec:command=rm *`` gates ``/bin/rm x``, ``ls; rm x``, ``env nice rm x``, ``sh -c 'rm x'``,
  and every command whose programs cannot be read (``$(...)``, variables, a script);
- ``path`` patterns match paths as given and normalised, and every file of a patch.

Examples: ``exec``, ``exec:command=rm *``, ``write:path=*.sh``, ``group:runtime``,
``web_fetch:url=http://*``, ``exec:command=git push*,cwd=/srv/*``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..tools.policy import Catalogue, Entry, PolicyError, glob_regex
from .call_facets import SHARED_ARGS, SIBLINGS, facets

_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_ARG_SPLIT = re.compile(r",(?=[A-Za-z_][A-Za-z0-9_-]*=)")


def _split_tool(text: str) -> tuple[str, str | None]:
    """``group:runtime:command=x`` -> (``group:runtime``, ``command=x``); no colon -> no args."""
    start = len("group:") if text.startswith("group:") else 0
    colon = text.find(":", start)
    if colon < 0:
        return text, None
    return text[:colon], text[colon + 1 :]


def _as_text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


@dataclass(frozen=True)
class ApprovalRule:
    """A tool entry plus argument patterns (name, glob), all of which must match."""

    tool: str
    args: tuple[tuple[str, str], ...] = ()
    _entry: Entry = field(init=False, repr=False, compare=False)
    _arg_patterns: tuple[tuple[str, re.Pattern[str]], ...] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_entry", Entry.parse(self.tool, "tool"))
        seen: set[str] = set()
        for name, _ in self.args:
            if not _ARG_NAME.fullmatch(name):
                raise PolicyError(f"argument name {name!r} must be letters, digits, _ or -")
            if name in seen:
                raise PolicyError(f"argument {name!r} is given twice")
            seen.add(name)
        compiled = tuple((name, glob_regex(pattern)) for name, pattern in self.args)
        object.__setattr__(self, "_arg_patterns", compiled)

    @classmethod
    def parse(cls, raw: object, where: str = "approval rule") -> ApprovalRule:
        if not isinstance(raw, str):
            raise PolicyError(f"{where}: expected a string, got {type(raw).__name__}")
        tool, rest = _split_tool(raw.strip())
        args: list[tuple[str, str]] = []
        if rest is not None:
            if not rest:
                raise PolicyError(f"{where}: {raw!r} has ':' but no ARG=PATTERN after it")
            for part in _ARG_SPLIT.split(rest):
                name, eq, pattern = part.partition("=")
                if not eq:
                    raise PolicyError(f"{where}: {part!r} in {raw!r} is not ARG=PATTERN")
                args.append((name.strip(), pattern))
        try:
            return cls(tool, tuple(args))
        except PolicyError as exc:
            raise PolicyError(f"{where}: {raw!r}: {exc}") from None

    def __str__(self) -> str:
        if not self.args:
            return self.tool
        return f"{self.tool}:{','.join(f'{n}={p}' for n, p in self.args)}"

    def matches(self, tool: str, args: Mapping[str, object] | None, catalogue: Catalogue) -> bool:
        """Whether the rule holds a call of ``tool`` with ``args``; ``catalogue``: the groups
        of the tools known (see :class:`~..tools.policy.Policy`). It fails closed: a tool not
        in it is in every group a rule names."""
        named = self._entry.denies(tool, catalogue.get(tool))
        if not named and not self._covers(tool, catalogue):
            return False
        call = facets(tool, args)
        if call is None and not named:
            return False  # e.g. process polling: it runs nothing
        given = args if isinstance(args, Mapping) else {}
        for name, pattern in self._arg_patterns:
            facet = call.get(name) if call is not None else None
            if facet is not None:
                if not (facet.any_value or any(pattern.fullmatch(v) for v in facet.values)):
                    return False
                continue
            value = _as_text(given.get(name))
            if value is None or not pattern.fullmatch(value):
                return False  # a missing argument never matches
        return True

    def _covers(self, tool: str, catalogue: Catalogue) -> bool:
        """Whether the rule names another tool that does what ``tool`` does, with arguments
        both name alike (see :mod:`.call_facets`)."""
        shared = SHARED_ARGS.get(tool, frozenset())
        return all(name in shared for name, _ in self.args) and any(
            self._entry.matches(other, catalogue.get(other)) for other in SIBLINGS.get(tool, ())
        )


@dataclass(frozen=True)
class ApprovalRules:
    """An ordered set of rules; the first that matches a call is the one reported."""

    rules: tuple[ApprovalRule, ...] = ()

    @classmethod
    def parse(cls, raw: object, where: str = "approval") -> ApprovalRules:
        """Parse a list of rule strings (``None`` = no rules)."""
        if raw is None:
            return cls()
        if isinstance(raw, str) or not isinstance(raw, list | tuple):
            raise PolicyError(f"{where}: expected a list of rule strings, got {type(raw).__name__}")
        return cls(tuple(ApprovalRule.parse(item, f"{where}[{i}]") for i, item in enumerate(raw)))

    @classmethod
    def of(cls, rules: Iterable[str]) -> ApprovalRules:
        return cls.parse(list(rules))

    def requires_approval(
        self, tool: str, args: Mapping[str, object] | None, catalogue: Catalogue
    ) -> ApprovalRule | None:
        """The first rule holding the call; ``catalogue``: the policy's (``Policy.catalogue``)."""
        return next((rule for rule in self.rules if rule.matches(tool, args, catalogue)), None)
