"""The configuration reference: every setting of every settings class as data
(:func:`collect`), rendered as ``docs/configuration.md`` (:func:`render`) and checked for drift
(``python -m switchboard.settings_reference --check``, run by ``make lint``).

The data (:class:`Setting`: variable, readers, type with bounds and choices, default,
description, secret, required) is the single model of the settings: a JSON Schema of a
configuration file can be generated from it as well.
"""

from __future__ import annotations

from .markdown import render
from .model import Setting, Source, collect, missing, sources
from .readable import TypeInfo

__all__ = ["Setting", "Source", "TypeInfo", "collect", "missing", "render", "sources"]
