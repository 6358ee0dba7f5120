"""What a toolchain family module gives generate.py: cases, and what each case builds."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass
class Built:
    """One produced model: its bytes, each model input's real range (model input order;
    integer ranges half-open), the config it came from and the recipe that made it."""

    data: bytes
    ranges: list[tuple[float, float]]
    config: dict
    recipe: str
    notes: str = ""


@dataclasses.dataclass
class Case:
    path: str  # relative to models/toolchains
    build: Callable[[], Built]
