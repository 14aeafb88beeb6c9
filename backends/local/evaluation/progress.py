"""A tiny progress bar on stderr, so long eval runs show they are alive without a dependency."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """`with ProgressBar(total, "perplexity") as bar: bar.update(n)`.

    Draws only on a terminal (or when `enabled=True`), so logs and CI output stay clean.
    """

    def __init__(self, total: int, desc: str, stream: TextIO | None = None,
                 enabled: bool | None = None, width: int = 30) -> None:
        self.total = max(total, 0)
        self.desc = desc
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.width = width
        self.done = 0
        self._started = time.monotonic()
        self._last_draw = 0.0

    def update(self, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        now = time.monotonic()
        # Redraw at most ten times a second, and always at the end.
        if self.enabled and (now - self._last_draw >= 0.1 or self.done == self.total):
            self._last_draw = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        frac = self.done / self.total if self.total else 1.0
        filled = int(frac * self.width)
        rate = self.done / max(now - self._started, 1e-9)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r{self.desc} [{bar}] {self.done}/{self.total} {rate:.1f}/s")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
