"""The shipped checkpoints' scores: each scored by the code behind evaluate.py, the README's results
table, the paired tests of docs/results.md, and the command that rebuilds each checkpoint from its
own record (its config turned back into train.py options). Its command line is
``scripts/checkpoint_table.py``:

    python scripts/checkpoint_table.py --data-dir DIR           # print the table
    python scripts/checkpoint_table.py --data-dir DIR --write   # checkpoints/scores.json + README

Test error by the same code as evaluate.py (deterministic; for RAM also averaged over --samples
sampled trajectories, as `evaluate.py --samples`), training time as recorded in the checkpoint
(this machine, 2 CPU cores), and the command that trained it.
"""
from __future__ import annotations

from pathlib import Path

from envs.task import BENCHMARK_VERSION
from glimpse.benchmark import FRESH_SEED
from glimpse.evaluation import canvas_recipe, evaluate_checkpoint
from glimpse.models import get_family
from glimpse.checkpoint import load_checkpoint, training_stages
from glimpse.cli import replace_block
from glimpse.training.config import staged_recipe_command
from glimpse.progress import progress
from glimpse.stats import format_interval, format_p, holm, mcnemar

ROOT = Path(__file__).resolve().parents[1]  # the clone whose checkpoints/, README.md and docs/ this writes

REFERENCE = {  # (published, target) test error in %, from shared/reference and the issues
    "ram-mnist28": ("1.12 (RAM, NIPS 2014)", "<= 0.8"),
    "ram-cluttered60": ("4.08 (RAM, NIPS 2014)", "<= 2.5"),
    "ram-cluttered100": ("10.83 (RAM, arXiv)", "<= 3.0"),
    "draw-cluttered60": ("-", "<= 2.5"),
    "draw-cluttered100": ("3.36 (DRAW)", "<= 3.3"),
    "sat-cluttered60": ("-", "<= 2"),
    "sat-cluttered100": ("-", "<= 3"),
    "ram-multi100": ("about 5 (DRAM, Ba et al. 2015)", "<= 5"),
    "sat-multi100": ("-", "-"),  # two digits, both must be right: no published number
    "stn-cluttered60": ("1.7 (ST-CNN, its own cluttered MNIST)", "<= 2"),
    "resnet-cluttered60": ("-", "<= 1.0"),  # the no-attention control (issue 48)
    "resnet-cluttered100": ("0.92 (a plain CNN, 100 epochs)", "<= 1.0"),
    "resnet-fine-cluttered60": ("-", "<= 1.0"),
    "resnet-fine-cluttered100": ("0.92 (a plain CNN, 100 epochs)", "<= 1.0"),
    # DRAM's targets are one trajectory; the reimplementation averages 10 (the table's hard column)
    "dram-multi100": ("about 5 (DRAM, Ba et al. 2015)", "<= 5.0"),
    "dram-cluttered100": ("1.71 (a DRAM reimplementation, 10 trajectories)", "<= 3.0"),
    "dram-cluttered60": ("2.75 (a DRAM reimplementation)", "<= 1.8"),
}
SCORES = ROOT / "checkpoints" / "scores.json"
EVAL_SEEDS = 5  # a random first glimpse: the mean over evaluation seeds 0-4
FIRST = 1000  # tests/test_shipped_checkpoints.py re-scores the first 1,000 test canvases against this file
README_START, README_END = "<!-- checkpoint-table:start -->", "<!-- checkpoint-table:end -->"
PAIRED_START, PAIRED_END = "<!-- paired-tests:start -->", "<!-- paired-tests:end -->"
COMMANDS_START, COMMANDS_END = "<!-- checkpoint-commands:start -->", "<!-- checkpoint-commands:end -->"
RESULTS = ROOT / "docs" / "results.md"


def interval(error: float, n: int) -> str:
    """95 % Wilson interval of an error rate measured on n canvases, in %."""
    return format_interval(error * n, n)


def score(path: Path, data_dir: str | None, samples: int) -> dict:
    """Every number of a checkpoint's row, by the code behind evaluate.py. A model whose
    deterministic evaluation still draws at random (a random first glimpse) is scored as the mean
    over evaluation seeds 0..EVAL_SEEDS-1 (the first-1,000 check uses seed 0)."""
    result = evaluate_checkpoint(path, data_dir=data_dir, progress=False)
    # a model trained in stages (--init-from) is rebuilt, and costs, every stage
    stages = training_stages(result)
    seeds = range(EVAL_SEEDS if result["seed_dependent"] else 1)
    errors = [result["error"]] + [evaluate_checkpoint(path, data_dir=data_dir, seed=s, progress=False)["error"]
                                  for s in seeds[1:]]
    first = evaluate_checkpoint(path, data_dir=data_dir, limit=FIRST, progress=False)
    # fresh canvases, and for a random first glimpse fresh first glimpses too (evaluation seeds
    # EVAL_SEEDS..2*EVAL_SEEDS-1): on centred 28x28 digits the canvases cannot differ, the draws can
    fresh_seeds = [s + EVAL_SEEDS for s in seeds] if len(seeds) > 1 else list(seeds)
    fresh = [evaluate_checkpoint(path, data_dir=data_dir, canvas_seed=FRESH_SEED, seed=s, progress=False)["error"]
             for s in fresh_seeds]
    row = {"checkpoint": path.name, "benchmark": BENCHMARK_VERSION, "kind": result["kind"], "n": result["n"],
           "test_error": sum(errors) / len(errors), f"first_{FIRST}_error": first["error"], "fresh_seed": FRESH_SEED,
           "fresh_error": sum(fresh) / len(fresh),
           "train_minutes": sum(stage["train_seconds"] or 0 for stage in stages) / 60,
           "command": staged_recipe_command(stages)}
    if len(stages) > 1:
        row["stages"] = len(stages)
    if len(errors) > 1:
        row.update(eval_seeds=len(errors), test_errors_by_seed=errors, fresh_eval_seeds=fresh_seeds,
                   fresh_errors_by_seed=fresh)
    if get_family(result["kind"]).samples_trajectories and samples:
        sampled = evaluate_checkpoint(path, data_dir=data_dir, samples=samples, progress=False)
        row.update(samples=samples, sampled_error=sampled["error"])
    return row


def table(rows: list[dict], samples: int) -> str:
    """The README's table: each checkpoint's errors, its target and the published number."""
    lines = [f"| checkpoint | test error % (95 % interval) | fresh canvases, seed {FRESH_SEED} % | hard, {samples} "
             "trajectories averaged % | target % | published % | training time |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        published, target = REFERENCE.get(Path(row["checkpoint"]).stem, ("-", "-"))
        sampled = error_cell(row["sampled_error"], row["n"]) if "sampled_error" in row else "-"
        seeds = f", mean of seeds 0-{row['eval_seeds'] - 1}" if "eval_seeds" in row else ""
        lines.append(f"| `{row['checkpoint']}` | {error_cell(row['test_error'], row['n'], seeds)} "
                     f"| {error_cell(row['fresh_error'], row['n'], fresh_seeds_note(row))} | {sampled} | {target} | "
                     f"{published} | {row['train_minutes']:.0f} min |")
    return "\n".join(lines)


def commands_table(rows: list[dict]) -> str:
    """docs/results.md's table: the commands that rebuild each checkpoint, stage by stage."""
    lines = ["| checkpoint | training time | command |", "|---|---|---|"]
    lines += [f"| `{row['checkpoint']}` | {row['train_minutes']:.0f} min | `{row['command']}` |" for row in rows]
    return "\n".join(lines)


def error_cell(error: float, n: int, note: str = "") -> str:
    """An error in % with its 95 % interval (the fresh sets and the sampled evaluation have the
    fixed set's n canvases too) and a note on how it was averaged."""
    return f"{100 * error:.2f} ({interval(error, n)}{note})"


def fresh_seeds_note(row: dict) -> str:
    """How the fresh column of a random-first-glimpse row was drawn (rows scored before it had
    fresh evaluation seeds of its own used seeds 0..EVAL_SEEDS-1 there too)."""
    seeds = row.get("fresh_eval_seeds")
    return f", mean of seeds {seeds[0]}-{seeds[-1]}" if seeds else ""


def paired(paths: list[Path], data_dir: str | None) -> list[dict]:
    """McNemar's exact test for every two checkpoints tested on the same canvases (deterministic
    evaluation, seed 0), Holm-adjusted over all the pairs."""
    scored = {}
    for path in progress(paths, desc="paired tests: score", unit="checkpoints", timed=False):
        result = evaluate_checkpoint(path, data_dir=data_dir, progress=False, per_canvas=True)
        task = load_checkpoint(path)["task"]
        scored[path.name] = (canvas_recipe(task), result["right"])
    tests = []
    names = sorted(scored)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if scored[a][0] == scored[b][0]:
                size, clutter, _, digits = scored[a][0]
                task = f"{size}x{size}, {clutter} clutter" + (f", {digits} digits" if digits > 1 else "")
                tests.append({"task": task, "a": a, "b": b, **mcnemar(scored[a][1], scored[b][1])})
    return holm(sorted(tests, key=lambda t: (t["task"], t["a"], t["b"])))


def paired_table(tests: list[dict]) -> str:
    lines = ["| canvases | A | B | A right, B wrong | B right, A wrong | p | p (Holm) | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for t in tests:
        better = t["a"] if t["only_a"] > t["only_b"] else t["b"]
        verdict = f"`{better}` reads more right" if t["p_holm"] < 0.05 else "no difference shown"
        lines.append(f"| {t['task']} | `{t['a']}` | `{t['b']}` | {t['only_a']} | {t['only_b']} | {format_p(t['p'])} | "
                     f"{format_p(t['p_holm'])} | {verdict} |")
    return "\n".join(lines)


def write_tables(rows: list[dict], samples: int, tests: list[dict] | None = None) -> None:
    """The README's table and docs/results.md's commands (and paired tests, when given) from ``rows``."""
    replace_block(ROOT / "README.md", README_START, README_END, table(rows, samples))
    replace_block(RESULTS, COMMANDS_START, COMMANDS_END, commands_table(rows))
    if tests is not None:
        replace_block(RESULTS, PAIRED_START, PAIRED_END, paired_table(tests))
