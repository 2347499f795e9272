import importlib.util
from pathlib import Path

import pytest
import torch

from glimpse.speed import TRAINING_PHASES, training_speed
from glimpse.training.config import resolve_config
from glimpse.training.loop import make_learner

ROOT = Path(__file__).resolve().parents[1]


def load_benchmark():
    spec = importlib.util.spec_from_file_location("speed_benchmark", ROOT / "benchmarks" / "speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("overrides", [{"mode": "hard"}, {"mode": "soft", "soft_arch": "draw"}])
def test_training_speed_times_real_steps_phase_by_phase(bundled, overrides):
    config = resolve_config({"preset": "cluttered60", "batch_size": 8, "data_dir": "bundled", **overrides})
    torch.manual_seed(0)
    images_per_second, phases, learner = training_speed(config, bundled, steps=2, warmup=1)
    assert tuple(phases) == TRAINING_PHASES and all(ms > 0 for ms in phases.values())
    # the rate is the batch over the summed phases: nothing outside them is counted
    assert images_per_second == pytest.approx(8 / (sum(phases.values()) / 1000))
    torch.manual_seed(0)
    untrained = make_learner(config, bundled).model.state_dict()
    changed = [name for name, value in learner.model.state_dict().items()
               if value.is_floating_point() and not torch.equal(value, untrained[name])]
    assert changed, "the optimizer never stepped"


def test_speed_benchmark_rejects_bad_options(capsys):
    benchmark = load_benchmark()
    assert benchmark.main(["--threads", "-1", "--data-dir", "bundled"]) == 2
    assert "--threads" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert benchmark.main(["--device", "cuda", "--data-dir", "bundled"]) == 2
        assert "no CUDA GPU" in capsys.readouterr().err
