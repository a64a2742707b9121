"""NodeUnschedulable: cordoned nodes (static: it prunes variables)."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import filter

PLUGIN = Plugin(filter.NAME, filter=filter, static=True)
