"""The README's results table cannot drift from the shipped checkpoints: each is re-scored here on
the first 1,000 canvases of the benchmark's test set against checkpoints/scores.json (written by
scripts/checkpoint_table.py --write), and the README's table must be that file's table.

Needs full MNIST: $GLIMPSE_DATA, or ../shared/datasets beside the clone (as on the lab's machines
and in CI); skipped without it. Tolerance: 0.2 points (2 of 1,000 canvases), for float
differences between machines in the models' arithmetic; the canvases themselves are exact
(drawn on the CPU, their hashes are checked in test_benchmark_sets.py).
"""
import json
import os
from pathlib import Path

import pytest

from envs.task import BENCHMARK_VERSION
from glimpse.checkpoint import load_checkpoint, load_model, training_stages
from glimpse.training.config import staged_recipe_command
from glimpse.evaluation import evaluate_checkpoint

ROOT = Path(__file__).resolve().parents[1]
SCORES = json.loads((ROOT / "checkpoints" / "scores.json").read_text())
DATA = os.environ.get("GLIMPSE_DATA") or str(ROOT.parent / "shared" / "datasets")
HAS_MNIST = (Path(DATA) / "MNIST" / "raw" / "t10k-images-idx3-ubyte").is_file()
TOLERANCE = 0.002


def load_table_script():
    import glimpse.scores

    return glimpse.scores  # the table's code; scripts/checkpoint_table.py is its command line


def test_every_shipped_checkpoint_has_scores_of_this_benchmark():
    assert SCORES["benchmark"] == BENCHMARK_VERSION
    assert sorted(row["checkpoint"] for row in SCORES["rows"]) == sorted(p.name for p in (ROOT / "checkpoints").glob("*.pt"))


def test_the_readme_table_is_the_scores_table():
    script = load_table_script()
    readme = (ROOT / "README.md").read_text()
    block = readme.split(script.README_START, 1)[1].split(script.README_END, 1)[0].strip()
    assert block == script.table(SCORES["rows"], SCORES["samples"])


def test_the_docs_give_each_checkpoint_its_command():
    script = load_table_script()
    results = (ROOT / "docs" / "results.md").read_text()
    block = results.split(script.COMMANDS_START, 1)[1].split(script.COMMANDS_END, 1)[0].strip()
    assert block == script.commands_table(SCORES["rows"])


def test_the_paired_tests_in_the_docs_are_those_of_the_scores_file():
    script = load_table_script()
    results = (ROOT / "docs" / "results.md").read_text()
    block = results.split(script.PAIRED_START, 1)[1].split(script.PAIRED_END, 1)[0].strip()
    assert block == script.paired_table(SCORES["paired"])
    shipped = {row["checkpoint"] for row in SCORES["rows"]}
    assert all({t["a"], t["b"]} <= shipped for t in SCORES["paired"])


@pytest.mark.skipif(not HAS_MNIST, reason=f"full MNIST not found in {DATA} (set $GLIMPSE_DATA to a folder holding MNIST/raw)")
@pytest.mark.parametrize("row", SCORES["rows"], ids=lambda row: row["checkpoint"])
def test_a_checkpoint_scores_its_table_entry(row):
    result = evaluate_checkpoint(ROOT / "checkpoints" / row["checkpoint"], data_dir=DATA, limit=1000, progress=False)
    assert result["n"] == 1000
    assert abs(result["error"] - row["first_1000_error"]) <= TOLERANCE, (result["error"], row["first_1000_error"])


@pytest.mark.parametrize("row", SCORES["rows"], ids=lambda row: row["checkpoint"])
def test_a_checkpoints_command_rebuilds_it_from_scratch(row):
    """The table's command is the checkpoint's own record of its stages, and never starts from a
    file in checkpoints/: that file may be replaced by a better model later (as ram-cluttered100.pt
    was under ram-multi100.pt), and the command would then rebuild something else."""
    stages = training_stages(load_checkpoint(ROOT / "checkpoints" / row["checkpoint"]))
    assert row["command"] == staged_recipe_command(stages)
    assert "--init-from checkpoints/" not in row["command"]


@pytest.mark.parametrize("path", sorted((ROOT / "checkpoints" / "stages").glob("*.pt")), ids=lambda p: p.name)
def test_a_kept_stage_loads_and_its_readme_row_says_how_it_was_made(path):
    """A stage kept for --init-from on another machine must load there, and checkpoints/stages/README.md
    must give its row (scores and the command)."""
    model, payload = load_model(path)
    assert payload["train_config"]["arch"] == payload["kind"] and sum(p.numel() for p in model.parameters()) > 0
    row = next((line for line in (ROOT / "checkpoints" / "stages" / "README.md").read_text().splitlines()
                if line.startswith(f"| `{path.name}`")), None)
    assert row is not None and "python train.py" in row, f"{path.name} has no row in checkpoints/stages/README.md"


@pytest.mark.parametrize("run_dir", sorted(p.parent for p in (ROOT / "checkpoints" / "unfinished").glob("*/last.pt")),
                         ids=lambda p: p.name)
def test_an_unfinished_run_resumes_and_its_readme_row_says_how(run_dir):
    """A run carried to the next session in checkpoints/unfinished/ must resume on any machine with
    its own options, and checkpoints/unfinished/README.md must give the command that continues it."""
    from glimpse.commands.train import resumed_config
    from glimpse.training.config import build_parser

    config = resumed_config(build_parser().parse_args(["--resume", str(run_dir)]))
    assert config.epochs > 0 and (run_dir / "best.pt").is_file()
    readme = (ROOT / "checkpoints" / "unfinished" / "README.md").read_text()
    in_progress, finished = readme.split("\n## In progress\n")[1].split("\n## Finished\n")
    history = load_checkpoint(run_dir / "last.pt")["history"]
    if history and history[-1]["epoch"] >= config.epochs:  # trained: its resume ends at once
        assert f"| `{run_dir.name}` |" in finished, f"{run_dir.name} is finished: its row belongs under ## Finished"
        assert "python train.py --resume checkpoints/unfinished/NAME --data-dir DIR" in finished
    else:
        assert f"| `{run_dir.name}` |" in in_progress and \
            f"python train.py --resume checkpoints/unfinished/{run_dir.name}" in in_progress, \
            f"{run_dir.name} is in progress: its row under ## In progress must give its resume command"


@pytest.mark.parametrize("name, draws", [("ram-mnist28.pt", True), ("ram-cluttered60.pt", False),
                                         ("sat-cluttered60.pt", False)])
def test_a_result_says_whether_its_evaluation_seed_matters(name, draws):
    """The scores file averages over evaluation seeds exactly where this says the seed matters
    (ram-mnist28's first glimpse falls at random; the others evaluate deterministically)."""
    by_seed = [evaluate_checkpoint(ROOT / "checkpoints" / name, data_dir="bundled", limit=200, seed=seed,
                                   per_canvas=True, progress=False) for seed in (0, 1)]
    assert [result["seed_dependent"] for result in by_seed] == [draws, draws]
    if not draws:
        assert (by_seed[0]["right"] == by_seed[1]["right"]).all()
    row = next(row for row in SCORES["rows"] if row["checkpoint"] == name)
    assert ("eval_seeds" in row) == draws
