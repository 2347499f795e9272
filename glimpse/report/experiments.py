"""What the report compares: every model on the same task at a fixed budget of epochs.

An :class:`Experiment` is a ``train.py`` configuration (preset overrides) and a budget; the
report trains it once per seed into ``<runs>/<name>-seed<k>``. The attention models' budgets
are what two CPU cores afford in about an hour for the whole report (far from the papers'
hundreds of epochs); the full-image baselines cost seconds per epoch and get enough epochs to
level off. ``report.py --budget 2`` doubles every budget. ``report.py --converged`` trains the
attention families instead with their best-known recipes until their validation error levels
off (:func:`converged`: hours each on 2 cores); models whose families state no such recipe keep theirs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from glimpse.models import Family, find_family, list_families
from glimpse.training.config import family_options, resolve_config

TASK_PRESET = "cluttered60"  # the task every model of the report is trained and tested on
GLIMPSE_COUNTS = tuple(range(1, 9))


@dataclass(frozen=True)
class Experiment:
    name: str          # run-name prefix, e.g. "ram"
    label: str         # how tables and figures call it
    group: str         # how the report groups it: "hard", "soft" or "baseline"
    epochs: int        # budget at --budget 1
    overrides: dict = field(default_factory=dict)  # train.py options beyond --preset
    paper: str | None = None  # published test error % on this task, if any
    learns_attention: bool = True  # False for RAM with random glimpses: no attention gradient to measure
    arch: str | None = None  # the registered family it trains (None: the overrides say)

    def train_options(self, seed: int, epochs: int) -> dict:
        return {"preset": TASK_PRESET, **self.overrides, "seed": seed, "epochs": epochs}

    def run_name(self, seed: int) -> str:
        return f"{self.name}-seed{seed}"


def family_experiments(family: Family) -> list[Experiment]:
    """A registered family on the report's task, at the budget its module states, and each variant it
    declares (``report_variants``: a name, a label and the options that make it)."""
    group = family.mode if family.has_attention else "baseline"
    learns = family.learns_where_to_look  # False: no attention gradient to measure (a fixed crop)
    base = Experiment(family.name, family.title, group, family.report_epochs, family_options(family),
                      family.paper_error, learns_attention=learns, arch=family.name)
    return [base, *(Experiment(f"{family.name}-{variant}", label, group, family.report_epochs,
                               {**family_options(family), **options}, learns_attention=learns, arch=family.name)
                    for variant, (label, options) in family.report_variants.items())]


def baseline_experiments(family: Family) -> list[Experiment]:
    """The paper's baselines a family declares (``report_baselines``), at its short budget: they learn
    nothing about where to look, so there is no attention gradient to measure and no converged recipe."""
    return [Experiment(f"{family.name}-{name}", label, "baseline", family.report_epochs,
                       {**family_options(family), **options}, paper, learns_attention=False, arch=family.name)
            for name, (label, options, paper) in family.report_baselines.items()]


# every registered family and its variants, then the baselines they declare (RAM with random glimpses)
FAMILIES = tuple(e for f in list_families() for e in family_experiments(f))
MODELS = (*FAMILIES, *(e for f in list_families() for e in baseline_experiments(f)))
SWEPT = tuple(e for e in FAMILIES if e.name in {f.name for f in list_families() if f.report_sweep})
# REINFORCE's baselines compared (the learned one against leave-one-out), on the families that ask for it
ESTIMATED = tuple(e for e in FAMILIES if e.name in {f.name for f in list_families() if f.report_estimators})
ESTIMATOR_SAMPLES = (2, 4, 8)  # --reinforce-samples K trained beside the learned baseline (K = 1)


def converged(experiment: Experiment) -> Experiment:
    """The experiment trained to convergence (``report.py --converged``): its family's best-known
    recipe for its ``converged_epochs``, in runs of its own (``<name>-converged-seed<k>``). An
    experiment whose family states no such budget (the full-image baselines, RAM with random
    glimpses) stays as it is, at its short budget."""
    family = find_family(experiment.arch)
    if family is None or family.converged_epochs is None or not experiment.learns_attention:
        return experiment
    return Experiment(f"{experiment.name}-converged", experiment.label, experiment.group, family.converged_epochs,
                      {**family.converged_recipe, **experiment.overrides}, experiment.paper,
                      experiment.learns_attention, experiment.arch)


def doubled(experiment: Experiment) -> Experiment:
    """The experiment at twice its budget, in runs of its own (``<name>-x2-seed<k>``): the check that a
    converged run's plateau is not a pause (``report.py --converged`` trains it for seed 0)."""
    return Experiment(f"{experiment.name}-x2", f"{experiment.label}, twice the epochs", experiment.group,
                      2 * experiment.epochs, experiment.overrides, experiment.paper, experiment.learns_attention,
                      experiment.arch)


def default_glimpses(experiment: Experiment) -> int:
    return resolve_config({"preset": TASK_PRESET, **experiment.overrides}).n_glimpses


def with_glimpses(experiment: Experiment, n_glimpses: int) -> Experiment:
    """The experiment with ``n_glimpses`` glimpses; the experiment itself at its default count,
    so that the sweep reuses the comparison's runs."""
    if n_glimpses == default_glimpses(experiment):
        return experiment
    return Experiment(f"{experiment.name}-{n_glimpses}g", f"{experiment.label}, {n_glimpses} glimpses",
                      experiment.group, experiment.epochs, {**experiment.overrides, "n_glimpses": n_glimpses},
                      arch=experiment.arch)


def sweep(experiment: Experiment, counts=GLIMPSE_COUNTS) -> list[Experiment]:
    return [with_glimpses(experiment, n) for n in counts]


def with_samples(experiment: Experiment, samples: int) -> Experiment:
    """The experiment trained with the leave-one-out baseline over ``samples`` trajectories per
    image (``--reinforce-samples``); the experiment itself for 1 (its learned baseline)."""
    if samples == 1:
        return experiment
    return Experiment(f"{experiment.name}-loo{samples}", f"{experiment.label}, leave-one-out K = {samples}",
                      experiment.group, experiment.epochs, {**experiment.overrides, "reinforce_samples": samples},
                      arch=experiment.arch)


def by_name(name: str) -> Experiment:
    """The report's experiment called ``name`` (a family's name, or "ram-random": the random-glimpse baseline)."""
    for experiment in MODELS:
        if experiment.name == name:
            return experiment
    raise ValueError(f"no experiment {name!r}; the report has {[e.name for e in MODELS]}")
