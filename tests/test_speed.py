import importlib.util
from pathlib import Path

import pytest
import torch

from glimpse.speed import TRAINING_PHASES, training_speed
from glimpse.training.config import resolve_config
from glimpse.training.loop import make_learner

ROOT = Path(__file__).resolve().parents[1]


def load_benchmark(name="speed"):
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("overrides", [{"mode": "hard"}, {"mode": "soft", "arch": "draw"}])
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
    with pytest.raises(SystemExit) as exit:  # argparse: exit code 2 with the known names
        benchmark.main(["--families", "ram,nope", "--data-dir", "bundled"])
    assert exit.value.code == 2 and "unknown family 'nope'" in capsys.readouterr().err


def test_the_timed_families_come_from_the_registry():
    from glimpse.models import list_families

    benchmark = load_benchmark()
    attention = [f.title for f in list_families() if f.has_attention]
    assert [title for title, _, _ in benchmark.timed_families("attention")] == attention
    assert len(benchmark.timed_families("all")) == len(list_families()) > len(attention)
    (title, options, steps), = benchmark.timed_families("resnet")
    assert options["arch"] == "resnet" and options["mode"] == "full" and steps == 10


def test_env_speed_counts_glimpses_of_whole_episodes(bundled, monkeypatch):
    """Glimpse-steps/s is episodes x envs x glimpses per episode over the timed seconds, and the
    timed loop plays every episode to its judged end (T steps, then the autoreset step)."""
    import glimpse.speed as speed
    from envs import ClutteredMNISTVectorEnv

    from types import SimpleNamespace

    ticks = iter([100.0, 110.0] * 2)  # each timing reads the module's clock twice: 10 s
    monkeypatch.setattr(speed, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
    steps, ends, real_step = [], [], ClutteredMNISTVectorEnv.step

    def counted(self, action):
        out = real_step(self, action)
        steps.append(1)
        ends.append(bool(out[2].all()))  # terminated: the episodes were judged
        return out

    monkeypatch.setattr(ClutteredMNISTVectorEnv, "step", counted)
    for validate in (True, False):
        steps.clear(), ends.clear()
        assert speed.env_steps_per_second(8, 2, "cpu", validate, "bundled") == pytest.approx(2 * 8 * 6 / 10)
        assert len(steps) == 2 * (6 + 1) and sum(ends) == 2  # two whole episodes, each judged once


def test_training_flops_are_counted_for_forward_and_backward(bundled):
    """RAM on 28x28 (8x8 glimpses, hidden 256, 6 glimpses): about 7.4 MFLOPs per image, forward and backward."""
    from glimpse.speed import training_flops_per_image

    config = resolve_config({"preset": "mnist28", "mode": "hard", "batch_size": 16, "data_dir": "bundled"})
    flops = training_flops_per_image(make_learner(config, bundled), 16)
    assert 5e6 < flops < 10e6


def test_parallel_training_speed_runs_processes_together(bundled):
    """Two single-threaded processes train one RAM together (DistributedDataParallel over gloo)."""
    import torch.distributed as dist

    from glimpse.speed import parallel_training_speed

    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("torch.distributed with the gloo backend is not available")
    config = resolve_config({"preset": "mnist28", "mode": "hard", "batch_size": 8, "data_dir": "bundled"})
    assert parallel_training_speed(config, "bundled", steps=2, processes=2, warmup=1) > 0
    with pytest.raises(ValueError, match="divisible"):
        parallel_training_speed(config, "bundled", steps=1, processes=3)


def test_speed_benchmark_rejects_processes_that_do_not_divide_the_batch(capsys):
    benchmark = load_benchmark()
    assert benchmark.main(["--processes", "3", "--data-dir", "bundled"]) == 2
    assert "--processes" in capsys.readouterr().err


def test_training_speed_can_start_from_trained_weights(bundled):
    """The denormals benchmark times trained models: the steps start from the weights given."""
    config = resolve_config({"preset": "cluttered60", "mode": "soft", "arch": "draw", "batch_size": 8,
                             "data_dir": "bundled", "lr": 1e-9})
    torch.manual_seed(1)
    trained = make_learner(config, bundled).model.state_dict()
    torch.manual_seed(0)
    _, _, learner = training_speed(config, bundled, steps=1, warmup=0, weights=trained)
    for name, value in learner.model.state_dict().items():  # Adam's step moves each weight by about lr
        torch.testing.assert_close(value, trained[name], rtol=0, atol=1e-6)


def test_the_denormals_benchmark_times_a_checkpoint_both_ways(tmp_path, capsys):
    from glimpse.commands import train

    assert train.main(["--data-dir", "bundled", "--threads", "1", "--run-dir", str(tmp_path), "--run-name", "d",
                       "--mode", "soft", "--arch", "draw", "--max-steps", "2", "--batch-size", "8",
                       "--image-every", "0"]) == 0
    capsys.readouterr()
    benchmark = load_benchmark("denormals")
    checkpoint = str(tmp_path / "d" / "best.pt")
    assert benchmark.main(["--checkpoints", checkpoint, "--data-dir", "bundled", "--steps", "1"]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if "best.pt" in line]
    assert len(row) == 1 and row[0].startswith("| DRAW read")
    assert benchmark.main(["--checkpoints", checkpoint, "--steps", "0", "--data-dir", "bundled"]) == 2
    assert "--steps" in capsys.readouterr().err
    assert benchmark.main(["--checkpoints", str(tmp_path / "none.pt"), "--data-dir", "bundled"]) == 2
    assert f"checkpoint {tmp_path / 'none.pt'} does not exist" in capsys.readouterr().err
