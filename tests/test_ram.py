"""RAM shapes and, above all, where the hybrid loss's gradients flow (Mnih et al. 2014)."""
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from glimpse.losses import hybrid_loss
from glimpse.models.ram import RAMConfig, RecurrentAttentionModel
from glimpse.models.ram.location import LocationPolicy
from glimpse.models.episodes import run_episodes

B = 16


def make_env(n=B, **kwargs):
    return gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=n, vectorization_mode="vector_entry_point",
                        data_dir="bundled", **kwargs)


def rollout(model, seed=0, sample=True):
    generator = torch.Generator().manual_seed(seed)
    return run_episodes(model, make_env(), sample=sample, generator=generator, seed=seed)


def grads_of(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward(retain_graph=True)
    return {name: (p.grad.abs().sum().item() if p.grad is not None else 0.0) for name, p in model.named_parameters()}


def group(grads, prefix):
    return sum(v for k, v in grads.items() if k.startswith(prefix))


@pytest.mark.parametrize("core", ["rnn", "lstm"])
def test_step_shapes(core):
    model = RecurrentAttentionModel(RAMConfig(core=core))
    state = model.initial_state()
    out = model(torch.rand(B, 3, 12, 12), torch.zeros(B, 2), state)
    assert out.logits.shape == (B, 10) and out.mean.shape == (B, 2) and out.std.shape == (B, 2)
    assert out.baseline.shape == (B,) and all(s.shape == (B, 256) for s in out.state)
    assert torch.all(out.mean.abs() <= 1) and torch.all(out.std > 0)
    with pytest.raises(ValueError, match="glimpse must be"):
        model(torch.rand(B, 2, 12, 12), torch.zeros(B, 2), state)


@pytest.mark.parametrize("core", ["rnn", "lstm"])
def test_core_from_rest_equals_zero_state(core):
    """The empty state skips the first recurrent product; it must act as h_0 = c_0 = 0, forward and backward."""
    torch.manual_seed(0)
    model = RecurrentAttentionModel(RAMConfig(core=core))
    assert model.initial_state() == ()
    glimpse, location = torch.rand(B, 3, 12, 12), torch.rand(B, 2) * 2 - 1
    zeros = tuple(torch.zeros(B, 256) for _ in range(2 if core == "lstm" else 1))
    outputs = []
    for state in ((), zeros):
        model.zero_grad()
        first = model(glimpse, location, state)
        second = model(glimpse, location, first.state)  # the state the rest start hands on
        (second.logits.sum() + second.mean.sum()).backward()
        outputs.append((first, second, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (first_rest, second_rest, grads_rest), (first_zero, second_zero, grads_zero) = outputs
    for a, b in ((first_rest, first_zero), (second_rest, second_zero)):
        torch.testing.assert_close(a.logits, b.logits)
        for x, y in zip(a.state, b.state, strict=True):
            torch.testing.assert_close(x, y)
    assert grads_rest.keys() == grads_zero.keys()
    for name in grads_rest:
        torch.testing.assert_close(grads_rest[name], grads_zero[name], msg=name)


def test_rollout_shapes():
    torch.manual_seed(0)
    r = rollout(RecurrentAttentionModel(RAMConfig()))
    assert r.logits.shape == (B, 10) and r.reward.shape == (B,) and r.labels.shape == (B,)
    assert r.log_probs.shape == (B, 5) and r.baselines.shape == (B, 5) and r.locations.shape == (B, 6, 2)
    np.testing.assert_array_equal(r.reward.numpy(), (r.logits.argmax(-1) == r.labels).float().numpy())


def test_sampled_locations_are_detached_and_log_prob_is_gaussian():
    mean = torch.tensor([[0.2, -0.3]], requires_grad=True)
    std = torch.full((1, 2), 0.1)
    sample = LocationPolicy.sample(mean, std, torch.Generator().manual_seed(0))
    assert not sample.requires_grad
    log_prob = LocationPolicy.log_prob(mean, std, sample)
    expected = torch.distributions.Normal(mean, std).log_prob(sample).sum(-1)
    torch.testing.assert_close(log_prob, expected)
    log_prob.sum().backward()
    # d/dmean log N(l; mean, std) = (l - mean) / std^2: the gradient goes through the mean only
    torch.testing.assert_close(mean.grad, (sample - mean.detach()) / std**2)


def test_classification_loss_never_reaches_the_location_network_or_baseline():
    torch.manual_seed(0)
    model = RecurrentAttentionModel(RAMConfig())
    r = rollout(model)
    loss = hybrid_loss(r.logits, r.labels, r.reward, r.log_probs, r.baselines)
    g = grads_of(model, loss.classification)
    assert group(g, "classifier") > 0 and group(g, "core") > 0 and group(g, "glimpse_network") > 0
    assert group(g, "location_policy") == 0, "locations are actions: CE must not train the policy"
    assert group(g, "baseline") == 0


def test_reinforce_trains_the_location_network_and_not_the_baseline():
    torch.manual_seed(0)
    model = RecurrentAttentionModel(RAMConfig())
    r = rollout(model)
    reward = torch.zeros(B)
    reward[: B // 2] = 1.0  # make sure the advantage is not zero everywhere
    loss = hybrid_loss(r.logits, r.labels, reward, r.log_probs, r.baselines)
    g = grads_of(model, loss.reinforce)
    assert group(g, "location_policy.mean") > 0, "the location network must get the REINFORCE gradient"
    assert group(g, "baseline") == 0, "the baseline in the advantage must be detached"
    assert group(g, "classifier") == 0
    # the paper's theta: the policy gradient also reaches the core and the glimpse network
    assert group(g, "core") > 0 and group(g, "glimpse_network") > 0


def test_reinforce_into_core_0_stops_reinforce_at_the_location_network():
    torch.manual_seed(0)
    model = RecurrentAttentionModel(RAMConfig(reinforce_into_core=0.0))
    r = rollout(model)
    loss = hybrid_loss(r.logits, r.labels, torch.ones(B), r.log_probs, r.baselines)
    g = grads_of(model, loss.reinforce)
    assert group(g, "location_policy.mean") > 0
    assert group(g, "core") == 0 and group(g, "glimpse_network") == 0


def test_reinforce_into_core_scales_exactly_the_gradient_that_leaves_the_location_network():
    def reinforce_grads(scale):
        torch.manual_seed(0)
        model = RecurrentAttentionModel(RAMConfig(reinforce_into_core=scale))
        r = rollout(model)
        reward = (torch.arange(B) % 2).float()
        loss = hybrid_loss(r.logits, r.labels, reward, r.log_probs, r.baselines)
        model.zero_grad(set_to_none=True)
        loss.reinforce.backward()
        return r, {name: p.grad for name, p in model.named_parameters() if p.grad is not None}

    r_full, full = reinforce_grads(1.0)
    r_tenth, tenth = reinforce_grads(0.1)
    # the same episodes: the setting changes no forward value
    torch.testing.assert_close(r_tenth.locations, r_full.locations, rtol=0, atol=0)
    torch.testing.assert_close(r_tenth.logits, r_full.logits, rtol=0, atol=0)
    assert set(tenth) == set(full)
    for name, grad in full.items():
        if name.startswith("location_policy"):  # the location network keeps its whole gradient
            torch.testing.assert_close(tenth[name], grad)
        else:
            assert name.startswith(("core", "glimpse_network")), name
            assert grad.abs().sum() > 0
            torch.testing.assert_close(tenth[name], 0.1 * grad, rtol=1e-4, atol=1e-7)


def test_reinforce_into_core_is_validated_and_old_configs_still_load():
    with pytest.raises(ValueError, match="reinforce_into_core"):
        RAMConfig(reinforce_into_core=1.5)
    # checkpoints written before the option recorded a bool
    assert RAMConfig(detach_policy_input=True).reinforce_into_core == 0.0
    assert RAMConfig(detach_policy_input=False).reinforce_into_core == 1.0
    assert "detach_policy_input" not in RAMConfig(detach_policy_input=True).to_dict()


def test_baseline_loss_trains_only_the_baseline():
    torch.manual_seed(0)
    model = RecurrentAttentionModel(RAMConfig())
    r = rollout(model)
    loss = hybrid_loss(r.logits, r.labels, r.reward, r.log_probs, r.baselines)
    g = grads_of(model, loss.baseline)
    assert group(g, "baseline") > 0
    assert sum(v for k, v in g.items() if not k.startswith("baseline")) == 0


def test_reinforce_value_matches_the_estimator():
    log_probs = torch.tensor([[-1.0, -2.0], [-0.5, -0.5]], requires_grad=True)
    baselines = torch.tensor([[0.2, 0.4], [0.6, 0.8]], requires_grad=True)
    reward = torch.tensor([1.0, 0.0])
    logits = torch.zeros(2, 10, requires_grad=True)
    out = hybrid_loss(logits, torch.tensor([1, 2]), reward, log_probs, baselines)
    expected = -((-1.0 * 0.8 + -2.0 * 0.6) + (-0.5 * -0.6 + -0.5 * -0.8)) / 2
    assert math.isclose(out.reinforce.item(), expected, rel_tol=1e-6)
    assert math.isclose(out.baseline.item(), ((0.8**2 + 0.6**2) + (0.6**2 + 0.8**2)) / 4, rel_tol=1e-6)
    assert math.isclose(out.classification.item(), math.log(10), rel_tol=1e-6)


def test_deterministic_rollout_follows_the_mean():
    torch.manual_seed(0)
    model = RecurrentAttentionModel(RAMConfig())
    with torch.no_grad():  # the same canvases (seed 1), the policy's generator seeded apart: no draw is used
        a = run_episodes(model, make_env(), sample=False, generator=torch.Generator().manual_seed(1), seed=1)
        b = run_episodes(model, make_env(), sample=False, generator=torch.Generator().manual_seed(2), seed=1)
        sampled = run_episodes(model, make_env(), sample=True, generator=torch.Generator().manual_seed(2), seed=1)
    torch.testing.assert_close(a.locations, b.locations)
    torch.testing.assert_close(a.logits, b.logits)
    assert not torch.equal(a.locations, sampled.locations)  # the test can tell a sample from the mean


def test_single_glimpse_has_no_policy_terms():
    torch.manual_seed(0)
    model = RecurrentAttentionModel(RAMConfig(n_glimpses=1))
    r = run_episodes(model, make_env(n_glimpses=1), sample=True, generator=torch.Generator().manual_seed(0), seed=0)
    loss = hybrid_loss(r.logits, r.labels, r.reward, r.log_probs, r.baselines)
    assert r.log_probs.shape == (B, 0)
    assert torch.isfinite(loss.total) and loss.reinforce.item() == 0 and loss.baseline.item() == 0


def test_random_first_glimpses_are_seeded_once_for_the_whole_evaluation_set(bundled):
    """A model trained with --first-location random is scored the same at any batch size, and
    evaluate.py's --seed moves where its first glimpses fall."""
    from envs.engine import fixed_canvas_set
    from glimpse.inference import predict_probabilities
    from glimpse.training.config import resolve_config

    task = resolve_config({"first_location": "random"}).task()
    canvases = fixed_canvas_set(bundled.test.images[:60], bundled.test.labels[:60], task["canvas_size"],
                                task["n_clutter"], task["centred_digit"], seed=0)
    torch.manual_seed(0)
    model = RecurrentAttentionModel(RAMConfig(glimpse_size=task["glimpse_size"], n_scales=task["n_scales"],
                                              n_glimpses=task["n_glimpses"]))
    whole = predict_probabilities("ram", model, task, canvases.images, batch_size=60)
    torch.testing.assert_close(predict_probabilities("ram", model, task, canvases.images, batch_size=7), whole)
    assert not torch.allclose(predict_probabilities("ram", model, task, canvases.images, batch_size=60, seed=1), whole)


@pytest.mark.parametrize("first_location", ["centre", "random"])
def test_sampled_trajectories_do_not_depend_on_the_batch_size(bundled, first_location):
    """evaluate.py --samples M: trajectory k draws all its noise for the whole set from seed + k."""
    from envs.engine import fixed_canvas_set
    from glimpse.inference import predict_probabilities
    from glimpse.training.config import resolve_config

    task = resolve_config({"first_location": first_location}).task()
    canvases = fixed_canvas_set(bundled.test.images[:50], bundled.test.labels[:50], task["canvas_size"],
                                task["n_clutter"], task["centred_digit"], seed=0)
    torch.manual_seed(0)
    model = RecurrentAttentionModel(RAMConfig(glimpse_size=task["glimpse_size"], n_scales=task["n_scales"],
                                              n_glimpses=task["n_glimpses"], location_std=0.3))

    def score(batch_size, seed=0):
        return predict_probabilities("ram", model, task, canvases.images, batch_size, n_samples=3, seed=seed)

    whole = score(50)
    torch.testing.assert_close(score(8), whole)
    assert not torch.allclose(score(50, seed=1), whole)
    deterministic = predict_probabilities("ram", model, task, canvases.images, 50)
    assert not torch.allclose(whole, deterministic)  # the samples really are sampled


def test_random_glimpse_baseline_scores_do_not_depend_on_the_batch_size(bundled):
    """Its deterministic evaluation draws the random locations once for the whole set, from --seed."""
    from envs.engine import fixed_canvas_set
    from glimpse.inference import predict_probabilities
    from glimpse.training.config import resolve_config

    task = resolve_config({}).task()
    canvases = fixed_canvas_set(bundled.test.images[:50], bundled.test.labels[:50], task["canvas_size"],
                                task["n_clutter"], task["centred_digit"], seed=0)
    torch.manual_seed(0)
    model = RecurrentAttentionModel(RAMConfig(glimpse_size=task["glimpse_size"], n_scales=task["n_scales"],
                                              n_glimpses=task["n_glimpses"], policy="random"))
    whole = predict_probabilities("ram", model, task, canvases.images, 50)
    torch.testing.assert_close(predict_probabilities("ram", model, task, canvases.images, 10), whole)
    assert not torch.allclose(predict_probabilities("ram", model, task, canvases.images, 50, seed=1), whole)


def test_conv_glimpse_network_shapes_gradients_and_its_clear_error():
    from glimpse.models.ram.glimpse_network import ConvWhat, GlimpseNetwork

    torch.manual_seed(0)
    network = GlimpseNetwork(3, 12, 128, 128, 256, what="conv")
    assert isinstance(network.what, ConvWhat)
    glimpse = torch.rand(B, 3, 12, 12, requires_grad=True)
    g = network(glimpse, torch.zeros(B, 2))
    assert g.shape == (B, 256) and (g >= 0).all()
    g.sum().backward()
    assert network.what[0].weight.grad.abs().sum() > 0 and glimpse.grad.abs().sum() > 0
    model = RecurrentAttentionModel(RAMConfig(glimpse_net="conv"))
    out = model(torch.rand(B, 3, 12, 12), torch.zeros(B, 2), model.initial_state())
    assert out.logits.shape == (B, 10) and out.mean.shape == (B, 2)
    with pytest.raises(ValueError, match="divisible by 4"):
        RAMConfig(glimpse_net="conv", glimpse_size=6)
    with pytest.raises(ValueError, match="glimpse_net"):
        RAMConfig(glimpse_net="resnet")


def test_the_conv_what_pathway_computes_the_plain_layout_network():
    """Pool-then-ReLU in channels-last equals the textbook ReLU-then-pool in the plain layout,
    values and gradients, and its state dict loads into the plain network (same names)."""
    from torch import nn
    from glimpse.models.ram.glimpse_network import ConvWhat

    torch.manual_seed(0)
    fast = ConvWhat(3, 12, 128)
    assert fast[0].weight.is_contiguous(memory_format=torch.channels_last)
    plain = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 3 * 3, 128))
    plain.load_state_dict(fast.state_dict())  # checkpoints of the earlier ReLU-then-pool order load
    glimpse = torch.rand(B, 3, 12, 12)
    torch.testing.assert_close(fast(glimpse), plain(glimpse))
    fast(glimpse).square().sum().backward()
    plain(glimpse).square().sum().backward()
    torch.testing.assert_close(fast[0].weight.grad, plain[0].weight.grad)
    torch.testing.assert_close(fast[3].weight.grad, plain[3].weight.grad)


def test_the_linear_glimpse_network_keeps_the_paper_s_parameter_names():
    model = RecurrentAttentionModel(RAMConfig())
    names = {name for name, _ in model.glimpse_network.named_parameters()}
    assert {"what.weight", "what.bias", "where.weight", "what_out.weight", "where_out.weight"} <= names


def test_the_log_probability_is_of_the_sample_before_the_env_clips_it():
    """A draw twenty standard deviations out lands beyond [-1, 1]: the env reads the clipped location,
    and REINFORCE the Gaussian's log-density of the draw itself (clipping first would bias it)."""
    torch.manual_seed(0)
    model = RecurrentAttentionModel(RAMConfig())
    env = make_env()
    with torch.no_grad():
        out = run_episodes(model, env, sample=True, noise=lambda mean: torch.full_like(mean, 20.0), seed=1)
    std = model.config.location_std
    per_axis = -0.5 * 20.0**2 - math.log(std) - 0.5 * math.log(2 * math.pi)
    torch.testing.assert_close(out.log_probs, torch.full_like(out.log_probs, 2 * per_axis))
    looked = env.unwrapped.engine.path()
    assert looked.abs().max() <= 1 and bool((looked[:, 1:] == 1).any())  # clipped at the edge
