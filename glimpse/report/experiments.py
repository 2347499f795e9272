"""What the report compares: every model on the same task at a fixed budget of epochs.

An :class:`Experiment` is a ``train.py`` configuration (preset overrides) and a budget; the
report trains it once per seed into ``<runs>/<name>-seed<k>``. The attention models' budgets
are what two CPU cores afford in about an hour for the whole report (far from the papers'
hundreds of epochs); the full-image baselines cost seconds per epoch and get enough epochs to
level off. ``report.py --budget 2`` doubles every budget.
"""
from __future__ import annotations

from dataclasses import dataclass, field

TASK_PRESET = "cluttered60"  # the task every model of the report is trained and tested on
GLIMPSE_COUNTS = tuple(range(1, 9))


@dataclass(frozen=True)
class Experiment:
    name: str          # run-name prefix, e.g. "ram"
    label: str         # how tables and figures call it
    family: str        # "hard", "soft" or "baseline"
    epochs: int        # budget at --budget 1
    overrides: dict = field(default_factory=dict)  # train.py options beyond --preset

    def train_options(self, seed: int, epochs: int) -> dict:
        return {"preset": TASK_PRESET, **self.overrides, "seed": seed, "epochs": epochs}

    def run_name(self, seed: int) -> str:
        return f"{self.name}-seed{seed}"


RAM = Experiment("ram", "RAM (hard, REINFORCE)", "hard", 20, {"mode": "hard"})
DRAW = Experiment("draw", "DRAW read (soft)", "soft", 6, {"mode": "soft", "soft_arch": "draw"})
SAT = Experiment("sat", "Show-Attend-Tell (soft)", "soft", 3, {"mode": "soft", "soft_arch": "sat"})
CNN = Experiment("cnn", "full-image CNN", "baseline", 20, {"mode": "full", "full_arch": "cnn"})
FC = Experiment("fc", "fully connected net", "baseline", 30, {"mode": "full", "full_arch": "fc"})
RAM_RANDOM = Experiment("ram-random", "RAM, random glimpses", "baseline", 20,
                        {"mode": "hard", "random_glimpses": True, "first_location": "random"})

MODELS = (RAM, DRAW, SAT, CNN, FC, RAM_RANDOM)
SWEPT = (RAM, DRAW)  # accuracy against the number of glimpses


def default_glimpses(experiment: Experiment) -> int:
    from glimpse.training.config import resolve_config

    return resolve_config({"preset": TASK_PRESET, **experiment.overrides}).n_glimpses


def with_glimpses(experiment: Experiment, n_glimpses: int) -> Experiment:
    """The experiment with ``n_glimpses`` glimpses; the experiment itself at its default count,
    so that the sweep reuses the comparison's runs."""
    if n_glimpses == default_glimpses(experiment):
        return experiment
    return Experiment(f"{experiment.name}-{n_glimpses}g", f"{experiment.label}, {n_glimpses} glimpses",
                      experiment.family, experiment.epochs, {**experiment.overrides, "n_glimpses": n_glimpses})


def sweep(experiment: Experiment, counts=GLIMPSE_COUNTS) -> list[Experiment]:
    return [with_glimpses(experiment, n) for n in counts]
