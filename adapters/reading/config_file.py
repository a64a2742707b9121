"""The scheduler config: one YAML or JSON mapping (an empty file means every default)."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Union

from models import SchedulerConfig

from ..input_size import CONFIG_LIMIT
from .documents import single_mapping
from .errors import validate_model

__all__ = ["load_config"]


def load_config(path: Union[str, Path, IO[str], IO[bytes]]) -> SchedulerConfig:
    """A ``SchedulerConfig`` from one YAML/JSON mapping; an empty file means all defaults."""
    data = single_mapping(path, what="config", empty={}, limit=CONFIG_LIMIT)
    return validate_model(SchedulerConfig, data, "config")
