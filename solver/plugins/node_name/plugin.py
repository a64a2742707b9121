"""NodeName: a pod naming its node (static)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import filter

PLUGIN = Plugin(filter.NAME, filter=filter, static=True)
