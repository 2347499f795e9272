"""Checks the families' model configs share (RAM, DRAM, the differentiable retina; the sensor's
fit to a task for every family that counts its pixels): one rule, one message, raised as
ValueError naming the field."""
from __future__ import annotations


def check_one_of(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")


def check_share(name: str, value: float) -> None:
    """A share of a gradient that flows on (0: none, 1: all of it)."""
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be in [0, 1], got {value}")


def check_count(name: str, value, minimum: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")


def check_conv_glimpse_size(glimpse_size: int) -> None:
    """The conv glimpse network (two 2x2 max-pools) needs a side divisible by 4."""
    if glimpse_size % 4:
        raise ValueError(f"a conv glimpse network pools twice by 2: glimpse_size must be divisible by 4, "
                         f"got {glimpse_size}")


def check_fits_task(config, task: dict, names=("canvas_size",)) -> None:
    """The model ``config``'s sensor fields ``names`` are the ``task``'s: a cost counted from the
    task describes this model only then."""
    for name in names:
        if getattr(config, name) != int(task[name]):
            raise ValueError(f"model_config {name}={getattr(config, name)} but task {name}={task[name]}")
