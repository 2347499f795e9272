"""Every family that states a short run (``Family.quick_recipe``) learns well above chance with
train.py on the bundled subset, and evaluate.py scores its checkpoint as training did. The list
comes from the registry: a new family is picked up here by stating its recipe."""
import json

import pytest

from glimpse.checkpoint import load_checkpoint
from glimpse.commands import evaluate, train
from glimpse.models import list_families
from glimpse.training.config import family_options

FAST = ["--data-dir", "bundled", "--threads", "1", "--device", "cpu", "--eval-batch-size", "1000", "--image-every", "0"]
QUICK = [f for f in list_families() if f.quick_recipe]


def test_every_soft_family_states_a_short_run():
    assert {f.name for f in list_families("soft")} <= {f.name for f in QUICK}


@pytest.mark.parametrize("family", QUICK, ids=lambda f: f.name)
def test_each_family_learns_well_above_chance(family, tmp_path, capsys):
    options = {**family_options(family), **family.quick_recipe}
    argv = [*FAST, "--run-dir", str(tmp_path), "--run-name", family.name]
    for name, value in options.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    assert train.main(argv) == 0
    best = tmp_path / family.name / "best.pt"
    checkpoint = load_checkpoint(best)
    assert checkpoint["kind"] == family.name and checkpoint["train_config"]["arch"] == family.name
    assert checkpoint["test_accuracy"] > family.quick_floor, checkpoint["test_accuracy"]  # chance is 0.1
    capsys.readouterr()
    assert evaluate.main(["--checkpoint", str(best), "--data-dir", "bundled", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["accuracy"] == pytest.approx(checkpoint["test_accuracy"]) and result["n"] == 2000
    # sampled trajectories are for the families that sample where they look; the others refuse them
    sampled = evaluate.main(["--checkpoint", str(best), "--data-dir", "bundled", "--samples", "2", "--limit", "200"])
    assert sampled == (0 if family.samples_trajectories else 2)
