"""What the CLI shows only to a person at a terminal: a progress line while a
command works, and a one-line summary after it. Both go to stderr, so they never
mix with data on stdout, and both stay silent when stderr is not a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def on_terminal() -> bool:
    return sys.stderr.isatty()


@contextmanager
def progress_line(title: str, enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """A spinner line "title: <what is happening>" on a terminal; the yielded
    callback sets what is happening. Without a terminal the callback does nothing."""
    if not (enabled and on_terminal()):
        yield lambda _text: None
        return
    from rich.console import Console

    console = Console(stderr=True)
    with console.status(f"{title}…") as status:
        yield lambda text: status.update(f"{title}: {text}")


def human_size(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return f"{size} B"


def summary_line(text: str, enabled: bool = True) -> None:
    if enabled and on_terminal():
        print(text, file=sys.stderr)
