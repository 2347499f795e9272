"""The task both environments share: canvas recipe, sensor and episode length, validated once."""
from __future__ import annotations

import copy
import numbers
from dataclasses import asdict, dataclass

import numpy as np

from envs.data import SPLITS

DIGIT_SIZE = 28
CLUTTER_SIZE = 8
FIRST_LOCATIONS = ("random", "centre")
# Version of the benchmark: the fixed validation and test canvases (envs.engine.fixed_canvas_set)
# and the env ids' suffix. v1: canvases drawn by the torch engine (v0: the numpy recipe).
BENCHMARK_VERSION = 1


def digits_that_fit(canvas_size: int) -> int:
    """How many non-overlapping digits a canvas certainly holds (as a grid): the most a task may ask for."""
    return (canvas_size // DIGIT_SIZE) ** 2

# The lab's tasks, one table: the registered env ids (envs/__init__.py) and train.py's presets
# both read it. Every entry is a set of GlimpseTask fields; the rest take GlimpseTask's defaults.
TASKS: dict[str, dict] = {
    # Mnih et al. 2014's settings
    "mnist28": dict(canvas_size=28, n_clutter=0, centred_digit=True, glimpse_size=8, n_scales=1, n_glimpses=6),
    "translated60": dict(canvas_size=60, n_clutter=0, glimpse_size=12, n_scales=3, n_glimpses=6),
    "cluttered60": dict(canvas_size=60, n_clutter=4, glimpse_size=12, n_scales=3, n_glimpses=6),
    "cluttered100": dict(canvas_size=100, n_clutter=8, glimpse_size=12, n_scales=4, n_glimpses=8),
    # two digits to read left to right, like Ba et al. 2015's two-digit task; glimpses per digit
    "multi100": dict(canvas_size=100, n_clutter=8, n_digits=2, glimpse_size=12, n_scales=4, n_glimpses=8),
}
# TASKS as shipped: a curriculum may change an entry of TASKS in its own process, but the benchmark
# scores a preset's name on these settings only (glimpse/benchmark.py refuses a changed one)
TASKS_AS_SHIPPED: dict[str, dict] = copy.deepcopy(TASKS)


# the largest sizes a task may ask for (the env allocates canvases and glimpses by them)
LIMITS = {"canvas_size": 1024, "n_clutter": 256, "n_glimpses": 64, "n_digits": 16, "context_size": 1024}


@dataclass(frozen=True)
class GlimpseTask:
    """Everything that defines an episode.

    canvas_size: side of the square canvas in pixels.
    n_clutter: 8x8 clutter pieces per canvas.
    centred_digit: place the digit in the centre (plain MNIST) instead of at random.
    n_digits: digits per canvas, at random places that do not overlap, to be read left to right
        (then top to bottom) as a sequence (Ba et al. 2015); the label action is then one class per digit.
    glimpse_size: g, side of each scale of a glimpse.
    n_scales: k, scales per glimpse, each twice as wide as the previous.
    n_glimpses: T, glimpses per digit: an episode has T x n_digits steps (``episode_length``).
    split: which digits: "train", "val" or "test".
    first_location: where the first glimpse is taken: "random" or "centre".
    context_size: side of a coarse view of the whole canvas (area averages, values in [0, 1])
        that every observation carries as ``context``: the input of Ba et al.'s (2015) context
        network. 0: no context view.
    data_dir: MNIST root (None: the lookup order of envs.data).
    """

    canvas_size: int = 60
    n_clutter: int = 4
    centred_digit: bool = False
    n_digits: int = 1
    glimpse_size: int = 12
    n_scales: int = 3
    n_glimpses: int = 6
    split: str = "train"
    first_location: str = "centre"
    context_size: int = 0
    data_dir: str | None = None

    def __post_init__(self):
        def positive_int(name, minimum=1):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
            object.__setattr__(self, name, int(value))  # a numpy integer (np.arange) as the plain int it means

        if not isinstance(self.centred_digit, (bool, np.bool_)):  # "False" from a config file would centre
            raise ValueError(f"centred_digit must be True or False, got {self.centred_digit!r}")
        object.__setattr__(self, "centred_digit", bool(self.centred_digit))

        positive_int("canvas_size", DIGIT_SIZE)
        positive_int("n_clutter", 0)
        positive_int("glimpse_size")
        positive_int("n_scales")
        positive_int("n_glimpses")
        positive_int("n_digits")
        positive_int("context_size", 0)
        for name, cap in LIMITS.items():  # sizes with a natural range: every recipe in the docs lies well inside
            if getattr(self, name) > cap:
                raise ValueError(f"{name} must be at most {cap}, got {getattr(self, name)}")
        if self.context_size > self.canvas_size:
            raise ValueError(f"context_size {self.context_size} is larger than the canvas ({self.canvas_size})")
        if self.n_digits > 1 and self.centred_digit:
            raise ValueError(f"n_digits {self.n_digits}: several digits cannot all be centred (centred_digit)")
        if self.n_digits > digits_that_fit(self.canvas_size):
            raise ValueError(f"n_digits {self.n_digits}: at most {digits_that_fit(self.canvas_size)} non-overlapping "
                             f"{DIGIT_SIZE}x{DIGIT_SIZE} digits fit on a {self.canvas_size}x{self.canvas_size} canvas")
        if self.n_clutter and self.canvas_size < CLUTTER_SIZE:
            raise ValueError(f"canvas_size {self.canvas_size} is smaller than a clutter piece ({CLUTTER_SIZE})")
        if self.glimpse_size > self.canvas_size:
            raise ValueError(f"glimpse_size {self.glimpse_size} is larger than the canvas ({self.canvas_size})")
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {self.split!r}")
        if self.first_location not in FIRST_LOCATIONS:
            raise ValueError(f"first_location must be one of {FIRST_LOCATIONS}, got {self.first_location!r}")
        widest = self.glimpse_size * 2 ** (self.n_scales - 1)
        if widest > 4 * self.canvas_size:
            raise ValueError(f"n_scales {self.n_scales}: the widest scale would be {widest} pixels, more than four "
                             f"{self.canvas_size}-pixel canvases (it would see the canvas as a few pixels)")

    @property
    def episode_length(self) -> int:
        """Steps (glimpses) per episode: ``n_glimpses`` for each digit."""
        return self.n_glimpses * self.n_digits

    def to_dict(self) -> dict:
        return asdict(self)
