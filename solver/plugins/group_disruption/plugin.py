"""``disruptionMode: all`` (Kubernetes 1.37's PodGroup): greedy evicts such a group whole, the
model ties its members' evictions, the validator refuses a plan that breaks it up."""

from __future__ import annotations

from ...plugin_api import Plugin
from . import check, encode
from .greedy import WholeGroupEviction

NAME = "GroupDisruption"

PLUGIN = Plugin(NAME, greedy=WholeGroupEviction.of, window_encode=(encode.encode,), checks=(check.check,))
