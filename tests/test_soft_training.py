"""train.py --mode soft and evaluate.py on soft checkpoints, on the bundled subset."""
import json

import pytest

from glimpse.commands import evaluate
from glimpse.commands import train
from glimpse.checkpoint import load_checkpoint

FAST = ["--data-dir", "bundled", "--threads", "1", "--eval-batch-size", "1000", "--image-every", "0"]


@pytest.mark.parametrize("arch,extra,floor", [
    ("draw", ["--preset", "mnist28", "--epochs", "3", "--batch-size", "64", "--lr", "3e-3"], 0.6),
    ("sat", ["--preset", "mnist28", "--epochs", "2", "--batch-size", "64", "--lr", "3e-3"], 0.5),
    ("stn", ["--preset", "translated60", "--epochs", "2", "--batch-size", "64", "--lr", "3e-3"], 0.5),
])
def test_soft_attention_learns_well_above_chance(arch, extra, floor, tmp_path, capsys):
    argv = [*FAST, "--mode", "soft", "--soft-arch", arch, "--run-dir", str(tmp_path), "--run-name", arch, *extra]
    assert train.main(argv) == 0
    best = tmp_path / arch / "best.pt"
    checkpoint = load_checkpoint(best)
    assert checkpoint["kind"] == arch and checkpoint["test_accuracy"] > floor, checkpoint["test_accuracy"]
    capsys.readouterr()
    assert evaluate.main(["--checkpoint", str(best), "--data-dir", "bundled", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["accuracy"] == pytest.approx(checkpoint["test_accuracy"]) and result["n"] == 2000
    assert evaluate.main(["--checkpoint", str(best), "--data-dir", "bundled", "--samples", "2"]) == 2
