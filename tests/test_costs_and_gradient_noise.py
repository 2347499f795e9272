"""glimpse.costs and glimpse.gradient_noise: pixel counts, FLOP counts against hand computations,
gradient variance on problems with a known answer, and that the real models' attention gradients
can be measured."""
import math

import gymnasium as gym
import pytest
import torch

from envs import ClutteredMNISTVectorEnv
from glimpse.costs import flop_breakdown, flops_per_image, pixels_read
from glimpse.gradient_noise import (attention_parameters, gradient_estimates, reinforce_attention_gradient,
                                    reinforce_gradient_fn, relative_variance, relative_variance_interval, trace_interval,
                                    location_estimator_gradients, location_estimator_noise, soft_gradient_fn,
                                    soft_minibatch, trace_and_signal)
from glimpse.models import build_model, get_family, list_families
from glimpse.models.ram.location import LocationPolicy
from glimpse.training.config import resolve_config
from glimpse.training.loop import learner_class

torch.set_num_threads(1)

MNIST28 = dict(canvas_size=28, n_clutter=0, centred_digit=True, glimpse_size=8, n_scales=1, n_glimpses=6,
               first_location="centre")
CLUTTERED60 = dict(canvas_size=60, n_clutter=4, centred_digit=False, glimpse_size=12, n_scales=3, n_glimpses=6,
                   first_location="centre")


# ------------------------------------------------------------------ pixels read

def test_pixels_read_by_hand():
    assert pixels_read("ram", MNIST28, dict(glimpse_size=8, n_scales=1, n_glimpses=6)) == {
        "sensor_values": 6 * 1 * 8 * 8, "canvas_pixels_touched": 6 * 8 * 8, "input_pixels": 784}
    # widest box 12 * 2**2 = 48 px
    assert pixels_read("ram", CLUTTERED60, {}) == {
        "sensor_values": 6 * 3 * 144, "canvas_pixels_touched": 6 * 48 * 48, "input_pixels": 3600}
    # a box wider than the canvas covers at most the canvas
    wide = dict(CLUTTERED60, n_scales=4)
    assert pixels_read("ram", wide, dict(n_scales=4))["canvas_pixels_touched"] == 6 * 3600
    assert pixels_read("draw", CLUTTERED60, dict(read_size=12, n_glimpses=8)) == {
        "sensor_values": 1152, "canvas_pixels_touched": 8 * 3600, "input_pixels": 3600}
    assert pixels_read("sat", CLUTTERED60, {}) == {
        "sensor_values": 3600, "canvas_pixels_touched": 3600, "input_pixels": 3600}
    with pytest.raises(ValueError, match="glimpse_size"):
        pixels_read("ram", CLUTTERED60, dict(glimpse_size=8))
    with pytest.raises(ValueError, match="canvas_size"):
        pixels_read("draw", MNIST28, {})
    # every family that counts from the task first checks that its model has the task's sensor
    for kind, config in (("ram-diff", dict(n_glimpses=4)), ("stn", {}), ("ram-diff", {})):
        task = CLUTTERED60 if config else MNIST28
        with pytest.raises(ValueError, match="n_glimpses|canvas_size"):
            pixels_read(kind, task, config)


# ------------------------------------------------------------------ FLOPs

def linear(n_in, n_out):
    return 2 * n_in * n_out  # FlopCounterMode: one (add)mm, bias not counted


def lstm_cell(n_in, hidden):
    return linear(n_in, 4 * hidden) + linear(hidden, 4 * hidden)  # two addmm


@pytest.mark.parametrize("core", ["rnn", "lstm"])
def test_ram_flops_by_hand(core):
    task = dict(canvas_size=28, n_clutter=0, glimpse_size=4, n_scales=2, n_glimpses=3, first_location="centre")
    config = dict(glimpse_size=4, n_scales=2, n_glimpses=3, what_size=4, where_size=5, hidden_size=6, core=core)
    torch.manual_seed(0)
    model = build_model("ram", config)
    h = 6
    core_flops = linear(h, h) + linear(h, h) if core == "rnn" else lstm_cell(h, h)
    step = (linear(2 * 4 * 4, 4) + linear(2, 5) + linear(4, h) + linear(5, h)  # glimpse network
            + core_flops + linear(h, 2) + linear(h, 1) + linear(h, 10))  # location mean, baseline, classifier
    recurrent = linear(h, h) if core == "rnn" else linear(h, 4 * h)  # skipped from rest (h_0 = 0): glimpse 1
    assert flops_per_image("ram", model, task, batch=4) == 3 * step - recurrent
    assert flops_per_image("ram", model, task, batch=2) == 3 * step - recurrent  # per image, whatever the batch
    assert set(flop_breakdown("ram", model, task, batch=2)) == {"addmm"}  # bias-free terms ride in addmm; the sensor counts 0


def test_draw_flops_by_hand():
    task = dict(canvas_size=28, n_clutter=0)
    model = build_model("draw", dict(canvas_size=28, read_size=3, n_glimpses=2, hidden_size=4))
    n, size, h = 3, 28, 4
    read = 2 * n * size * size + 2 * n * n * size  # (F_Y @ image) then (@ F_X^T), two bmm
    step = linear(h, 5) + read + lstm_cell(n * n, h)
    assert flops_per_image("draw", model, task, batch=3) == 2 * step + linear(h, 10)
    assert flop_breakdown("draw", model, task, batch=3)["bmm"] == 2 * read


def test_sat_flops_by_hand():
    task = dict(canvas_size=28, n_clutter=0)
    model = build_model("sat", dict(canvas_size=28, n_glimpses=2, channels=(2, 3, 4), attention_size=5,
                                    hidden_size=6))
    conv = 2 * (1 * 25 * 2 * 14 * 14 + 2 * 9 * 3 * 14 * 14 + 3 * 9 * 4 * 7 * 7)  # 28 -> 14 -> 14 -> 7 -> 3
    cells, d, a, h = 9, 4, 5, 6
    once = 2 * linear(d, h) + cells * linear(d, a)  # init_h, init_c, W_a on every cell
    step = linear(h, a) + cells * linear(a, 1) + linear(h, 1) + 2 * cells * d + lstm_cell(d, h)
    assert flops_per_image("sat", model, task, batch=2) == conv + once + 2 * step + linear(h, 10)


# ------------------------------------------------------------------ gradient statistics

def test_gradient_statistics_of_gaussian_noise():
    mu, sigma, d, n = torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0]), 0.5, 5, 2000
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn(n, d, generator=generator)
    grads = gradient_estimates(lambda i: mu + sigma * noise[i], range(n))
    assert grads.shape == (n, d) and grads.dtype == torch.float64
    torch.testing.assert_close(grads.mean(0), mu.double(), atol=0.05, rtol=0)
    trace, signal = trace_and_signal(grads)
    assert trace == pytest.approx(d * sigma**2, rel=0.1) and signal == pytest.approx(float(mu.pow(2).sum()), rel=0.05)
    assert relative_variance(grads) == pytest.approx(trace / signal)
    with pytest.raises(ValueError):
        gradient_estimates(lambda i: mu, range(1))
    with pytest.raises(ValueError):
        gradient_estimates(lambda i: mu, range(0))


def test_gradient_statistics_of_a_reinforce_toy_with_known_variance():
    """Policy N(m, s^2 I) in 2-D at m = 0 (the RAM location policy's log-density), reward r = x_0.
    Per sample the estimator of grad_m E[r] = (1, 0) is r (x - m) / s^2 = (x_0^2, x_0 x_1) / s^2,
    with variances E[x_0^4]/s^4 - 1 = 2 and E[x_0^2 x_1^2]/s^4 = 1: total 3, and 3 / B for a
    minibatch mean of B samples."""
    s, batch, n = 0.7, 8, 3000
    mean = torch.zeros(2, requires_grad=True)
    std = torch.full((batch, 2), s)

    def grad_fn(i):
        generator = torch.Generator().manual_seed(i)
        means = mean.expand(batch, 2)
        x = LocationPolicy.sample(means, std, generator)
        surrogate = (LocationPolicy.log_prob(means, std, x) * x[:, 0]).mean()
        return torch.autograd.grad(surrogate, mean)[0]

    grads = gradient_estimates(grad_fn, range(n))
    torch.testing.assert_close(grads.mean(0), torch.tensor([1.0, 0.0], dtype=torch.float64), atol=0.05, rtol=0)
    torch.testing.assert_close(grads.var(0), torch.tensor([2.0, 1.0], dtype=torch.float64) / batch,
                               rtol=0.15, atol=0)
    assert trace_and_signal(grads)[0] == pytest.approx(3.0 / batch, rel=0.12)


# ------------------------------------------------------------------ real models

def test_ram_and_draw_attention_gradient_variance_can_be_measured(bundled):
    torch.manual_seed(0)
    ram = build_model("ram", {})
    env = gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=16, vectorization_mode="vector_entry_point",
                       data_dir="bundled")
    head = ram.location_policy.mean
    head.weight.requires_grad_(False)  # a frozen flag must come back as it was
    grads = gradient_estimates(reinforce_gradient_fn("ram", ram, env), range(5))
    assert grads.shape == (5, head.weight.numel() + head.bias.numel())
    assert math.isfinite(trace_and_signal(grads)[0]) and trace_and_signal(grads)[0] > 0
    assert not head.weight.requires_grad and head.bias.requires_grad
    assert all(p.grad is None for p in ram.parameters())
    # the same seed is the same minibatch and the same noise
    torch.testing.assert_close(reinforce_attention_gradient("ram", ram, env, 3), reinforce_attention_gradient("ram", ram, env, 3))

    # K sampled trajectories of each of 8 images, leave-one-out baseline: the same parameters,
    # seeded, and another estimate than the learned baseline's on the same number of episodes
    loo = reinforce_attention_gradient("ram", ram, env, 3, samples=2)
    engine = env.unwrapped.engine
    assert torch.equal(engine.canvases[0::2], engine.canvases[1::2])  # each image played twice on one canvas
    assert loo.shape == grads.shape[1:] and torch.isfinite(loo).all()
    torch.testing.assert_close(loo, reinforce_attention_gradient("ram", ram, env, 3, samples=2))
    assert not torch.equal(loo, reinforce_attention_gradient("ram", ram, env, 3))
    with pytest.raises(ValueError, match="cannot hold 3 samples"):
        reinforce_attention_gradient("ram", ram, env, 3, samples=3)

    draw = build_model("draw", {})
    draw_grads = gradient_estimates(soft_gradient_fn(draw, "draw", CLUTTERED60, bundled.train, 16), range(5))
    assert draw_grads.shape == (5, sum(p.numel() for p in attention_parameters(draw, "draw").values()))
    assert math.isfinite(trace_and_signal(draw_grads)[0]) and trace_and_signal(draw_grads)[0] > 0
    assert all(p.grad is None for p in draw.parameters())


def test_a_soft_model_reading_two_digits_is_measured_on_two_digit_canvases(bundled):
    """The soft gradient is the one training takes: on the task's canvases, one cross-entropy term per digit."""
    two_digits = {**CLUTTERED60, "canvas_size": 100, "n_clutter": 8, "n_digits": 2}
    images, labels = soft_minibatch(two_digits, bundled.train, 4, seed=0)
    assert images.shape == (4, 1, 100, 100) and labels.shape == (4, 2)
    torch.manual_seed(0)
    sat = build_model("sat", {"canvas_size": 100, "n_digits": 2, "n_glimpses": 6})
    grad = soft_gradient_fn(sat, "sat", two_digits, bundled.train, 4)(0)
    assert grad.shape == (sum(p.numel() for p in attention_parameters(sat, "sat").values()),)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0


def test_the_reparameterised_retina_is_measured_with_the_noise_it_trains_with(bundled):
    """The differentiable retina's two variants share weights and differ only in how the location
    learns; the reparameterised one's measured gradient goes through sampled locations (seeded, so
    repeatable), the deterministic one's through the policy mean."""
    torch.manual_seed(0)
    sampled = build_model("ram-diff", {"location_gradient": "reparameterised", "location_std": 0.25})
    mean_only = build_model("ram-diff", {"location_gradient": "deterministic", "location_std": 0.25})
    mean_only.load_state_dict(sampled.state_dict())
    measure = lambda model: soft_gradient_fn(model, "ram-diff", CLUTTERED60, bundled.train, 8)
    reparameterised, deterministic = measure(sampled)(0), measure(mean_only)(0)
    assert reparameterised.shape == deterministic.shape and torch.isfinite(reparameterised).all()
    assert not torch.allclose(reparameterised, deterministic)  # the sampled locations moved the glimpses
    torch.testing.assert_close(reparameterised, measure(sampled)(0))  # the same seed, the same noise
    assert not torch.equal(reparameterised, measure(sampled)(1))
    assert all(p.grad is None for p in sampled.parameters())


def test_the_trace_interval_covers_the_truth_on_both_sides():
    """200 estimates of a 500-dimensional gradient (RAM's mean head has 514 weights), true trace 500:
    the 90 % intervals hold it about 90 % of the time (36 of these 40), and miss it on both sides.
    Unscaled, each resample's variance centres (n - 1) / n below the estimate, and the intervals
    held it in 23 of the 40, missing only from below."""
    d, n = 500, 200
    generator = torch.Generator().manual_seed(0)
    below = above = 0
    for rep in range(40):
        low, high = trace_interval(torch.randn(n, d, generator=generator).double(), n_bootstrap=200, seed=rep)
        below, above = below + (high < d), above + (low > d)
    assert below + above <= 10 and below <= 7


def test_the_relative_variance_interval_covers_the_truth_where_noise_swamps_the_mean():
    """200 estimates of a 50-dimensional gradient whose noise (trace 50) is ~140 times its squared
    mean: the 90 % intervals hold the true ratio about 90 % of the time (centred on the plug-in
    ||mean||^2 they would sit below it), and with no mean at all the upper end is unbounded."""
    d, n, m = 50, 200, 0.0837
    truth = d / (d * m * m)
    generator = torch.Generator().manual_seed(0)
    covered = 0
    for rep in range(40):
        grads = (m + torch.randn(n, d, generator=generator)).double()
        low, high = relative_variance_interval(grads, n_bootstrap=200, seed=rep)
        covered += low <= truth <= high
    assert covered >= 30
    assert relative_variance_interval(torch.randn(n, d, generator=generator).double())[1] == math.inf


@pytest.mark.parametrize("arch", [f.name for f in list_families() if f.has_attention])
def test_each_family_is_measured_by_the_gradient_its_learner_trains_with(arch, bundled):
    """The report asks the learner that trains a family (not the family) which gradient moves its
    attention: REINFORCE with the run's baseline through the env for the hard learner,
    backpropagation through the training forward for the backprop learner. (The learned baseline:
    an untrained model reads an image's K trajectories alike, so a leave-one-out estimate there is
    often exactly zero.)"""
    family = get_family(arch)
    config = resolve_config({"arch": arch, "preset": "cluttered60", "reinforce_samples": 1})
    task = config.task()
    torch.manual_seed(0)
    model = family.build(family.model_config(config))
    grad_fn, estimator = learner_class(family).attention_gradient(arch, model, config.to_dict(), task,
                                                                   bundled.train, 8, 5, "bundled")
    grad = grad_fn(0)
    assert grad.shape == (sum(p.numel() for p in attention_parameters(model, arch).values()),)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0
    assert all(p.grad is None for p in model.parameters())
    if family.mode == "hard":
        assert estimator == "REINFORCE + learned baseline"
        four = learner_class(family).attention_gradient(arch, model, {**config.to_dict(), "reinforce_samples": 4},
                                                        task, bundled.train, 2, 5, "bundled")[1]
        assert four == "REINFORCE + leave-one-out baseline, K = 4"  # the run's own baseline
        env = ClutteredMNISTVectorEnv(8, **{**task, "split": "train", "data_dir": "bundled"})
        torch.testing.assert_close(grad, reinforce_attention_gradient(arch, model, env, 5))
    else:
        assert "REINFORCE" not in estimator
        torch.testing.assert_close(grad, soft_gradient_fn(model, arch, task, bundled.train, 8, 5)(0))


def test_the_measured_reinforce_gradient_credits_the_run_s_reward(bundled):
    """With two digits, ``--reinforce-reward digits`` credits each location with its digits'
    reward-to-go: the learner's measured gradient is that one, another than the sequence reward's
    on the same minibatch."""
    config = resolve_config({"arch": "ram", "preset": "multi100", "reinforce_samples": 1})
    family, task = config.family, config.task()
    torch.manual_seed(0)
    model = family.build(family.model_config(config))

    def measured(reward: str) -> torch.Tensor:
        train_config = {**config.to_dict(), "reinforce_reward": reward}
        return learner_class(family).attention_gradient("ram", model, train_config, task, bundled.train, 32, 5,
                                                        "bundled")[0](0)

    digits = measured("digits")
    assert not torch.allclose(digits, measured("sequence"))
    env = ClutteredMNISTVectorEnv(32, **{**task, "split": "train", "data_dir": "bundled"})
    torch.testing.assert_close(digits, reinforce_attention_gradient("ram", model, env, 5, reward="digits"))


def test_the_retina_s_two_estimators_estimate_one_gradient(bundled):
    """The reparameterised gradient and REINFORCE's score function (leave-one-out over K) are
    unbiased for the same gradient of the same policy: their means agree within their noise."""
    torch.manual_seed(0)
    model = build_model("ram-diff", {"location_gradient": "reparameterised", "location_std": 0.25, "where_gradient": True})
    head = model.location_policy.mean
    result = location_estimator_noise(model, "ram-diff", CLUTTERED60, bundled.train, samples=4, n_batches=30,
                                      batch_size=4)
    assert result["reparameterised"]["agreement"] < 4  # about 1; a bias would grow it with the minibatches
    for name in ("reparameterised", "reparameterised, as trained", "score function"):
        assert result[name]["trace"] > 0 and result[name]["trace_interval"][0] <= result[name]["trace"]
    assert all(p.grad is None for p in model.parameters()) and head.weight.requires_grad

    images, labels = soft_minibatch(CLUTTERED60, bundled.train, 2, seed=0)
    twice = (images.repeat_interleave(3, 0), labels.repeat_interleave(3, 0))
    grads = location_estimator_gradients(model, "ram-diff", *twice, noise_seed=7, samples=3)
    assert {g.shape for g in grads.values()} == {(head.weight.numel() + 2,)}
    assert all(g.abs().sum() > 0 for g in grads.values())
    again = location_estimator_gradients(model, "ram-diff", *twice, noise_seed=7, samples=3)
    assert all(torch.equal(grads[name], again[name]) for name in grads)  # seeded draws
    with pytest.raises(ValueError, match=">= 2 samples"):
        location_estimator_gradients(model, "ram-diff", images, labels, 0, samples=1)
    with pytest.raises(ValueError, match="draws no reparameterised locations"):
        location_estimator_gradients(build_model("ram-diff", {"location_gradient": "deterministic"}), "ram-diff",
                                     images, labels, 0, samples=2)


def test_the_retina_s_estimators_take_the_exact_gradient_of_a_damped_model(bundled):
    """Damping (--attention-into-core) changes only the backward pass; the comparison takes the
    undamped one, the gradient REINFORCE estimates, and leaves the model's config as it was."""
    torch.manual_seed(0)
    damped = build_model("ram-diff", {"location_gradient": "reparameterised", "attention_into_core": 0.1,
                                      "where_gradient": True})
    undamped = build_model("ram-diff", {"location_gradient": "reparameterised", "attention_into_core": 1.0,
                                        "where_gradient": True})
    undamped.load_state_dict(damped.state_dict())
    images, labels = soft_minibatch(CLUTTERED60, bundled.train, 2, seed=0)
    args = (images.repeat_interleave(2, 0), labels.repeat_interleave(2, 0), 3, 2)
    exact = location_estimator_gradients(damped, "ram-diff", *args)
    undamped_grads = location_estimator_gradients(undamped, "ram-diff", *args)
    for name in ("reparameterised", "score function"):
        torch.testing.assert_close(exact[name], undamped_grads[name])
    assert not torch.allclose(exact["reparameterised, as trained"], exact["reparameterised"])  # damped: another gradient
    torch.testing.assert_close(undamped_grads["reparameterised, as trained"], undamped_grads["reparameterised"])
    assert damped.config.attention_into_core == 0.1


def test_the_estimator_control_script_measures_the_report_s_retina(capsys):
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("estimator_control", root / "scripts" / "estimator_control.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    record = str(root / "reports" / "converged" / "records" / "ram-diff-converged-seed0.pt")
    assert script.main(["--checkpoint", record, "--batches", "3", "--batch-size", "2", "--data-dir", "bundled"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("| trained", "| initialisation"))]
    assert [row.split(" | ")[2] for row in rows] == ["reparameterised, exact", "reparameterised, as trained",
                                                     "score function, leave-one-out"] * 2
    assert [row.split(" | ")[0] for row in rows] == ["| initialisation"] * 3 + ["| trained"] * 3
    for row in rows:  # each estimator's variance over the score function's, which is 1 against itself
        cells = row.strip("| ").split(" | ")
        assert float(cells[5]) == pytest.approx(float(cells[3]) / float(rows_score(rows, cells[0])), rel=1e-2)


def rows_score(rows: list[str], weights: str) -> str:
    """The score function's total variance in the rows of ``weights``."""
    return next(r.strip("| ").split(" | ")[3] for r in rows if r.startswith(f"| {weights} |") and "score function" in r)


def test_the_estimator_noise_measures_the_reward_its_run_trained_with(bundled):
    """The report's REINFORCE estimator noise of a run trained with ``--reinforce-reward digits``
    is that estimator's, not the sequence reward's."""
    from types import SimpleNamespace

    from glimpse.gradient_noise import reinforce_estimator_noise
    from glimpse.report.measurements import estimator_variance

    config = resolve_config({"arch": "ram", "preset": "multi100", "reinforce_samples": 1})
    task = config.task()
    torch.manual_seed(0)
    model = config.family.build(config.family.model_config(config))
    measure = dict(n_batches=3, batch_size=8, data_dir="bundled", seed=7, n_bootstrap=10)
    digits = reinforce_estimator_noise("ram", model, task, 1, reward="digits", **measure)
    sequence = reinforce_estimator_noise("ram", model, task, 1, **measure)
    env = ClutteredMNISTVectorEnv(8, **{**task, "split": "train", "data_dir": "bundled"})
    expected = trace_and_signal(gradient_estimates(reinforce_gradient_fn("ram", model, env, 7, 1, "digits"), range(3)))[0]
    assert digits["trace"] == pytest.approx(expected) and digits["trace"] != pytest.approx(sequence["trace"])
    run = {"kind": "ram", "task": task, "train_config": {**config.to_dict(), "reinforce_reward": "digits"}}
    seed_runs = SimpleNamespace(runs=[run], model=lambda seed: model)
    reported = estimator_variance(seed_runs, 1, 3, 8, "bundled", seed=7)
    assert reported["trace"] == pytest.approx(digits["trace"])


def test_a_run_from_before_an_option_rebuilds_its_initialisation():
    """A stored run whose config predates ``--location-std-final`` rebuilds its initial weights
    with the policy's one std, as its resume would; with the option, at its starting std."""
    from glimpse.gradient_noise import run_initialisation

    config = resolve_config({"arch": "ram", "preset": "cluttered60", "location_std": 0.25, "location_std_final": 0.1})
    run = {"kind": "ram", "model_config": config.family.model_config(config), "train_config": config.to_dict()}
    assert run_initialisation(run).location_policy.fixed_std == pytest.approx(0.25)
    old = {**run, "train_config": {k: v for k, v in run["train_config"].items() if k != "location_std_final"}}
    assert run_initialisation(old).location_policy.fixed_std == pytest.approx(run["model_config"]["location_std"])
