"""A field's description where the settings classes keep it: ``Field(description=...)``, else
the comment lines directly above the field and the comment at the end of its line.

The comments are read with :mod:`tokenize` and the fields found with :mod:`ast` (not a regex
over the file), so a ``#`` inside a string or a default is never taken for a comment.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
from dataclasses import dataclass
from functools import cache

from pydantic.fields import FieldInfo

# Comments that organise a file rather than describe a field: "--- webchat (...) ---",
# "--- end hooks ---", and tool directives.
_NOT_A_DESCRIPTION = re.compile(r"^-{2,}.*-{2,}$|^(type|noqa|pragma|fmt)\b", re.IGNORECASE)


@dataclass(frozen=True)
class _Source:
    """One file: its syntax tree and its comments by line (whole-line ones apart from those
    that end a line of code)."""

    tree: ast.Module
    whole_line: dict[int, str]
    trailing: dict[int, str]


@cache
def _source(path: str) -> _Source:
    with open(path, encoding="utf-8") as file:
        text = file.read()
    whole: dict[int, str] = {}
    trailing: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.COMMENT:
            continue
        line, column = token.start
        comment = token.string.lstrip("#").strip()
        (whole if not token.line[:column].strip() else trailing)[line] = comment
    return _Source(ast.parse(text, path), whole, trailing)


def _field_statement(tree: ast.Module, qualname: str, field: str) -> ast.AnnAssign | None:
    """The ``field: type = ...`` statement in the body of the class ``qualname``."""
    body: list[ast.stmt] = tree.body
    for part in qualname.split("."):
        found = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if found is None:
            return None
        body = found.body
    for node in body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == field
        ):
            return node
    return None


def defining_class(cls: type, field: str) -> type:
    """The class of ``cls``'s MRO whose own body declares ``field``."""
    for klass in cls.__mro__:
        if field in inspect.get_annotations(klass):
            return klass
    return cls


def comment_of(cls: type, field: str) -> str:
    """The comment lines directly above ``field`` in ``cls``'s source (or the class of its
    MRO that declares it) and the comment ending its statement, as one text ("" : none)."""
    klass = defining_class(cls, field)
    try:
        path = inspect.getsourcefile(klass)
    except TypeError:
        return ""
    if path is None:
        return ""
    source = _source(path)
    statement = _field_statement(source.tree, klass.__qualname__, field)
    if statement is None:
        return ""
    above: list[str] = []
    line = statement.lineno - 1
    while line in source.whole_line:
        above.insert(0, source.whole_line[line])
        line -= 1
    end = statement.end_lineno or statement.lineno
    after = [source.trailing[n] for n in range(statement.lineno, end + 1) if n in source.trailing]
    kept = [c for c in [*above, *after] if c and not _NOT_A_DESCRIPTION.match(c)]
    return " ".join(kept)


def description_of(cls: type, field: str, info: FieldInfo, env: str) -> str:
    """``Field(description=...)``, else the field's comments; a leading repetition of the
    variable's own name (``# SB_HOME``, ``# SB_NATS_PORT: ...``) is dropped."""
    text = (info.description or comment_of(cls, field)).strip()
    if text.startswith(env):  # the exact name only: "Above..." of SB_ABOVE is a sentence
        rest = text[len(env) :]
        if not rest or not (rest[0].isalnum() or rest[0] == "_"):
            text = rest.lstrip(" :;,.-").strip()
    return text
