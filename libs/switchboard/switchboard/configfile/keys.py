"""Which key of ``switchboard.toml`` is which setting: the settings reference's model
(:mod:`switchboard.settings_reference`) read as sections of keys.

A key is a settings field's name (``http_port`` for ``SB_HTTP_PORT``, ``anthropic_api_key`` for
``ANTHROPIC_API_KEY``). Settings every service reads are written at the top level; any other in
the section of a program that reads it (``[gateway]``, ``[agent]``, ``[launcher]``...). A setting
several programs read may be written in any of their sections: it is one variable, so two
different values for it are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from switchboard.settings_reference import Setting, Source, collect, sources

TOP = ""  # the section name of the top level

# Not in the file: the file lives in SB_HOME, so it cannot choose it, nor name itself.
EXCLUDED = frozenset({"SB_HOME", "SB_CONFIG_FILE", "SB_CONFIG_FROM_FILE"})


@dataclass(frozen=True)
class Catalog:
    sections: dict[str, dict[str, Setting]]  # section -> key -> setting
    sources: tuple[Source, ...]

    def describe(self, section: str) -> str:
        return "the top level" if section == TOP else f"[{section}]"

    def dotted(self, section: str, key: str) -> str:
        return key if section == TOP else f"{section}.{key}"

    def find(self, env: str) -> list[tuple[str, str]]:
        """Every (section, key) that names the variable ``env``."""
        return [
            (section, key)
            for section, keys in self.sections.items()
            for key, setting in keys.items()
            if setting.env == env
        ]


def _placeable(setting: Setting) -> bool:
    # SB_<CHANNEL>_DM_POLICY and the like: the file says it with channel_security instead.
    return "<" not in setting.env and setting.env not in EXCLUDED


@cache
def catalog() -> Catalog:
    chosen = sources()
    services = {s.name for s in chosen if s.service}
    settings = [s for s in collect(chosen) if _placeable(s)]
    sections: dict[str, dict[str, Setting]] = {TOP: {}}
    sections.update({s.name: {} for s in chosen})
    for setting in settings:
        if services <= set(setting.services):
            homes = [TOP, *(r for r in setting.services if r not in services)]
        else:
            homes = list(setting.services)
        for home in homes:
            if setting.field in sections[home]:
                other = sections[home][setting.field].env
                raise ValueError(f"[{home}] {setting.field}: both {other} and {setting.env}")
            sections[home][setting.field] = setting
    return Catalog(sections, tuple(chosen))
