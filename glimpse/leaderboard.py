"""The leaderboard page (docs/leaderboard.md), generated, never written by hand.

Rows come from three files in the repository:

- ``checkpoints/scores.json``: the lab's shipped checkpoints, scored by glimpse/scores.py;
- ``benchmarks/results/*.json``: any model scored by :mod:`glimpse.benchmark` and saved with
  ``BenchmarkResult.save`` (or ``evaluate.py --model ... --json``);
- ``benchmarks/published.csv``: published numbers, each with its source and the protocol columns
  that decide whether it compares (paper version, trajectories averaged, clutter recipe, whether
  the test set chose the model); a cell nobody knows says "unknown".

``python scripts/leaderboard.py --write`` writes the page; tests/test_benchmark.py checks it is up to date.
"""
from __future__ import annotations

import base64
import binascii
import csv
import json
from pathlib import Path

import numpy as np

from envs.task import BENCHMARK_VERSION
from glimpse.benchmark import CANVAS_KEYS, TEST_SEED, TEST_SET_HASHES, benchmark_task, canvas_recipe
from glimpse.cli import markdown_table, write_text
from glimpse.stats import format_interval

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "leaderboard.md"
SCORES = ROOT / "checkpoints" / "scores.json"
RESULTS = ROOT / "benchmarks" / "results"
PUBLISHED = ROOT / "benchmarks" / "published.csv"
TASKS = ("cluttered60", "cluttered100", "multi100", "mnist28")
FULL_TEST_SET = 10_000  # the fixed test canvases of every task: one per MNIST test digit


def task_of(checkpoint: str, family: str) -> str:
    """A shipped checkpoint's task, from its file name: ``{family}-{task}.pt`` (``ram-diff-cluttered60.pt``
    is family ram-diff on cluttered60; family names may hold hyphens, so the family is stripped whole)."""
    stem = Path(checkpoint).stem
    if not stem.startswith(f"{family}-"):
        raise ValueError(f"{checkpoint}: a shipped checkpoint is named {family}-TASK.pt by its family")
    return stem[len(family) + 1:]


# what a saved result (BenchmarkResult.save) holds that the page reads
RESULT_KEYS = ("benchmark", "task", "split", "canvas_seed", "set_hash", "n", "error", "reads", "trajectories_per_image",
               "right_bits")


def lab_rows(scores: dict) -> list[dict]:
    if scores.get("benchmark") != BENCHMARK_VERSION:
        raise ValueError(f"{SCORES.name} holds benchmark v{scores.get('benchmark')} scores, not v{BENCHMARK_VERSION}: "
                         f"score the checkpoints again (python scripts/checkpoint_table.py --write)")
    rows = []
    for row in scores["rows"]:
        n = row["n"]
        rows.append({"model": f"`{row['checkpoint']}`", "task": task_of(row["checkpoint"], row["kind"]),
                     "error": 100 * row["test_error"],
                     "cell": f"{100 * row['test_error']:.2f} ({format_interval(row['test_error'] * n, n)})",
                     "fresh": f"{100 * row['fresh_error']:.2f}", "protocol": f"benchmark v{scores['benchmark']}, "
                     f"{n:,} fixed test canvases, one trajectory"
                     + (f" (mean of {row['eval_seeds']} evaluation seeds: a random first glimpse)"
                        if "eval_seeds" in row else "") + ", selected on validation canvases"})
    return rows


def board_task(result: dict) -> str | None:
    """The board's task whose canvases a result read: its own task, or for a custom task (an agent
    with its own glimpse settings, say) the board's task of the same canvas recipe; None if none."""
    if result["task"] in TASKS:
        return result["task"]
    if result["task"] != "custom":
        return None
    recipe = canvas_recipe(result.get("task_settings") or {})
    return next((t for t in TASKS if canvas_recipe(benchmark_task(t)[1]) == recipe), None)


def sensor_changes(result: dict, task: str) -> list[str]:
    """The task settings a result was scored with that are not ``task``'s and do not change its
    canvases (the glimpses an agent takes): the model's, named in its protocol."""
    settings, shipped = result["task_settings"], benchmark_task(task)[1]
    return [f"{k} {settings.get(k)} (the task's {shipped.get(k)})" for k in sorted(shipped.keys() | settings.keys())
            if k not in CANVAS_KEYS and settings.get(k) != shipped.get(k)]


def not_comparable(result: dict, full_sets: dict[str, int]) -> str | None:
    """Why a saved result cannot stand beside the lab's rows of its task, or None: it must be scored
    on this benchmark version's fixed test canvases (MNIST's test digits, the test seed, the hash of
    its task's set), all of them, of one of the board's tasks' canvas recipes, and its error must be
    the canvases it read right. Glimpse settings of its own are the model's, and its row names them."""
    missing = [key for key in RESULT_KEYS if key not in result]
    if missing:
        return (f"not a saved benchmark result: it has no {', '.join(missing)} (save one with BenchmarkResult.save, "
                f"or the last line of evaluate.py --model ... --json)")
    if result["benchmark"] != BENCHMARK_VERSION:
        return f"benchmark v{result['benchmark']}, not v{BENCHMARK_VERSION}"
    if result["split"] != "test" or result["canvas_seed"] != TEST_SEED:
        return (f"scored on {result['split']} canvases of seed {result['canvas_seed']}; the board's are the fixed "
                f"test canvases (seed {TEST_SEED})")
    if result.get("mnist_subset"):
        return "scored on the bundled subset's digits, not MNIST's test set"
    settings = result.get("task_settings")
    if not settings:
        return "it records no task settings (saved before they were recorded?): score it again"
    task = board_task(result)
    if task is None:
        drawn = ", ".join(f"{k} {v}" for k, v in zip(CANVAS_KEYS, canvas_recipe(settings)))
        return f"task {result['task']!r} ({drawn}): the board's tasks are {', '.join(TASKS)}"
    shipped = benchmark_task(task)[1]
    changed = [k for k in CANVAS_KEYS if settings.get(k, shipped.get(k)) != shipped.get(k)]
    if changed:
        return (f"scored with other canvases than {task}'s: "
                + ", ".join(f"{k} {settings.get(k)} (the task's {shipped.get(k)})" for k in changed))
    full = full_sets.get(task, FULL_TEST_SET)
    if result["n"] != full:
        return f"{result['n']:,} canvases, not the task's {full:,} (a --limit?)"
    if result["set_hash"] != TEST_SET_HASHES.get(task):
        return (f"its canvases' hash {result['set_hash']} is not that of {task}'s fixed test canvases "
                f"({TEST_SET_HASHES.get(task)})")
    try:
        bits = np.frombuffer(base64.b64decode(result["right_bits"], validate=True), np.uint8)
    except (binascii.Error, TypeError, ValueError):
        return "its right_bits are not base64"
    if len(bits) != (result["n"] + 7) // 8:
        return f"its right_bits hold {8 * len(bits)} bits, not one per canvas ({result['n']:,})"
    errors = int(result["n"] - np.unpackbits(bits, count=result["n"]).sum())
    if errors != round(result["error"] * result["n"]):
        return f"its error {100 * result['error']:.2f} % is not the {errors:,} canvases its right_bits read wrong"
    return None


def _read_result(path: Path) -> dict:
    """A saved result's JSON object; ValueError saying why a file is not one."""
    try:
        result = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not readable as JSON ({exc})") from None
    if not isinstance(result, dict):
        raise ValueError(f"not a saved benchmark result (a JSON {type(result).__name__}, not an object)")
    return result


def result_rows(directory: Path, full_sets: dict[str, int] | None = None) -> list[dict]:
    """The saved results' rows; ValueError naming each file that does not compare (and why)."""
    rows, refused = [], []
    for path in sorted(directory.glob("*.json")):
        try:
            r = _read_result(path)
            why = not_comparable(r, full_sets or {})
        except ValueError as exc:
            why = str(exc)
        if why:
            refused.append(f"{path.name}: {why}")
            continue
        task, errors = board_task(r), round(r["error"] * r["n"])
        read = "whole canvas" if r["reads"] == "whole canvas" else f"{r.get('glimpses_per_image')} glimpses"
        own = sensor_changes(r, task)
        rows.append({"model": r.get("model") or path.stem, "task": task, "error": 100 * r["error"],
                     "cell": f"{100 * r['error']:.2f} ({format_interval(errors, r['n'])})", "fresh": "-",
                     "protocol": f"benchmark v{r['benchmark']}, {r['n']:,} {r['split']} canvases (hash "
                                 f"{r['set_hash']}), {r['trajectories_per_image']} trajectory, {read}"
                                 + (f"; its own sensor: {', '.join(own)}" if own else "")})
    if refused:
        raise ValueError("results that do not compare with the board's: " + "; ".join(refused))
    return rows


def published_rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as handle:
        return [[row["model"], row["task"], row["error_percent"], row["source"], row["paper_version"],
                 row["trajectories_averaged"], row["clutter_recipe"], row["test_set_chose_model"],
                 row["notes"] or "-"] for row in csv.DictReader(handle)]


def page(scores: dict, results_dir: Path = RESULTS, published: Path = PUBLISHED) -> str:
    lab = lab_rows(scores)
    full_sets = {task_of(row["checkpoint"], row["kind"]): row["n"] for row in scores["rows"]}
    measured = lab + result_rows(results_dir, full_sets)
    tasks = [t for t in TASKS if any(r["task"] == t for r in measured)]
    tasks += sorted({r["task"] for r in measured} - set(tasks))
    parts = [
        "# Leaderboard",
        "",
        "<!-- generated by `python scripts/leaderboard.py --write`: do not edit by hand -->",
        "",
        "Test error in %, lower is better. **Measured here** means scored by this lab's benchmark "
        "(glimpse.benchmark, or the checkpoint table's code behind `evaluate.py`): the same fixed canvases for "
        "every row of a task, one trajectory per canvas, each error with its 95 % (Wilson) interval. "
        "**Published** numbers come from their papers and reimplementations with their own canvases and "
        "protocols; the columns say what is known of them, and they compare with the lab's rows only as far "
        "as those columns agree.",
        "",
    ]
    for task in tasks:
        rows = sorted((r for r in measured if r["task"] == task), key=lambda r: r["error"])
        parts += [f"## {task}: measured here", "",
                  markdown_table(["model", "test error % (95 % interval)", "fresh canvases %", "protocol"],
                                 [[r["model"], r["cell"], r["fresh"], r["protocol"]] for r in rows]), ""]
    parts += ["## Published", "",
              markdown_table(["model", "task", "error %", "source", "version", "trajectories averaged",
                              "clutter recipe", "test set chose the model", "notes"], published_rows(published)),
              "",
              "## Adding a row",
              "",
              "- **Your own model:** score it with `glimpse.benchmark.score(predict, task)` (a model that reads the "
              "whole canvas) or `score_agent(agent, task)` (an agent that acts through the env: `reset(n)` before "
              "n episodes, if it has one, then `act(observation)` each step, returning `{\"location\": (n, 2) in "
              "[-1, 1], \"label\": (n,)}`, judged at the last step; `examples/sb3_ppo.py` is one). An `nn.Module` is "
              "scored in eval mode; a function that wraps one calls `eval()` itself, and one whose answers depend "
              "on the batch is refused. Choose the model (its epochs, its settings) on the validation canvases "
              "(`score(..., split=\"val\")`) and score the test canvases once, at the end: the page cannot tell "
              "how a result was chosen, and the lab's rows were chosen on validation canvases. Save the result "
              "with `result.save('benchmarks/results/NAME.json')`, and run `python scripts/leaderboard.py --write`. "
              "(`python evaluate.py --model MODULE:CALLABLE --preset TASK --json` prints the same result as its "
              "last line.) The page takes only results on the task's fixed test canvases, all of them, of MNIST's "
              "test digits (no `--limit`, `--split val`, `--canvas-seed` or bundled subset), drawn by one of its "
              "tasks' canvas recipes (an agent's own glimpse settings are the model's: its row names them); it "
              "refuses the others by name. A saved result keeps which canvases it read right, so two of them are tested "
              "canvas by canvas later: `glimpse.benchmark.paired(BenchmarkResult.load(a), BenchmarkResult.load(b))`.",
              "- **A published number:** add a line to `benchmarks/published.csv` with its source; write "
              "`unknown` in any protocol column the source does not settle.",
              ""]
    return "\n".join(parts)


def write(check_only: bool = False) -> bool:
    """Write the page (or, with ``check_only``, only say whether it is up to date). True if it was."""
    text = page(json.loads(SCORES.read_text()))
    current = PAGE.read_text() if PAGE.exists() else ""
    if not check_only and current != text:
        write_text(PAGE, text)
    return current == text
