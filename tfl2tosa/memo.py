"""The one bounded memo: what a conversion works out again and again (option
tables, multipliers, constants, type texts) is kept for the next request, and a
long-lived process (a batch worker, a Python caller) converting model after
model does not grow without bound."""

from __future__ import annotations

from typing import Any


class BoundedMemo(dict):
    """A dict that forgets everything once it holds `limit` entries."""

    __slots__ = ("limit",)

    def __init__(self, limit: int = 4096) -> None:
        super().__init__()
        self.limit = limit

    def keep(self, key: Any, value: Any) -> Any:
        """Remember `value` under `key`; returns `value`."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value
