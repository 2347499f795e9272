"""The comparison baselines: full-image FC and conv nets, and RAM with random glimpses."""
import numpy as np
import pytest
import torch

from glimpse.commands import train
from envs.engine import fixed_canvas_set
from glimpse.models.episodes import play_canvases
from glimpse.costs import flops_per_image, pixels_read
from glimpse.models import build_model, get_family
from glimpse.checkpoint import load_checkpoint

FAST = ["--data-dir", "bundled", "--threads", "1", "--eval-batch-size", "1000", "--image-every", "0"]
TASK = dict(canvas_size=60, n_clutter=4, centred_digit=False, glimpse_size=12, n_scales=3, n_glimpses=6,
            first_location="random")


def linear(n_in, n_out):
    return 2 * n_in * n_out


@pytest.mark.parametrize("kind", ["fc", "cnn"])
def test_full_image_baselines_shapes_and_pixels(kind):
    model = build_model(kind, dict(canvas_size=60))
    assert model(torch.rand(3, 1, 60, 60))["logits"].shape == (3, 10)
    with pytest.raises(ValueError, match=r"images must be \(B, 1, 60, 60\), got \(3, 1, 64, 64\)"):
        model(torch.rand(3, 1, 64, 64))  # the conv net's feature map is 11x11 for 60 to 64 px: it would read it
    assert pixels_read(kind, TASK, dict(canvas_size=60)) == {
        "sensor_values": 3600, "canvas_pixels_touched": 3600, "input_pixels": 3600}


def test_baseline_flops_by_hand():
    assert flops_per_image("fc", build_model("fc", dict(canvas_size=28)), dict(canvas_size=28)) == (
        linear(784, 256) + linear(256, 256) + linear(256, 10))
    side = (28 - 10) // 5 + 1  # 4: eight 10x10 filters with stride 5
    conv = 2 * 10 * 10 * 8 * side * side
    assert flops_per_image("cnn", build_model("cnn", dict(canvas_size=28)), dict(canvas_size=28)) == (
        conv + linear(8 * side * side, 256) + linear(256, 10))


def test_random_glimpses_are_uniform_seeded_and_untrained_by_reinforce(bundled):
    model = build_model("ram", dict(policy="random", n_glimpses=6))
    canvases = fixed_canvas_set(bundled.test.images[:400], bundled.test.labels[:400], 60, 4, False, 0)
    first = play_canvases(model, TASK, canvases.images, canvases.labels)
    again = play_canvases(model, TASK, canvases.images, canvases.labels)
    torch.testing.assert_close(first.locations, again.locations, rtol=0, atol=0)  # deterministic evaluation
    chosen = first.locations[:, 1:].reshape(-1, 2)  # the policy's own choices (the first is the env's)
    assert chosen.abs().max() <= 1
    # uniform on [-1, 1]: mean 0, variance 1/3, and not the policy mean
    assert chosen.mean().abs() < 0.03 and abs(chosen.var().item() - 1 / 3) < 0.02
    assert first.log_probs.shape == (400, 5) and not first.log_probs.requires_grad
    with pytest.raises(ValueError, match="policy"):
        build_model("ram", dict(policy="greedy"))
    # and the results say how it chose, not "the policy mean"
    family = get_family("ram")
    assert family.evaluation_text(model, TASK, 0, 3).startswith("glimpses after the first uniformly at random (seed 3)")
    assert family.evaluation_text(build_model("ram", dict(n_glimpses=6)), TASK, 0, 3).startswith(
        "deterministic (policy mean)")


@pytest.mark.parametrize("extra,kind,floor", [
    (["--mode", "full", "--full-arch", "fc", "--epochs", "2"], "fc", 0.8),
    (["--mode", "full", "--full-arch", "cnn", "--epochs", "2"], "cnn", 0.8),
    (["--mode", "hard", "--random-glimpses", "--epochs", "2", "--glimpse-size", "12", "--n-scales", "2"], "ram", 0.4),
])
def test_baselines_train_above_chance(extra, kind, floor, tmp_path):
    assert train.main([*FAST, "--preset", "mnist28", "--batch-size", "64", "--lr", "3e-3", "--run-dir",
                       str(tmp_path), "--run-name", "run", *extra]) == 0
    best = load_checkpoint(tmp_path / "run" / "best.pt")
    assert best["kind"] == kind and best["test_accuracy"] > floor, best["test_accuracy"]
    if kind == "ram":  # no REINFORCE: the location policy's weights never moved
        torch.manual_seed(0)
        fresh = build_model("ram", best["model_config"]).state_dict()
        for name in ("location_policy.mean.weight", "location_policy.mean.bias"):
            assert torch.equal(best["model_state"][name], fresh[name])
    assert len(best["history"]) == 2 and best["history"][-1]["epoch"] == 2.0
    assert np.isfinite([h["val_accuracy"] for h in best["history"]]).all()


def test_a_baseline_run_is_named_for_what_it_is():
    from glimpse.training.config import resolve_config
    from glimpse.training.loop import default_run_name

    assert default_run_name(resolve_config({"random_glimpses": True})).startswith("ram-random-glimpses-cluttered60-seed0-")
    assert default_run_name(resolve_config({})).startswith("ram-cluttered60-seed0-")
    assert default_run_name(resolve_config({"mode": "full"})).startswith("cnn-cluttered60-seed0-")
