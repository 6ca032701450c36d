"""The program the sandbox's python runs first (``python3 -I -S -c <source>``)."""

from __future__ import annotations

from pathlib import Path

from switchboard_tools.sandbox import inner, inner_seccomp


def inner_source() -> str:
    """The program the sandbox's python runs first: it registers :mod:`.inner_seccomp` and
    :mod:`.inner` from their source (standard library only, so nothing else is needed inside)
    and runs ``inner.main`` on its arguments."""
    modules = [
        (module.__name__, Path(module.__file__ or "").read_text(encoding="utf-8"))
        for module in (inner_seccomp, inner)
    ]
    return (
        "import sys, types\n"
        f"for _name, _source in {modules!r}:\n"
        "    _parent = ''\n"
        "    for _part in _name.split('.'):\n"
        "        _full = _parent + _part\n"
        "        if _full not in sys.modules:\n"
        "            sys.modules[_full] = types.ModuleType(_full)\n"
        "            if _parent:\n"
        "                setattr(sys.modules[_parent[:-1]], _part, sys.modules[_full])\n"
        "        _parent = _full + '.'\n"
        "    exec(compile(_source, _name, 'exec'), sys.modules[_name].__dict__)\n"
        f"sys.exit(sys.modules[{inner.__name__!r}].main(sys.argv[1:]))\n"
    )
