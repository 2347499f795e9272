"""Progress for long work, on a terminal and off it.

On a terminal: a tqdm bar. Redirected (a background job, a notebook's log, CI): tqdm would stay
silent, so a line is printed every ``every`` seconds instead ("train: 1,200/8,580 step (14 %),
52.1 step/s, 2m21s left, loss=0.512"), and one at the end.
"""
from __future__ import annotations

import sys
import time

from tqdm import tqdm

LINE_EVERY_SECONDS = 30.0


class LineProgress:
    """tqdm's ``update`` / ``set_postfix`` / ``close`` / iteration, printed as plain lines."""

    def __init__(self, iterable=None, *, total: int | None = None, desc: str = "", unit: str = "it",
                 initial: int = 0, every: float | None = None, file=None, timed: bool = True, **_):
        self.iterable, self.total, self.desc, self.unit, self.timed = iterable, total, desc, unit, timed
        self.n, self.file = initial, file or sys.stderr
        self.every = LINE_EVERY_SECONDS if every is None else every
        self.postfix = ""
        self._start_n, self._start = initial, time.perf_counter()
        self._last = self._start

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.perf_counter()
        if now - self._last >= self.every:
            self._last = now
            self._print(now)

    def set_postfix(self, **values) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def close(self) -> None:
        if self._last is not None:
            self._print(time.perf_counter())
            self._last = None

    def _print(self, now: float) -> None:
        rate = (self.n - self._start_n) / max(now - self._start, 1e-9)
        parts = [f"{self.desc}: {self.n:,}" + (f"/{self.total:,} {self.unit} ({100 * self.n / self.total:.0f} %)"
                                               if self.total else f" {self.unit}")]
        if self.timed:
            parts.append(f"{rate:,.1f} {self.unit}/s")
        if self.timed and self.total and rate > 0 and self.n < self.total:
            left = (self.total - self.n) / rate
            parts.append(f"{int(left // 60)}m{int(left % 60):02d}s left")
        if self.postfix:
            parts.append(self.postfix)
        print(", ".join(parts), file=self.file, flush=True)


def progress(iterable=None, *, disable: bool = False, leave: bool = True, timed: bool = True, **kwargs):
    """A progress bar on a terminal, progress lines every LINE_EVERY_SECONDS off it, nothing when
    ``disable``. Keywords as tqdm's (total, desc, unit, initial). ``timed=False`` leaves out the
    rate and the time left, for items of very different lengths (the report's runs), where they
    would mislead."""
    if disable:
        return tqdm(iterable, disable=True, **kwargs)
    if sys.stderr.isatty():
        bar_format = None if timed else "{l_bar}{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}]"
        return tqdm(iterable, leave=leave, dynamic_ncols=True, bar_format=bar_format, **kwargs)
    if not leave:  # a nested bar (validation inside training): its parent reports the progress
        return tqdm(iterable, disable=True, **kwargs)
    return LineProgress(iterable, timed=timed, **kwargs)


def say(message: str) -> None:
    """A line on stderr that does not break a progress bar."""
    tqdm.write(message, file=sys.stderr)
