"""Build ``compare.md`` and its figures from finished runs: keep every run's record, take the
measurements (cost, speed, gradient noise, paired tests, doubling checks) and hand them to
:mod:`glimpse.report.document`, which writes them.

Everything in the report is computed from the runs' checkpoints and from measurements taken
while it is built; nothing is typed in, except the papers' numbers (each family's
``paper_error``, ``paper_sweep``).
"""
from __future__ import annotations

from pathlib import Path

from envs.data import load_mnist
from envs.engine import fixed_canvas_set
from glimpse.benchmark import TEST_SEED, fixed_set
from glimpse.cli import write_text
from glimpse.models import get_family
from glimpse.report import figures
from glimpse.report.document import Measured, headline, write_document
from glimpse.report.experiments import ESTIMATED, ESTIMATOR_SAMPLES, SWEPT, Experiment, doubled, sweep, with_samples
from glimpse.report.measurements import (SeedRuns, attention_gradient_spread, cost_on_bigger_canvases, cost_per_image,
                                        doubling_check, estimator_variance, keep_records, location_estimators,
                                        paired_tests, throughput)
from glimpse.report.settings import ReportSettings
from glimpse.viz import where_it_looks

REINFORCE_SAMPLES = (1, *ESTIMATOR_SAMPLES)  # the gradient table: the learned baseline and the trained K
N_GALLERY = 6


def keep_every_record(settings: ReportSettings) -> None:
    """A record of every finished run the report reads (``report.py --no-report``: the records
    without the report)."""
    present = [g for g in (settings.collect(e) for e in settings.models) if g.runs]
    check_same_digits(load_mnist(settings.data_dir), [run for g in present for run in g.runs], "its runs and records")
    _keep_records(settings, present)


def build_report(settings: ReportSettings, progress=print) -> Path:
    """Write ``<out>/compare.md`` and its PNGs from the finished runs in ``settings.runs_dir``, or
    from their records in ``settings.records`` where a run's directory is gone; first keep a record
    of every finished run there. Returns the markdown's path. Experiments without finished runs
    are reported as missing."""
    groups = [settings.collect(e) for e in settings.models]
    present = [g for g in groups if g.runs]
    if not present:  # refused before any data is looked for or any folder is made
        raise ValueError(f"no finished runs in {settings.runs_dir} nor records in {settings.records}: "
                         f"train them with --train")
    data = load_mnist(settings.data_dir)
    check_same_digits(data, [run for g in present for run in g.runs], "its runs and records")
    out = settings.out_dir
    out.mkdir(parents=True, exist_ok=True)
    task = present[0].runs[0]["task"]
    test_canvases, _ = fixed_set(task, data.test, "test")
    speed_canvases = test_canvases.images[:settings.speed_images]
    progress(f"[report] keeping a record of every finished run in {settings.records}")
    _keep_records(settings, present)

    progress("[report] measuring cost and speed per model")
    measured, seconds_per_epoch = _cost_and_speed(settings, data, present, speed_canvases, progress)
    progress("[report] measuring the spread of the attention gradient")
    gradients, estimators = _gradient_spreads(settings, data, present, progress)
    two_estimators = _location_estimators(settings, data, present, progress)
    progress("[report] REINFORCE's baselines at equal wall-clock")
    curves = _estimator_runs(settings, data, speed_canvases, seconds_per_epoch)
    if len(curves) > 1:
        figures.estimator_curves(curves, seconds_per_epoch, out / "estimators.png",
                                 get_family(curves[0][1].experiment.arch).title)
    progress("[report] figures")
    figures.learning_curves(present, seconds_per_epoch, out / "learning_curves.png")
    sweep_groups = _glimpse_sweep(settings, out)
    has_gallery = _gallery(present, data, task, out)
    progress("[report] paired tests")
    tests = paired_tests(present)
    doubling = {}  # --converged: each recipe at twice the epochs (every seed so trained) against the budget's seeds
    for group in (g for g in groups if settings.converged and g.experiment.name.endswith("-converged")):
        twice = settings.collect(doubled(group.experiment))
        doubling[group.experiment.name] = [check for seed in twice.seeds
                                           if (check := doubling_check(group, twice, seed=seed)) is not None]
    progress("[report] writing")
    n_test = len(test_canvases.labels)
    path = out / "compare.md"
    growth = {g.experiment.name: cost_on_bigger_canvases(g.experiment) for g in present}
    write_text(path, write_document(Measured(
        settings=settings, data=data, groups=groups, measured=measured, growth=growth,
        seconds_per_epoch=seconds_per_epoch, gradients=gradients, estimators=estimators,
        two_estimators=two_estimators, curves=curves, sweep_groups=sweep_groups, has_gallery=has_gallery,
        n_test=n_test, tests=tests, doubling=doubling)))
    write_text(out / "headline.md", headline(groups, measured, seconds_per_epoch, n_test))
    return path


def shows_attention(group: SeedRuns) -> bool:
    """Whether the report pictures where the group's model looks (and keeps its seed-0 weights for it)."""
    return pictured(group.experiment, group.runs[0]["kind"])


def pictured(experiment: Experiment, kind: str) -> bool:
    return experiment.learns_attention and get_family(kind).has_attention


def keep_record(settings: ReportSettings, experiment: Experiment, seed: int) -> None:
    """Keep a record of the finished run of ``experiment`` and ``seed`` in ``settings.records`` (if
    there is one): a run of the comparison with its results on the fixed and the fresh test canvases,
    and its weights if it is seed 0 of a model whose looking the gallery shows (REINFORCE's estimator
    noise reads them too); a doubled-budget check with its results on both; a run of the sweep or
    of the estimators with its learning curve and test error alone. ``report.py --train`` keeps it
    as soon as the run ends, so a finished run outlives its machine."""
    group = settings.collect(experiment, (seed,))
    if not group.runs:
        return
    if experiment in settings.models:
        weights = settings.seeds[0] if shows_attention(group) else None
        keep_records(group, settings.records, weights_for_seed=weights)
    elif any(experiment == doubled(e) for e in settings.models):  # its check reads the fresh canvases too
        keep_records(group, settings.records)
    else:
        keep_records(group, settings.records, canvas_seeds=())


def check_same_digits(data, runs: list[dict], what: str) -> None:
    """ValueError when ``runs`` (checkpoints or records) were trained on other digits than ``data`` (the
    bundled subset in place of full MNIST, say): their results would be read or scored beside others
    on another test set. Runs from before checkpoints recorded their digits' hash pass."""
    others = sorted({digest for run in runs if (digest := (run.get("provenance") or {}).get("data_sha256"))}
                    - {data.digest})
    if others:
        raise ValueError(f"{what} were trained on other digits (sha256 {', '.join(d[:12] for d in others)}) than "
                         f"{data.source} (sha256 {data.digest[:12]}): give the --data-dir they were trained on")


def _keep_records(settings: ReportSettings, present: list[SeedRuns]) -> None:
    """:func:`keep_record` of every finished run the report reads."""
    first = settings.seeds[0]
    for group in present:
        for run in group.runs:
            keep_record(settings, group.experiment, run["train_config"]["seed"])
        if settings.converged and group.experiment.name.endswith("-converged"):
            for seed in settings.seeds:  # every seed trained at twice the budget is checked
                keep_record(settings, doubled(group.experiment), seed)
    for base in (e for e in ESTIMATED if e in settings.models):
        for k in settings.estimator_samples:
            keep_record(settings, with_samples(base, k), first)
    for base in (e for e in SWEPT if e in settings.models):
        for experiment in sweep(base, settings.glimpse_counts):
            if experiment is not base:
                keep_record(settings, experiment, first)


def _cost_and_speed(settings, data, present, speed_canvases, progress) -> tuple[dict, dict]:
    """Each model's cost per image and its training and evaluation speed, measured here; and the
    seconds an epoch of its training takes at that speed."""
    measured = {}
    for group in present:
        progress(f"[report]   {group.experiment.label}")
        measured[group.experiment.name] = {
            **cost_per_image(group), **throughput(group, data, speed_canvases, settings.speed_steps, settings.data_dir)}
    n_train = len(data.train)
    return measured, {name: n_train / m["train_images_per_second"] for name, m in measured.items()}


def _gradient_spreads(settings, data, present, progress) -> tuple[dict, dict]:
    """The attention gradient's spread at initialisation for every model that learns where to
    look, and for the REINFORCE learners their baselines' noise at the trained weights."""
    gradients, estimators = {}, {}
    for group in present:
        family = get_family(group.runs[0]["kind"])
        if group.experiment.learns_attention and family.has_attention:
            progress(f"[report]   {group.experiment.label}: {settings.grad_batches} minibatches")
            gradients[group.experiment.name] = attention_gradient_spread(
                group, data, settings.grad_batches, settings.grad_batch_size, settings.data_dir)
            if family.learns_by_reinforce and group.has_weights(0):  # REINFORCE's baselines at trained weights
                estimators[group.experiment.name] = [
                    estimator_variance(group, samples, settings.grad_batches, settings.grad_batch_size,
                                       settings.data_dir) for samples in REINFORCE_SAMPLES]
    return gradients, estimators


def _location_estimators(settings, data, present, progress) -> dict:
    """For every model that draws its locations reparameterised (``Family.reparameterised_locations``)
    and keeps its seed-0 weights: REINFORCE's score function against the exact gradient of the same
    policy, at each K of REINFORCE's baselines' table. Each minibatch holds a quarter of the other
    gradient tables' images, so that at K = 4 it plays as many trajectories as they do."""
    measured = {}
    for group in present:
        run = group.runs[0]
        if get_family(run["kind"]).reparameterised_locations(run["model_config"]) and group.has_weights(0):
            progress(f"[report]   {group.experiment.label}: one policy, two estimators")
            measured[group.experiment.name] = [
                location_estimators(group, data, k, settings.grad_batches, max(1, settings.grad_batch_size // 4))
                for k in ESTIMATOR_SAMPLES]
    return measured


def _estimator_runs(settings, data, speed_canvases, seconds_per_epoch: dict) -> list:
    """(label, seed-0 runs) of every REINFORCE estimator trained for the comparison, the learned
    baseline first; their speeds join ``seconds_per_epoch``."""
    curves = []
    for base in (e for e in ESTIMATED if e in settings.models):
        for k in (1, *settings.estimator_samples):
            group = settings.collect(with_samples(base, k), settings.seeds[:1])
            if not group.runs:
                continue
            name = group.experiment.name
            if name not in seconds_per_epoch:
                speed = throughput(group, data, speed_canvases, settings.speed_steps, settings.data_dir)
                seconds_per_epoch[name] = len(data.train) / speed["train_images_per_second"]
            curves.append(("learned baseline" if k == 1 else f"leave-one-out, K = {k}", group))
    return curves


def _glimpse_sweep(settings, out: Path) -> dict:
    """The swept models' seed-0 runs at each number of glimpses, and their figure."""
    sweep_rows, sweep_groups, paper = {}, {}, {}
    for base in (e for e in SWEPT if e in settings.models):
        short = base.label.split(" ")[0]
        paper[short] = list(get_family(base.arch).paper_sweep)
        sweep_groups[short] = [(n, settings.collect(e, settings.seeds[:1])) for n, e in
                               zip(settings.glimpse_counts, sweep(base, settings.glimpse_counts))]
        sweep_rows[short] = [(n, 100 * float(g.test_errors[0])) for n, g in sweep_groups[short] if g.runs]
    if settings.glimpse_counts and sweep_groups:
        figures.glimpse_sweep(sweep_rows, paper, out / "glimpse_sweep.png")
    return sweep_groups


def _gallery(present, data, task: dict, out: Path) -> bool:
    """Where every attention model looks on the same test canvases (seed 0), as one figure."""
    gallery = fixed_canvas_set(data.test.images[:N_GALLERY], data.test.labels[:N_GALLERY], task["canvas_size"],
                               task["n_clutter"], task["centred_digit"], TEST_SEED)
    rows = [(g.experiment.label,
             where_it_looks(get_family(g.runs[0]["kind"]), g.model(), g.runs[0]["task"], gallery.images,
                            gallery.labels, compact=True))
            for g in present if shows_attention(g) and g.has_weights(0)]
    if rows:
        figures.attention_gallery(rows, gallery.labels, out / "where_they_look.png")
    return bool(rows)
