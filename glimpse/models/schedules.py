"""Schedules over a run, shared by the training loop (the learning rate) and the families (the
location policy's std)."""
from __future__ import annotations

import math


def cosine(progress: float) -> float:
    """1 at the start of the run (progress 0), 0 at its end (progress 1), half a cosine between."""
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, max(0.0, progress))))


def annealed(start: float, end: float, progress: float) -> float:
    """From ``start`` to ``end`` over the run, on the cosine."""
    return end + (start - end) * cosine(progress)
