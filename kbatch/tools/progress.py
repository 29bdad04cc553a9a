"""A progress bar on stderr for long runs, shown only on a terminal."""

from __future__ import annotations

import sys
import time


class Progress:
    """``with Progress(total, "verify") as bar: bar.update(1)``; silent when piped."""

    def __init__(self, total: int, label: str, stream=None, min_interval: float = 0.1):
        self.total = max(total, 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)()) and total > 1
        self.done = 0
        self._last = 0.0
        self._min_interval = min_interval
        self._start = time.monotonic()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: int = 1, note: str = "") -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._last >= self._min_interval or self.done >= self.total):
            self._last = now
            width = 30
            filled = int(width * self.done / self.total) if self.total else width
            bar = "#" * filled + "-" * (width - filled)
            self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} "
                              f"{now - self._start:5.1f}s {note[:40]:<40}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False
