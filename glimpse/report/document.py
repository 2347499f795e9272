"""Write ``compare.md`` from what :mod:`glimpse.report.build` measured (:class:`Measured`): one
function per section, in order. Nothing here trains, builds or times a model.
"""
from __future__ import annotations

import math
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from envs.task import BENCHMARK_VERSION
from glimpse.benchmark import FRESH_SEED, TEST_SEED
from glimpse.cli import markdown_table, replace_block
from glimpse.gradient_noise import LOCATION_ESTIMATORS, baseline_name
from glimpse.models import get_family
from glimpse.report.experiments import TASK_PRESET
from glimpse.report.measurements import NOISE_ERRORS, THRESHOLDS, SeedRuns, converged_by_noise, time_to_threshold
from glimpse.report.records import adopted_file_unchanged, adopted_source
from glimpse.report.settings import ReportSettings
from glimpse.stats import format_interval, format_p, p_phrase

HEADLINE_START, HEADLINE_END = "<!-- report:headline:start -->", "<!-- report:headline:end -->"


def _fmt(x: float, digits: int = 2) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f}"


def _error_cell(errors: np.ndarray, n_test: int) -> str:
    """Mean ± sample sd (n - 1) over seeds, and the 95 % Wilson interval of the seeds' mean error
    on the test canvases, with the canvas as the unit (n = the canvases, not canvases x seeds: the
    seeds misread the same hard canvases, so pooling them as independent reads would narrow it by up
    to sqrt(seeds)). It says how well the canvases pin down these runs' error, not the recipe's mean
    over seeds (their spread is the sd beside it)."""
    if len(errors) == 0:
        return "not trained"
    pct = 100 * errors
    pooled = format_interval(float(errors.mean()) * n_test, n_test)
    if len(pct) == 1:
        return f"{pct[0]:.2f} ({pooled}; 1 seed)"
    return f"{pct.mean():.2f} ± {pct.std(ddof=1):.2f} ({pooled})"


def _paired_rows(tests: list[dict]) -> list[list[str]]:
    rows = []
    for t in tests:
        a, b = t["a"].label, t["b"].label
        if t["p_holm"] >= 0.05:
            verdict = "no difference shown"
        else:
            verdict = f"{a if t['only_a'] > t['only_b'] else b} reads more right"
        rows.append([a, b, str(t["seeds"]), f"{t['only_a']:,}", f"{t['only_b']:,}", format_p(t["p"]),
                     format_p(t["p_holm"]), verdict])
    return rows


def _table(header: list[str], rows: list[list[str]]) -> str:
    return markdown_table(header, rows)


def _number(x: float) -> str:
    return f"{x:,.0f}" if math.isfinite(x) else "unbounded"


def _threshold_cell(t: dict, seconds_per_epoch: float) -> str:
    if t["reached"] == 0:
        return f"not reached (0/{t['of']})"
    seeds = "" if t["reached"] == t["of"] else f" ({t['reached']}/{t['of']} seeds)"
    return f"{t['epochs']:.0f} ep / {t['epochs'] * seconds_per_epoch / 60:.1f} min{seeds}"


def _growth_table(growth: dict) -> tuple[str, list[str]]:
    """The cost-growth table (:func:`~glimpse.report.measurements.cost_on_bigger_canvases` per model
    label), and the labels of the models whose cost stays put (the same pixels and FLOPs at every size)."""
    rows, flat = [], []
    for label, cost in growth.items():
        pixels, flops = cost["pixels"], cost["flops"]
        rows.append([label, *(_si(p) for p in pixels), f"{pixels[-1] / pixels[0]:.1f}x",
                     *(_si(f) for f in flops), f"{flops[-1] / flops[0]:.1f}x"])
        if len(set(pixels)) == 1 and len(set(flops)) == 1:
            flat.append(label)
    sizes = next(iter(growth.values()))["sizes"] if growth else []
    last = f"{sizes[-1]} / {sizes[0]}" if sizes else ""
    return _table(["model", *(f"pixels touched, {n}x{n}" for n in sizes), last,
                   *(f"FLOPs, {n}x{n}" for n in sizes), last], rows), flat


def _estimator_training(curves: list, seconds_per_epoch: dict) -> list[str]:
    """The training runs of each REINFORCE estimator (seed 0): what each reached, and how fast."""
    if len(curves) < 2:
        return []
    rows = []
    for label, group in curves:
        name = group.experiment.name
        cells = [_threshold_cell(time_to_threshold(group, t), seconds_per_epoch[name]) for t in THRESHOLDS]
        rows.append([label, f"{100 * float(group.test_errors[0]):.2f}", *cells, f"{seconds_per_epoch[name]:.1f}"])
    title = get_family(curves[0][1].experiment.arch).title
    return [
        f"The same estimators trained, one run each (seed 0, the budget of the {title} row above); time is "
        "epochs times the seconds per epoch measured side by side in this process, so the curves compare at "
        "equal wall-clock. One seed each: read differences smaller than that row's seed spread as noise.",
        "",
        _table(["baseline", "test error %", *(f"to {100 * t:.0f} % val accuracy" for t in THRESHOLDS),
                "s per epoch (measured)"], rows),
        "",
        "![REINFORCE's baselines at equal wall-clock](estimators.png)",
        "",
    ]


def headline(groups: list[SeedRuns], measured: dict, seconds_per_epoch: dict, n_test: int) -> str:
    rows = []
    for group in groups:
        e, m = group.experiment, measured.get(group.experiment.name)
        if m is None:
            rows.append([e.label, e.group, "not trained", e.paper or "–", "", "", "", "", ""])
            continue
        t90 = time_to_threshold(group, 0.90)
        rows.append([e.label, e.group, _error_cell(group.test_errors, n_test), e.paper or "–",
                     _si(m["canvas_pixels_touched"]), _si(m["flops"]), f"{m['train_images_per_second']:,.0f}",
                     f"{m['eval_images_per_second']:,.0f}", _threshold_cell(t90, seconds_per_epoch[e.name])])
    return _table(["model", "kind",
                   "test error % (mean ± sample sd over seeds; 95 % interval over test canvases, seed spread not in it)",
                   "paper %", "pixels touched / image", "FLOPs / image", "train img/s", "eval img/s",
                   "to 90 % val accuracy"], rows)


@dataclass
class Measured:
    """Everything the document is written from: the runs and what was measured while building it."""

    settings: ReportSettings
    data: object
    groups: list  # SeedRuns per experiment of the comparison, missing ones included
    measured: dict  # experiment name -> cost and speed
    growth: dict  # experiment name -> its cost on bigger canvases, untrained
    seconds_per_epoch: dict
    gradients: dict  # experiment name -> attention-gradient spread
    estimators: dict  # experiment name -> REINFORCE estimators' noise
    two_estimators: dict  # experiment name -> [location_estimators per K]: one policy, two estimators
    curves: list  # (label, seed-0 runs) of each REINFORCE estimator
    sweep_groups: dict  # short name -> [(glimpses, runs)]
    has_gallery: bool
    n_test: int
    tests: list  # paired tests
    doubling: dict  # experiment name -> [doubling_check of each seed trained at twice the budget] (--converged)

    def group(self, name: str):
        return next(g for g in self.groups if g.experiment.name == name)


def write_document(report: Measured) -> str:
    """compare.md: one function per section, in order."""
    sections = (_introduction, _headline_section, _runs_section, _paired_section, _sensor_against_gradient,
                _gradient_section, _two_estimators_section, _estimator_section, _cost_section, _training_section,
                _sweep_section, _gallery_section, _reproduce_section)
    return "\n".join(line for section in sections for line in section(report))


def portable(path) -> str:
    """A path as the document shows it: relative to the working directory when inside it, else its
    name alone (a generated file keeps no machine's absolute paths)."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path.name if path.is_absolute() else str(path)


def _portable_words(text: str) -> str:
    """``text`` (the command that generated the report, the data's description) with each absolute
    path in it shown by :func:`portable`."""
    return " ".join(portable(word) if word.startswith("/") else word for word in text.split(" "))


def _introduction(r: Measured) -> list[str]:
    s = r.settings
    return [
        "# Hard vs soft attention, measured",
        "",
        f"Generated by `{_portable_words(s.command)}` on {time.strftime('%Y-%m-%d %H:%M')} ({platform.machine()}, "
        f"{torch.get_num_threads()} torch threads, torch {torch.__version__}). Data: {_portable_words(r.data.source)}. "
        f"Task: {TASK_PRESET} (60x60 canvas, 4 pieces of clutter); every model is tested on the same "
        f"{r.n_test:,} fixed test canvases of benchmark v{BENCHMARK_VERSION} (test digits only, seed {TEST_SEED}) "
        f"by the code behind `evaluate.py` (hard attention deterministic: the policy's mean). Every number below "
        f"is computed from the runs in `{portable(s.runs_dir)}` or measured while this report was built.",
        "",
    ]


def _headline_section(r: Measured) -> list[str]:
    short = [g.experiment.label for g in r.groups if g.experiment.name not in r.doubling]
    return [
        "## Headline",
        "",
        headline(r.groups, r.measured, r.seconds_per_epoch, r.n_test),
        "",
        ("Each model whose family states a best-known recipe was trained with it, for a budget meant to let "
         "its validation error level off (`--converged`: the budgets, and whether each run did, below)"
         + (f"; these keep the short budgets of the default report: {'; '.join(short)}." if short else ".")
         if r.settings.converged else
         "The budgets are short (below): this compares the models after minutes of training each, not after "
         "the papers' hundreds of epochs. The shipped checkpoints in `checkpoints/` are longer runs, and "
         "`report.py --converged` trains the attention models to convergence."),
        "",
    ]


def _runs_section(r: Measured) -> list[str]:
    rows, n_val = [], len(r.data.val)
    for group in r.groups:
        epochs = sorted({run["train_config"]["epochs"] for run in group.runs}) or ["–"]
        minutes = [run.get("train_seconds", math.nan) / 60 for run in group.runs]
        devices = [_device(run) for run in group.runs]  # in seed order; one when every run's is the same
        device = (devices[0] if len(set(devices)) == 1 else
                  "; ".join(f"seed {seed}: {d}" for seed, d in zip(group.seeds, devices))) if devices else "–"
        verdicts = [converged_by_noise(run.get("history", []), n_val) for run in group.runs]
        row = [group.experiment.label, ", ".join(map(str, epochs)), len(group.runs),
               ", ".join(f"{100 * err:.2f} ({format_interval(err * r.n_test, r.n_test)})"
                         for err in group.test_errors) or "–",
               ", ".join(f"{100 * err:.2f}" for err in group.fresh_errors()) or "–",
               ", ".join("–" if v is None else f"{'yes' if v[0] else 'no'} (+{100 * v[1]:.2f})" for v in verdicts)
               or "–"]
        if r.settings.converged:  # only the converged recipes are checked at twice their budget
            name = group.experiment.name
            row.append(_doubling_cells(r.doubling[name]) if name in r.doubling else "– (short budget)")
        rows.append([*row, _fmt(float(np.mean(minutes)), 1) if minutes else "–", device])
    # the comparison's runs, then the sweep's and the estimators' own (K = 1 and the default count are the comparison's)
    models = r.settings.models
    every_run = ([run for g in r.groups for run in g.runs]
                 + [run for entries in r.sweep_groups.values() for n, g in entries
                    for run in g.runs if g.experiment not in models]
                 + [run for label, g in r.curves if g.experiment not in models for run in g.runs])
    doubled_seconds = [check.get("doubled_seconds") or 0.0 for checks in r.doubling.values() for check in checks]
    total_minutes = (sum(run.get("train_seconds", 0.0) for run in every_run) + sum(doubled_seconds)) / 60
    return [
        "## Runs and budgets",
        "",
        _table(["model", "epochs", "seeds", "test error % per seed (95 % interval)",
                f"on fresh canvases (seed {FRESH_SEED}) %",
                "within the validation noise? (points gained in the last 20 % of epochs)",
                *(["twice the epochs (each seed so trained)"] if r.settings.converged else []),
                "minutes per run (recorded)",
                "device"], rows),
        "",
        f"Noise rule: a run passes when its best validation accuracy rose by no more than {NOISE_ERRORS} standard "
        f"errors of one validation ({n_val:,} canvases: about "
        f"{100 * NOISE_ERRORS * math.sqrt(0.98 * 0.02 / n_val):.1f} points at 98 %) over its last 20 % of epochs. "
        "A plateau passes it too, so --converged also trains seed 0 again at twice the epochs (the doubling "
        "check; adopted runs of other seeds at twice the epochs serve as well, each checked). The budget counts "
        "as converged unless such a run reads significantly more of the test canvases right than every seed of "
        "the budget (McNemar, p < 0.05 each), because two seeds of one recipe can differ that much by seed alone; "
        "the cell gives the budget's two seeds against each other for scale, and the same tests on the fresh "
        "canvases, which the rule leaves out (it was fixed on the test canvases before any check ran), so that a "
        "verdict the fresh canvases disagree with shows. \"Counts as converged\" means no "
        "gain was shown, not that none exists. Where a run did not converge, its test error is that budget's, "
        "not the model's. The fresh "
        f"canvases are {r.n_test:,} more drawn by the same recipe from the test digits with a seed no model "
        "was tuned on: an independent check of the test errors.",
        "",
        f"Recorded training time of all {len(every_run) + len(doubled_seconds)} runs of this report"
        f"{' (the doubling checks among them)' if doubled_seconds else ''}: {total_minutes:.0f} minutes "
        f"(each run's device and torch threads are in the table above; runs trained side by side on shared "
        f"cores ran slower than they would alone).",
        "",
    ]


def _doubling_cells(checks: list[dict]) -> str:
    """The doubling check of each seed trained at twice the budget, one line each."""
    return "<br>".join(map(_doubling_cell, checks)) or "not trained"


def _doubling_cell(check: dict) -> str:
    others = check["against_seeds"]
    if not check["converged"]:
        verdict = f"reads more right{' than every seed' if others else ''}: not converged"
    elif check["only_a"] > check["only_b"] and check["p"] < 0.05:  # more epochs lost: the recipe, not the budget
        verdict = "reads less right: counts as converged, but the recipe is unsteady with the budget"
    elif check["only_b"] > check["only_a"] and check["p"] < 0.05:  # its own seed beaten, not every seed
        verdict = ("reads more right than its own seed only, not than every seed (seeds differ that much): "
                   "counts as converged")
    else:
        verdict = "no gain shown: counts as converged"
    said = _against_seeds(check, others, " canvases")
    if (apart := check["seeds_apart"]) is not None:
        said.append(f"seeds {apart['seeds'][0]} and {apart['seeds'][1]} of the budget: {apart['only_a']} to "
                    f"{apart['only_b']}, {p_phrase(apart['p'])}")
    cell = f"seed {check['seed']}: {100 * check['doubled_error']:.2f} %, {verdict} ({'; '.join(said)})"
    if (fresh := check.get("fresh")) is not None:
        own, *rest = fresh["tests"]
        every = " than every seed" if rest else ""
        shown = f"reads more right{every}" if fresh["more_right"] else f"no gain{' over every seed' if rest else ''} shown"
        cell += f"; on fresh canvases, {shown} there ({'; '.join(_against_seeds(own, rest))})"
    return cell


def _against_seeds(own: dict, others: list[dict], unit: str = "") -> list[str]:
    """The doubled run's McNemar counts against its own seed, then against each other seed."""
    return [f"{own['only_b']} against {own['only_a']}{unit}, {p_phrase(own['p'])}",
            *(f"against seed {t['seed']}: {t['only_b']} to {t['only_a']}, {p_phrase(t['p'])}" for t in others)]


def _paired_section(r: Measured) -> list[str]:
    return [
        "## Which differences are real",
        "",
        f"An exact paired test on the {r.n_test:,} test canvases for every pair of models: each run is paired "
        "with the other model's run of the same seed, and only the canvases one reads right and the other "
        "wrong count. The canvas is the unit: with one seed this is McNemar's exact test; with several, each "
        "canvas's difference in the number of seeds that read it right is flipped in sign at random (the "
        "exact sign-flip test), so a hard canvas counts once, not once per seed. The counts below pool the "
        "seeds. The p-values are also given Holm-adjusted over all the pairs in the table, and the "
        "verdict uses the adjusted one at 0.05: read a gap between two rows of the headline as real only "
        "where this table says so. It tests these runs on these canvases, not the recipes: whether another "
        "seed would differ, two seeds cannot say; their spread above is the hint.",
        "",
        _table(["A", "B", "seeds paired", "A right, B wrong", "B right, A wrong", "p", "p (Holm)", "verdict"],
               _paired_rows(r.tests)) if r.tests else "(fewer than two models trained)",
        "",
    ]


def _sensor_against_gradient(r: Measured) -> list[str]:
    """Is hard attention behind because it reads few pixels, or because REINFORCE is a worse
    gradient? One row per model that says what it reads and how it learns where
    (``Family.sensor_and_gradient``), each with its paired test against the first row, and every
    paired test among the rows, those that show no difference as well."""
    rows, experiments = [], []
    for group in r.groups:
        if not group.runs:
            continue
        described = get_family(group.runs[0]["kind"]).sensor_and_gradient(group.runs[0]["train_config"])
        m = r.measured.get(group.experiment.name)
        if described is None or m is None:
            continue
        experiments.append(group.experiment)
        rows.append([*described, group.experiment.label, _error_cell(group.test_errors, r.n_test),
                     ", ".join(f"{100 * err:.2f}" for err in group.fresh_errors()) or "–",
                     _si(m["canvas_pixels_touched"]), _si(m["sensor_values"]), _si(m["flops"]),
                     f"{m['train_images_per_second']:,.0f}", f"{m['eval_images_per_second']:,.0f}", len(group.runs)])
    if len(rows) < 2:
        return []
    labels = {e.label for e in experiments}
    tests = [t for t in r.tests if {t["a"].label, t["b"].label} <= labels]
    reference = experiments[0]
    for row, experiment in zip(rows, experiments):  # each row against the first, in that row's words
        test = next((t for t in tests if {t["a"].name, t["b"].name} == {reference.name, experiment.name}), None)
        row.insert(-1, "–" if test is None else _against_cell(test, experiment))
    beats: dict[str, list[str]] = {}  # one line per model: every row it reads more right than
    level = []
    for t in tests:
        better, worse = (t["a"], t["b"]) if t["only_a"] > t["only_b"] else (t["b"], t["a"])
        counts = f"{max(t['only_a'], t['only_b'])} to {min(t['only_a'], t['only_b'])}, Holm {p_phrase(t['p_holm'])}"
        if t["p_holm"] < 0.05:
            beats.setdefault(better.label, []).append(f"{worse.label} ({counts})")
        else:
            level.append(f"{better.label} and {worse.label} ({counts})")
    bullets = [f"- **{label}** reads more right than {'; '.join(worse)}." for label, worse in beats.items()]
    if level:
        bullets.append(f"- **No difference shown:** {'; '.join(level)}.")
    paragraphs = ["\n".join(bullets)] if bullets else []
    if not beats:
        paragraphs.append("No pair of these rows differs by the paired tests: on these runs neither the sensor nor "
                          "the gradient is shown to matter.")
    most = max(row[-1] for row in rows)
    fewer = [e.label for e, row in zip(experiments, rows) if row[-1] < most]
    if fewer:  # their verdicts rest on fewer runs than the others'
        paragraphs.append(f"With fewer seeds than the other rows: {'; '.join(fewer)}.")
    said = "\n\n".join(paragraphs)
    unsettled = [(e, check) for e in experiments for check in r.doubling.get(e.name, []) if not check["converged"]]
    if unsettled:  # its rows hold its budget's error, not the model's: a verdict on it may change
        said += ("\n\nNot converged by the doubling check (twice the epochs read more right), so these rows give "
                 "their budget's error and any verdict on them may move: "
                 + "; ".join(f"{e.label} ({100 * check['doubled_error']:.2f} % at {check['doubled_epochs']} epochs, "
                             f"seed {check['seed']})" for e, check in unsettled) + ".")
    return [
        "## Sensor against gradient",
        "",
        "Hard attention differs from soft attention in two ways at once: it reads a few pixels, and it "
        "learns where to look by REINFORCE. These rows separate the two: the same glimpse scales and sizes "
        "learning where to look by REINFORCE and by backpropagation (the differentiable retina, whose boxes "
        "are not rounded to whole pixels, so it touches a few more), other soft sensors, and the same "
        "features with no attention at all. The rows' recipes are each family's own. What the paired tests "
        "say (Holm-adjusted over every pair of the report), for every pair among these rows; \"no difference "
        "shown\" is not \"equal\":",
        "",
        said,
        "",
        _table(["sensor", "how it learns where to look", "model",
                "test error % (mean ± sample sd; 95 % interval over test canvases, seed spread not in it)",
                f"fresh canvases (seed {FRESH_SEED}) %, per seed", "pixels touched / image",
                "values the model receives from the image", "FLOPs / image",
                "train img/s", "eval img/s", f"against {reference.label}: canvases this row / it alone reads "
                "right, Holm p", "seeds"], rows),
        "",
    ]


def _against_cell(test: dict, experiment) -> str:
    """``test`` (a paired test of ``experiment`` and another row) from ``experiment``'s side."""
    mine, theirs = ((test["only_a"], test["only_b"]) if test["a"].name == experiment.name
                    else (test["only_b"], test["only_a"]))
    return f"{mine} / {theirs}, {p_phrase(test['p_holm'])}"


def _gradient_section(r: Measured) -> list[str]:
    s = r.settings
    rows, described = [], {}
    for name, spread in r.gradients.items():
        group = r.group(name)
        family = get_family(group.runs[0]["kind"])
        described[family.title.split(" (")[0]] = family.attention_module_text
        lo, hi = spread["interval"]
        rows.append([group.experiment.label, spread["estimator"], spread["n_parameters"],
                     _number(spread["relative_variance"]), f"{_number(lo)} to {_number(hi)}"])
    listed = "; ".join(f"{title}: {text}" for title, text in described.items())
    return [
        "## Exact vs approximate gradient",
        "",
        f"The gradient of the attention parameters{f' ({listed})' if listed else ''} from {s.grad_batches} "
        f"independent minibatches of {s.grad_batch_size} training "
        f"images at the same weights: seed 0's initialisation, with a location policy's std at its "
        f"schedule's start (at trained weights the expected gradient is "
        f"close to zero by construction, and a ratio to it says nothing). Relative variance = trace of the "
        f"covariance of one minibatch's estimate / squared norm of the expected gradient, the latter "
        f"estimated without bias (squared norm of the mean estimate minus the trace over the number of "
        f"minibatches); 'unbounded' when that is not positive, i.e. the mean gradient is not resolved from "
        f"the noise of {s.grad_batches} minibatches: the relative variance is then of the order of "
        f"{s.grad_batches} or more. It is the number of minibatches to average "
        f"before the noise is as large as the signal; scale-free, so models with different parameters "
        f"compare. The interval resamples the minibatches. Each model's estimate is the one its runs "
        f"trained with: for hard attention REINFORCE with the runs' baseline (its noise is the data plus "
        f"the sampled locations), for soft attention backpropagation through the training forward: noise "
        f"from the data only, and for the reparameterised retina from its sampled locations too. At "
        f"initialisation the untrained classifier's reward hardly depends on where a hard model looks, so "
        f"REINFORCE's expected gradient is small there and its ratio large by construction: this table "
        f"compares the estimators where learning starts, and the REINFORCE baselines below are measured "
        f"at trained weights.",
        "",
        _table(["model", "estimator", "parameters", "relative variance", "90 % bootstrap interval"], rows)
        if rows else "(no runs)",
        "",
    ]


def _two_estimators_section(r: Measured) -> list[str]:
    if not r.two_estimators:
        return []
    s = r.settings
    rows, findings = [], []
    for name, per_samples in r.two_estimators.items():
        label = r.group(name).experiment.label
        ratios = {}  # (weights, estimator) -> its total variance / the score function's, per K
        for weights in ("initialisation", "trained"):
            for measured in per_samples:
                result = measured[weights]
                for key in LOCATION_ESTIMATORS:
                    ratios.setdefault((weights, key), []).append(result[key]["trace"] / result["score function"]["trace"])
                rows += [[label, *cells] for cells in two_estimators_rows(weights, measured["samples"], result)]
        findings.append(
            f"- **{label}**: at initialisation the exact gradient's total variance is "
            f"{_ratio_span(ratios['initialisation', 'reparameterised'])} times the score function's; at the trained "
            f"weights it is {_ratio_span(ratios['trained', 'reparameterised'])} times, and the gradient the run "
            f"trained with {_ratio_span(ratios['trained', 'reparameterised, as trained'])} times.")
    samples = ", ".join(str(m["samples"]) for m in next(iter(r.two_estimators.values())))
    return [
        "## One policy, two estimators",
        "",
        f"Is the gap the few pixels or REINFORCE? A model that draws its locations from a Gaussian policy "
        f"and reads them differentiably can be trained by either estimator of one gradient: the "
        f"reparameterised gradient through the drawn locations, or REINFORCE's score function (its "
        f"cross-entropy less the mean of the image's other K - 1 trajectories, times the gradient of the "
        f"locations' log-density). Both are unbiased for the gradient of the expected cross-entropy, so "
        f"at the same weights and on the same minibatches their noise compares directly, with no 0/1 "
        f"reward and no snapped retina in between. Total variance (trace of the covariance) of one "
        f"minibatch's estimate of the location policy's mean head, over {s.grad_batches} minibatches of "
        f"{max(1, s.grad_batch_size // 4)} training images, each played K times (K = {samples}), at the seed-0 "
        f"run's trained weights and at its initialisation (the policy's std at its schedule's start). "
        f"\"Exact\" is the undamped backward pass, the gradient both estimate; \"as trained\" the run's "
        f"own, biased where its recipe damps it (`--attention-into-core` below 1). Agreement: the squared distance "
        f"between an estimator's mean and the score function's, over what the noise of {s.grad_batches} "
        f"minibatches alone makes it; about 1 where both estimate one gradient, larger with a bias. The "
        f"interval resamples the minibatches.",
        "",
        *findings,
        "",
        _table(["model", *TWO_ESTIMATORS_COLUMNS], rows),
        "",
    ]


TWO_ESTIMATORS_COLUMNS = ("weights", "K", "estimator", "total variance per minibatch", "90 % bootstrap interval",
                          "relative to the score function", "agreement with the score function")


def two_estimators_rows(weights: str, samples: int, result: dict) -> list[list[str]]:
    """A row per estimator (:data:`TWO_ESTIMATORS_COLUMNS`) of one ``location_estimator_noise`` result."""
    score = result["score function"]["trace"]
    rows = []
    for key, estimator in LOCATION_ESTIMATORS.items():
        row = result[key]
        lo, hi = row["trace_interval"]
        rows.append([weights, str(samples), estimator, f"{row['trace']:.4g}", f"{lo:.4g} to {hi:.4g}",
                     f"{row['trace'] / score:.3g}", "–" if key == "score function" else f"{row['agreement']:.2f}"])
    return rows


def _ratio_span(ratios: list[float]) -> str:
    """"0.24" or "0.24 to 0.71": the range of a few variance ratios, in three significant digits."""
    lo, hi = min(ratios), max(ratios)
    return f"{lo:.3g}" if f"{lo:.3g}" == f"{hi:.3g}" else f"{lo:.3g} to {hi:.3g}"


def _estimator_section(r: Measured) -> list[str]:
    s = r.settings
    rows = []
    for name, estimates in r.estimators.items():
        label = r.group(name).experiment.label
        reference = estimates[0]["trace"] * estimates[0]["seconds_per_batch"]
        for row in estimates:
            lo, hi = row["trace_interval"]
            per_second = row["trace"] * row["seconds_per_batch"]
            rows.append([label, baseline_name(row["samples"]), f"{row['trace']:.4g}", f"{lo:.4g} to {hi:.4g}",
                         f"{1000 * row['seconds_per_batch']:.1f}", f"{per_second / reference:.2f}"])
    return [
        "## REINFORCE's baselines at equal wall-clock",
        "",
        f"Every REINFORCE estimator here is unbiased for the same policy gradient, so their noise compares "
        f"directly: the total variance (trace of the covariance) of one minibatch's gradient of the location "
        f"policy's mean head, over {s.grad_batches} minibatches of {s.grad_batch_size} training "
        f"images, at the seed-0 run's trained weights (at its initialisation the untrained classifier makes "
        f"the reward independent of where the model looks, and there is no gradient to estimate). The "
        f"learned baseline plays each image once; `--reinforce-samples K` plays it K times on one canvas and "
        f"uses as each trajectory's baseline the mean reward of the other K - 1 (Kool, van Hoof and Welling "
        f"2019), at K times the episodes. The last column is the variance of what one second of such "
        f"gradients averages to (variance x seconds per minibatch, measured here), relative to the learned "
        f"baseline's: below 1, that estimator buys more signal per second. The interval resamples the "
        f"minibatches.",
        "",
        _table(["model", "baseline", "total variance per minibatch", "90 % bootstrap interval",
                "ms per minibatch", "variance x time, relative"], rows) if rows else "(no runs)",
        "",
        *_estimator_training(r.curves, r.seconds_per_epoch),
    ]


def _cost_section(r: Measured) -> list[str]:
    rows = []
    for group in r.groups:
        m = r.measured.get(group.experiment.name)
        if m is not None:
            rows.append([group.experiment.label, _si(m["canvas_pixels_touched"]), _si(m["sensor_values"]),
                         _si(m["flops"]), f"{m['train_images_per_second']:,.0f}", f"{m['eval_images_per_second']:,.0f}"])
    growth, flat = _growth_table({r.group(name).experiment.label: cost for name, cost in r.growth.items()})
    steady = (f"the cost per image of {', '.join(flat)} stays put, the others grow with the canvas" if flat
              else "every model's cost per image grows with the canvas")
    return [
        "## Cost per image: O(1) per glimpse vs O(input)",
        "",
        "Pixels touched: canvas pixels that enter the model's computation, counted each time they enter (so "
        "a model that reads by steps can touch more than the canvas holds), as each family defines it "
        "(`pixels_read`; a retina: those under each glimpse's largest box, one pixel wider a side where boxes "
        "fall between pixels, as the differentiable one's do; DRAW: every pixel at every step, its Gaussian "
        "filters having full support on paper; the Spatial Transformer: its localiser's field once (on 60x60 "
        "and 100x100 it leaves the last 4 rows and columns unread) plus up to 4 per crop pixel, the sampler's; "
        "any other model that "
        "sees the whole canvas: every pixel once, attention over its features adding none). Values in: "
        "numbers the learned part receives. FLOPs: "
        "`torch.utils.flop_counter` on one forward pass (matrix products and convolutions; see "
        "glimpse/costs.py). Speeds: measured in this process, one model at a time, each run's own batch size "
        "for training, 500 for evaluation.",
        "",
        _table(["model", "pixels touched", "values in", "FLOPs", "train img/s", "eval img/s"], rows),
        "",
        "The same models, configured as in their runs, on bigger canvases (untrained: this needs no "
        f"training): {steady}.",
        "",
        growth,
        "",
    ]


def _training_section(r: Measured) -> list[str]:
    rows = []
    for group in r.groups:
        if not group.runs:
            continue
        name = group.experiment.name
        cells = [_threshold_cell(time_to_threshold(group, t), r.seconds_per_epoch[name]) for t in THRESHOLDS]
        best = max(max((h["val_accuracy"] for h in run.get("history", [])), default=0) for run in group.runs)
        rows.append([group.experiment.label, *cells, f"{100 * best:.2f}", f"{r.seconds_per_epoch[name]:.1f}"])
    return [
        "## Easy vs hard to train",
        "",
        "Epochs until validation accuracy (5,000 fixed canvases) first reached 90 % and 95 %, averaged over "
        "the seeds that reached it, and the corresponding training time at the speed measured above "
        "(epochs x seconds per epoch: the training steps alone, at the speed measured above with this "
        "report's threads, so that runs that shared the machine with others are not charged for it; "
        "validation time is left out).",
        "",
        _table(["model", "to 90 % val", "to 95 % val", "best val % (any seed)", "s / epoch"], rows),
        "",
        "![learning curves](learning_curves.png)",
        "",
    ]


def _sweep_section(r: Measured) -> list[str]:
    if not r.settings.glimpse_counts or not r.sweep_groups:  # no swept model among --models
        return []
    rows = []
    for n in r.settings.glimpse_counts:
        row = [str(n)]
        for short, entries in r.sweep_groups.items():
            group = dict(entries)[n]
            row.append(f"{100 * group.test_errors[0]:.2f}" if group.runs else "not trained")
            paper = dict(get_family(entries[0][1].experiment.arch).paper_sweep)
            row.append(f"{paper[n]:.2f}" if n in paper else "–")
        rows.append(row)
    header = ["glimpses"] + [c for short in r.sweep_groups for c in (f"{short} (this lab)", f"{short} (paper)")]
    epochs = {short: sorted({g.runs[0]["train_config"]["epochs"] for _, g in entries if g.runs})
              for short, entries in r.sweep_groups.items()}
    return [
        "## Accuracy against the number of glimpses",
        "",
        f"One seed per count; budgets as in the comparison ({', '.join(f'{k}: {v} epochs' for k, v in epochs.items())}). "
        "The papers' numbers (where a family's paper gives them on this task) are after full training.",
        "",
        _table(header, rows),
        "",
        "![accuracy against glimpses](glimpse_sweep.png)",
        "",
    ]


def _gallery_section(r: Measured) -> list[str]:
    if not r.has_gallery:
        return []
    return ["## Where they look", "", "The same six test canvases for every model (seed 0).", "",
            "![where they look](where_they_look.png)", ""]


def _reproduce_section(r: Measured) -> list[str]:
    return ["## Reproduce", "", "```", _portable_words(r.settings.command), "```", ""]


def _device(run: dict) -> str:
    """Where a run trained: its device and torch threads, as its checkpoint recorded them."""
    device = (run.get("provenance") or {}).get("device", "not recorded")
    threads = run.get("train_config", {}).get("threads")
    where = f"{device} ({threads} thread{'s' if threads != 1 else ''})" if threads else device
    if not run.get("adopted_from"):
        return where
    if adopted_file_unchanged(run) or adopted_source(run) is None:  # the same file, or none to compare
        return f"{where}, adopted from `{run['adopted_from']}`"
    return (f"{where}, adopted from an earlier `{run['adopted_from']}` (sha256 {run['adopted_sha256'][:12]}, "
            f"since replaced)")


def update_readme(readme: Path, headline_md: str, figure: str) -> None:
    """Replace the README's block between the headline markers with the generated table."""
    replace_block(readme, HEADLINE_START, HEADLINE_END, f"{headline_md}\n\n![where they look]({figure})")
