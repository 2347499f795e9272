"""The report's numbers, computed from finished runs: test error over seeds, learning speed,
cost per image (pixels, FLOPs, images/s) and the spread of the attention gradient."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from envs.task import BENCHMARK_VERSION
from glimpse.benchmark import FRESH_SEED
from glimpse.evaluation import evaluate_checkpoint
from glimpse.costs import flops_per_image, pixels_read
from glimpse.gradient_noise import (gradient_estimates, location_estimator_noise, reinforce_estimator_noise,
                                    relative_variance, relative_variance_interval, run_initialisation,
                                    trace_and_signal)
from glimpse.models import build_model, get_family
from glimpse.report.experiments import TASK_PRESET, Experiment
from glimpse.progress import say
from glimpse.checkpoint import load_checkpoint
from glimpse.report.records import (adopted_file_unchanged, adopted_source, canvas_set_name, file_sha256, make_record,
                                    read_record, record_path, write_record)
from glimpse.report.runs import RunRequest, finished_run, other_recipe, stale_changes
from glimpse.speed import eval_images_per_second, training_speed
from glimpse.stats import holm, mcnemar, paired_over_seeds
from glimpse.training.config import TrainConfig, resolve_config
from glimpse.training.loop import learner_class

THRESHOLDS = (0.90, 0.95)
GROWTH_SIZES = (60, 100, 200)  # canvas sides of the cost-growth table


@dataclass
class SeedRuns:
    """The finished runs of one experiment, one per seed: the checkpoint dicts of their best.pt, or
    the records the report kept of them (:mod:`glimpse.report.records`) where a run's directory is gone."""
    experiment: Experiment
    runs: list[dict]
    run_dirs: list[Path]
    data_dir: str | None = None

    @property
    def test_errors(self) -> np.ndarray:
        return np.array([1.0 - r["test_accuracy"] for r in self.runs])

    @property
    def seeds(self) -> list[int]:
        """The training seed of each run, in the order of :attr:`runs`."""
        return [r["train_config"]["seed"] for r in self.runs]

    def is_record(self, index: int) -> bool:
        return "right" in self.runs[index]

    def right(self, index: int, canvas_seed: int | None = None) -> np.ndarray:
        """Which test canvases run ``index`` read right, (N,) bool, by the code behind evaluate.py:
        the paired tests need canvas by canvas what the test error summarises. Today's fixed test
        canvases, or with ``canvas_seed`` fresh ones drawn from that seed. A record holds them;
        otherwise they are cached beside the run's best.pt, each cache used only while it is newer than
        best.pt (and the fixed set's while it agrees with the run's test accuracy)."""
        run_dir, accuracy = self.run_dirs[index], self.runs[index]["test_accuracy"]
        name = canvas_set_name(canvas_seed)
        if self.is_record(index):
            if name not in self.runs[index]["right"]:
                raise ValueError(f"{run_dir.name} is kept only as a record, which has no results on the {name} "
                                 f"canvases: delete its record and train it again")
            return self.runs[index]["right"][name]
        cache = run_dir / f"{canvas_set_name(canvas_seed, '-right')}.npy"
        if cache.exists():
            right = np.load(cache)
            newer = cache.stat().st_mtime_ns >= (run_dir / "best.pt").stat().st_mtime_ns
            if newer and (canvas_seed is not None or abs(float(right.mean()) - accuracy) < 1e-9):
                return right
        right = evaluate_checkpoint(run_dir / "best.pt", data_dir=self.data_dir, progress=False, per_canvas=True,
                                    canvas_seed=canvas_seed)["right"]
        np.save(cache, right)
        return right

    def fresh_errors(self) -> np.ndarray:
        """Each run's test error on fresh canvases (seed FRESH_SEED, the recipe of the fixed set):
        the independent check of :attr:`test_errors`."""
        return np.array([1.0 - float(self.right(i, FRESH_SEED).mean()) for i in range(len(self.runs))])

    def weights(self, index: int = 0) -> dict | None:
        """Run ``index``'s trained weights: its own, or those of the checkpoint its record was adopted
        from while that file is still the one adopted (same sha256); None for a record kept without."""
        run = self.runs[index]
        if "model_state" not in run and adopted_file_unchanged(run):
            run["model_state"] = load_checkpoint(adopted_source(run))["model_state"]
        return run.get("model_state")

    def has_weights(self, index: int = 0) -> bool:
        return bool(self.runs) and self.weights(index) is not None

    def model(self, index: int = 0) -> torch.nn.Module:
        """Run ``index``'s trained model; ValueError for a record kept without its weights."""
        run = self.runs[index]
        if not self.has_weights(index):
            raise ValueError(f"{self.run_dirs[index].name} is kept as a record without its weights")
        model = build_model(run["kind"], run["model_config"])
        model.load_state_dict(self.weights(index))
        return model.eval()

    def architecture(self) -> torch.nn.Module:
        """The experiment's model, trained where the weights are kept, else freshly initialised:
        what costs and speeds are measured on (neither depends on the weights' values)."""
        if self.has_weights(0):
            return self.model(0)
        torch.manual_seed(self.runs[0]["train_config"]["seed"])
        return build_model(self.runs[0]["kind"], self.runs[0]["model_config"]).eval()


def collect(experiment: Experiment, seeds, runs_dir: Path, data_dir: str | None = None,
            records_dir: Path | None = None, epochs: int | None = None, max_steps: int = 0) -> SeedRuns:
    """The finished runs of ``experiment`` among ``seeds`` (missing ones are left out), each from its
    directory in ``runs_dir`` or else from its record in ``records_dir``. A run tested on another
    benchmark version's canvases than today's is scored again on today's; a record of one, which
    cannot be, is left out with a warning. So is a run of other than ``epochs`` epochs (when given):
    a family whose budget was raised keeps its run names, and its old runs are not the new budget's
    (a directory of the old budget gives way to a record of the new one). Runs capped at another
    --max-steps than ``max_steps`` are not this report's, nor are runs of a model their recipe no
    longer builds (:func:`finished_run`) or runs trained by another recipe (:func:`other_recipe`),
    which are left out with a warning."""
    runs, dirs = [], []
    for seed in seeds:
        run_dir = runs_dir / experiment.run_name(seed)
        payload = finished_run(run_dir, records_dir, max_steps)
        if payload is None and (changed := stale_changes(run_dir, records_dir)):
            said = ", ".join(f"{name}={was!r}" for name, (was, _) in changed.items())
            say(f"[report] left out {run_dir.name}: it trained a model with {said}, which its recipe no longer "
                f"builds (retrain it)")
            continue
        if payload is not None and epochs is not None and payload["train_config"]["epochs"] != epochs:
            record = read_record(record_path(records_dir, run_dir.name)) if records_dir is not None else None
            if record is None or record["train_config"]["epochs"] != epochs:
                say(f"[report] left out {run_dir.name}: it trained {payload['train_config']['epochs']} epochs, "
                    f"the budget asks {epochs}")
                continue
            payload = record
        if payload is not None and (why := other_recipe(payload, RunRequest(experiment, seed, epochs or 0))):
            say(f"[report] left out {run_dir.name}: {why} (retrain it)")
            continue
        if payload is not None and payload.get("benchmark") != BENCHMARK_VERSION:
            if "right" in payload:
                say(f"[report] left out {run_dir.name}: its record was tested on benchmark v{payload.get('benchmark')},"
                    f" today's is v{BENCHMARK_VERSION}, and a record has no weights to test again")
                continue
            scored = evaluate_checkpoint(run_dir / "best.pt", data_dir=data_dir, progress=False)
            payload.update(test_accuracy=scored["accuracy"], benchmark=BENCHMARK_VERSION)
        if payload is not None:
            runs.append(payload)
            dirs.append(run_dir)
    return SeedRuns(experiment, runs, dirs, data_dir)


def keep_records(group: SeedRuns, records_dir: Path, canvas_seeds=(None, FRESH_SEED),
                 weights_for_seed: int | None = None) -> None:
    """Write a record of each of ``group``'s runs read from its directory, with its results on the
    fixed test canvases and on the fresh ones (``canvas_seeds``: None is the fixed set), and its
    weights for the run of seed ``weights_for_seed``. A record already written for the same best.pt
    (its sha256, kept in the record; a record from before that, by its time) is left as it is."""
    for index, (run, run_dir) in enumerate(zip(group.runs, group.run_dirs)):
        if group.is_record(index):
            continue
        path, digest = record_path(records_dir, run_dir.name), file_sha256(run_dir / "best.pt")
        kept = read_record(path) if path.exists() else None
        if kept is not None and "best_sha256" not in kept:  # kept before records named their best.pt
            same = path.stat().st_mtime_ns >= (run_dir / "best.pt").stat().st_mtime_ns
        else:
            same = kept is not None and kept["best_sha256"] == digest
        if same:
            continue
        right = {canvas_set_name(s): group.right(index, s) for s in canvas_seeds}
        write_record(path, {**make_record(run, right, keep_weights=run["train_config"]["seed"] == weights_for_seed),
                            "best_sha256": digest})


def paired_tests(groups: list[SeedRuns]) -> list[dict]:
    """An exact paired test for every pair of experiments, on the same fixed test canvases.

    Seed s of A is paired with seed s of B, over the seeds both have; the canvas is the unit
    (:func:`glimpse.stats.paired_over_seeds`: McNemar's exact test with one seed, its sign-flip
    generalisation with more). The p-values are Holm-adjusted over all the pairs, so "p < 0.05"
    holds for the whole table at once, not for one row picked from it."""
    tests = []
    for i, a in enumerate(groups):
        for b in groups[i + 1:]:
            seeds = sorted(set(a.seeds) & set(b.seeds))
            if not seeds:
                continue
            test = paired_over_seeds([a.right(a.seeds.index(s)) for s in seeds],
                                     [b.right(b.seeds.index(s)) for s in seeds])
            tests.append({"a": a.experiment, "b": b.experiment, "seeds": len(seeds), **test})
    return holm(tests)


def first_reaching(history: list[dict], threshold: float) -> dict | None:
    """The first validation of a learning curve at or above ``threshold``, or None."""
    return next((h for h in history if h["val_accuracy"] >= threshold), None)


def late_gain(history: list[dict], share: float = 0.2) -> float | None:
    """How much the best validation accuracy rose over the last ``share`` of a run's epochs (in
    accuracy, 0.001 = 0.1 point; :func:`converged_by_noise` judges it). None without a validation
    before that window."""
    if not history:
        return None
    last_epoch = history[-1]["epoch"]
    before = [h["val_accuracy"] for h in history if h["epoch"] <= (1 - share) * last_epoch + 1e-9]
    if not before:
        return None
    return max(h["val_accuracy"] for h in history) - max(before)


NOISE_ERRORS = 2  # a late gain within two standard errors of one validation is noise


def validation_noise(accuracy: float, n_val: int) -> float:
    """The standard error of one validation accuracy on ``n_val`` canvases (binomial): about 0.2
    point at 98 % on the 5,000 fixed validation canvases."""
    return math.sqrt(max(accuracy * (1 - accuracy), 1e-12) / n_val)


def converged_by_noise(history: list[dict], n_val: int) -> tuple[bool, float] | None:
    """Whether a run's best validation accuracy rose over its last 20 % of epochs by no more than
    the validation set's own noise (:data:`NOISE_ERRORS` standard errors), and that gain. None
    without a validation before that window. A plateau can pass this rule: the doubled-budget check
    (:func:`doubling_check`) is the one that can tell."""
    gain = late_gain(history)
    if gain is None:
        return None
    best = max(h["val_accuracy"] for h in history)
    return gain <= NOISE_ERRORS * validation_noise(best, n_val), gain


def doubling_check(run: SeedRuns, doubled: SeedRuns, seed: int = 0) -> dict | None:
    """The ``seed`` run's recipe trained for twice the epochs, against every seed of the budget,
    canvas by canvas (McNemar's exact test on the fixed test canvases). Two runs of one recipe can
    differ significantly by seed alone (another seed is another run), so "not converged" asks twice
    the budget to read significantly more right (two-sided p < 0.05, it ahead) than each seed of the
    budget, not only its own; and the budget's run of that seed is tested against the budget's
    next seed (``seeds_apart``), the size of a difference seeds alone make. "Converged" means no gain shown,
    not that there is none. A doubled run that reads significantly less right than its own seed
    counts as converged too (more epochs did not help), and the report says so. The same tests on
    the fresh canvases come with it (``fresh``: each seed's test, and whether twice the budget reads
    more right than every seed there; None where a record lacks them): shown beside the verdict, not
    part of it, since the rule was fixed on the test canvases before any check was run. None when the
    ``seed`` run or its doubled run is missing."""
    if seed not in run.seeds or seed not in doubled.seeds:
        return None
    twice = doubled.seeds.index(seed)
    order = [run.seeds.index(seed), *(i for i, s in enumerate(run.seeds) if s != seed)]  # its own seed first
    tests, better = _against_each_seed(run, doubled, order, twice)
    try:
        fresh_tests, fresh_better = _against_each_seed(run, doubled, order, twice, FRESH_SEED)
        fresh = {"tests": fresh_tests, "more_right": fresh_better}
    except ValueError:  # a record that holds no results on the fresh canvases (nor weights to score them)
        fresh = None
    apart = {**mcnemar(run.right(order[0]), run.right(order[1])), "seeds": (run.seeds[order[0]], run.seeds[order[1]])} \
        if len(order) > 1 else None
    return {**tests[0], "against_seeds": tests[1:], "seeds_apart": apart, "converged": not better, "fresh": fresh,
            "doubled_error": float(doubled.test_errors[twice]),
            "doubled_epochs": int(doubled.runs[twice]["train_config"]["epochs"]),
            "doubled_seconds": doubled.runs[twice].get("train_seconds", 0.0)}


def _against_each_seed(run: SeedRuns, doubled: SeedRuns, order: list[int], twice: int,
                       canvas_seed: int | None = None) -> tuple[list[dict], bool]:
    """McNemar of the doubled run against each of the budget's runs in ``order``, on the fixed test
    canvases or fresh ones drawn from ``canvas_seed``, and whether it reads more right than every one."""
    tests = [{**mcnemar(run.right(i, canvas_seed), doubled.right(twice, canvas_seed)), "seed": run.seeds[i]}
             for i in order]
    return tests, all(t["only_b"] > t["only_a"] and t["p"] < 0.05 for t in tests)


def time_to_threshold(seed_runs: SeedRuns, threshold: float) -> dict:
    """Epochs until validation accuracy first reached ``threshold``, averaged over the seeds that
    reached it; ``reached`` counts them. (Time is epochs times a speed measured side by side: a
    run's recorded seconds hold its validation, pictures and whatever shared its cores.)"""
    hits = [first_reaching(r.get("history", []), threshold) for r in seed_runs.runs]
    reached = [h for h in hits if h is not None]
    if not reached:
        return {"reached": 0, "of": len(hits), "epochs": math.nan}
    return {"reached": len(reached), "of": len(hits), "epochs": float(np.mean([h["epoch"] for h in reached]))}


def cost_per_image(seed_runs: SeedRuns) -> dict:
    """Pixels and FLOPs per image of one forward pass (by definition and by count, see
    glimpse.costs)."""
    run = seed_runs.runs[0]
    pixels = pixels_read(run["kind"], run["task"], run["model_config"])
    return {**pixels, "flops": flops_per_image(run["kind"], seed_runs.architecture(), run["task"])}


def cost_on_bigger_canvases(experiment: Experiment, sizes=GROWTH_SIZES) -> dict:
    """Pixels touched and FLOPs per image of ``experiment``'s model, as configured in its runs, on
    each canvas side in ``sizes``, untrained: the 'O(1) per glimpse vs O(input)' claim needs no
    training to check. Returns ``{"sizes", "pixels", "flops"}``, one entry per size."""
    pixels, flops = [], []
    for size in sizes:
        config = resolve_config({"preset": TASK_PRESET, **experiment.overrides, "canvas_size": size})
        family, task = config.family, config.task()
        model_config = family.model_config(config)
        torch.manual_seed(0)
        model = family.build(model_config).eval()
        pixels.append(pixels_read(family.name, task, model_config)["canvas_pixels_touched"])
        flops.append(flops_per_image(family.name, model, task, batch=2))
    return {"sizes": list(sizes), "pixels": pixels, "flops": flops}


def throughput(seed_runs: SeedRuns, data, canvases: np.ndarray, train_steps: int, data_dir: str | None) -> dict:
    """Training images/s (full steps at the run's batch size, fresh weights) and deterministic
    evaluation images/s of the trained model, measured now, in this process."""
    run = seed_runs.runs[0]
    config = TrainConfig.from_dict({**run["train_config"], "data_dir": data_dir})
    train_speed, _, _ = training_speed(config, data, train_steps, warmup=1)
    eval_speed = eval_images_per_second(run["kind"], seed_runs.architecture(), run["task"], canvases)
    return {"train_images_per_second": train_speed, "eval_images_per_second": eval_speed}


def attention_gradient_spread(seed_runs: SeedRuns, data, n_batches: int, batch_size: int, data_dir: str | None,
                              seed: int = 10_000, n_bootstrap: int = 200) -> dict:
    """Spread of one minibatch's gradient of the attention parameters over ``n_batches``
    minibatches at fixed weights: the seed-0 run's *initialisation*, where every model's expected
    gradient is clearly non-zero (at trained weights it is ~0 by construction, and a ratio to it
    means nothing), with what its schedule sets at the run's start (a policy's std). Each model's
    gradient is the one its runs trained with, as its learner gives it (``attention_gradient`` of
    glimpse/training/hard.py and soft.py: REINFORCE with the runs' baseline, or backpropagation
    through the training forward).

    Returns the relative variance (see :func:`relative_variance`), a 90 % bootstrap interval
    (resampling the minibatches; the upper end is inf when the signal is not resolved) and the
    ``estimator``'s name."""
    run = seed_runs.runs[0]
    arch, task = run["kind"], run["task"]
    model = run_initialisation(run)
    grad_fn, estimator = learner_class(get_family(arch)).attention_gradient(
        arch, model, run["train_config"], task, data.train, batch_size, seed, data_dir)
    grads = gradient_estimates(grad_fn, range(n_batches))
    return {"relative_variance": relative_variance(grads), "n_parameters": grads.shape[1], "n_batches": n_batches,
            "interval": relative_variance_interval(grads, n_bootstrap, seed),
            "trace": trace_and_signal(grads)[0], "estimator": estimator}


def estimator_variance(seed_runs: SeedRuns, samples: int, n_batches: int, batch_size: int, data_dir: str | None,
                       seed: int = 20_000) -> dict:
    """:func:`glimpse.gradient_noise.reinforce_estimator_noise` at the seed-0 run's trained weights."""
    run = seed_runs.runs[0]
    return reinforce_estimator_noise(run["kind"], seed_runs.model(0), run["task"], samples, n_batches, batch_size,
                                     data_dir, seed, reward=run["train_config"].get("reinforce_reward", "sequence"))


def location_estimators(seed_runs: SeedRuns, data, samples: int, n_batches: int, batch_size: int,
                        seed: int = 30_000) -> dict:
    """One policy, two estimators (:func:`glimpse.gradient_noise.location_estimator_noise`) on a
    family that draws its locations reparameterised: at the seed-0 run's trained weights and at its
    initialisation, ``samples`` trajectories of each image. Returns ``{"trained": ..., "initialisation": ...}``,
    each a dict per estimator, and ``samples``."""
    run = seed_runs.runs[0]
    weights = {"trained": seed_runs.model(0), "initialisation": run_initialisation(run)}
    return {"samples": samples, **{name: location_estimator_noise(model, run["kind"], run["task"], data.train, samples,
                                                                   n_batches, batch_size, seed)
                                   for name, model in weights.items()}}
