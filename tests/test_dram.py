"""DRAM (Ba et al. 2015): shapes, and which parameters each term of the hybrid loss reaches."""
import gymnasium as gym
import pytest
import torch

from glimpse.checkpoint import load_checkpoint
from glimpse.commands import train
from glimpse.losses import hybrid_loss
from glimpse.models import get_family
from glimpse.models.dram import DeepRecurrentAttentionModel, DRAMConfig
from glimpse.training.config import resolve_config

B = 16
FAST = ["--data-dir", "bundled", "--threads", "1", "--device", "cpu", "--eval-batch-size", "1000", "--image-every", "0",
        "--mode", "hard", "--arch", "dram"]
LOWER = ("glimpse_network.", "lower.")  # what classification trains besides the classifier
UPPER = ("upper.", "location_policy.", "context_network.")  # what only REINFORCE trains


def episodes(model, context_size=0, seed=0, n_digits=1):
    family = get_family("dram")
    env = gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=B, vectorization_mode="vector_entry_point",
                       data_dir="bundled", context_size=context_size, n_digits=n_digits).unwrapped
    return family.episodes(model, env, sample=True, generator=torch.Generator().manual_seed(seed), seed=seed)


def grads_of(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward(retain_graph=True)
    return {name: (p.grad.abs().sum().item() if p.grad is not None else 0.0) for name, p in model.named_parameters()}


def reached(grads, prefixes):
    return sum(v for k, v in grads.items() if k.startswith(prefixes))


def test_step_shapes_state_and_the_context_view():
    model = DeepRecurrentAttentionModel(DRAMConfig(n_scales=3, context_size=20))
    with pytest.raises(ValueError, match="reads a context view"):
        model(torch.rand(B, 3, 12, 12), torch.zeros(B, 2), model.initial_state())
    out = model(torch.rand(B, 3, 12, 12), torch.zeros(B, 2), model.initial_state(), context=torch.rand(B, 20, 20))
    assert out.logits.shape == (B, 10) and out.mean.shape == out.std.shape == (B, 2) and out.baseline.shape == (B,)
    (h1, c1), (h2, c2) = out.state  # the lower and the upper layer
    assert all(t.shape == (B, 256) for t in (h1, c1, h2, c2))
    again = model(torch.rand(B, 3, 12, 12), out.mean, out.state)
    assert again.logits.shape == (B, 10)
    with pytest.raises(ValueError, match="context is read by the first step"):
        model(torch.rand(B, 3, 12, 12), out.mean, out.state, context=torch.rand(B, 20, 20))
    with pytest.raises(ValueError, match="glimpse must be"):
        model(torch.rand(B, 2, 12, 12), torch.zeros(B, 2), out.state)
    with pytest.raises(ValueError, match="divisible by 4"):
        DRAMConfig(glimpse_size=10)


def test_the_context_sets_only_the_upper_layer_s_first_state():
    torch.manual_seed(0)
    model = DeepRecurrentAttentionModel(DRAMConfig(n_scales=3, context_size=20))
    torch.nn.init.normal_(model.context_network.to_state.weight)  # a trained context, not the zero start
    glimpse, location = torch.rand(B, 3, 12, 12), torch.zeros(B, 2)
    a = model(glimpse, location, (), context=torch.rand(B, 20, 20))
    b = model(glimpse, location, (), context=torch.rand(B, 20, 20))
    torch.testing.assert_close(a.logits, b.logits)  # the lower layer never sees the context
    assert not torch.allclose(a.mean, b.mean)  # the upper one does, and with it where to look next


def test_rollout_shapes_and_several_digits():
    torch.manual_seed(0)
    r = episodes(DeepRecurrentAttentionModel(DRAMConfig(n_scales=3)))
    assert r.logits.shape == (B, 10) and r.log_probs.shape == r.baselines.shape == (B, 5)
    assert r.locations.shape == (B, 6, 2)
    two = episodes(DeepRecurrentAttentionModel(DRAMConfig(n_scales=3)), n_digits=2)
    assert two.logits.shape == (B, 2, 10) and two.labels.shape == (B, 2) and two.locations.shape == (B, 12, 2)


@pytest.mark.parametrize("into_core", [0.0, 0.1])
def test_where_each_term_of_the_hybrid_loss_reaches(into_core):
    """Classification trains the glimpse network, the lower layer and the classifier, never the
    upper layer, the emission network, the context or the baseline; REINFORCE trains the upper
    layer, the emission network and the context, and the lower layer only as far as
    reinforce_into_core lets it; the baseline's squared error trains only the baseline."""
    torch.manual_seed(0)
    model = DeepRecurrentAttentionModel(DRAMConfig(n_scales=3, context_size=20, reinforce_into_core=into_core))
    torch.nn.init.normal_(model.context_network.to_state.weight, std=0.01)  # off its zero start
    r = episodes(model, context_size=20)
    parts = hybrid_loss(r.logits, r.labels, r.reward, r.log_probs, r.baselines)

    classification = grads_of(model, parts.classification)
    assert reached(classification, LOWER) > 0 and reached(classification, ("classifier.",)) > 0
    assert reached(classification, UPPER + ("baseline.",)) == 0

    reinforce = grads_of(model, parts.reinforce)
    for prefix in UPPER:
        assert reached(reinforce, (prefix,)) > 0, prefix
    assert reached(reinforce, ("classifier.", "baseline.")) == 0
    assert (reached(reinforce, LOWER) > 0) == (into_core > 0)

    baseline = grads_of(model, parts.baseline)
    assert reached(baseline, ("baseline.",)) > 0
    assert sum(baseline.values()) == reached(baseline, ("baseline.",))


def test_reinforce_into_core_scales_exactly_what_reaches_the_lower_layer():
    """As for RAM: the share scales the REINFORCE gradient below the upper layer, and only there."""
    def reinforce_grads(share):
        torch.manual_seed(0)
        model = DeepRecurrentAttentionModel(DRAMConfig(n_scales=3, reinforce_into_core=share))
        r = episodes(model)
        reward = (torch.arange(B) % 2).float()
        loss = hybrid_loss(r.logits, r.labels, reward, r.log_probs, r.baselines)
        model.zero_grad(set_to_none=True)
        loss.reinforce.backward()
        return {name: p.grad for name, p in model.named_parameters() if p.grad is not None}

    full, tenth = reinforce_grads(1.0), reinforce_grads(0.1)
    assert set(tenth) == set(full) and any(name.startswith(LOWER) for name in full)
    for name, grad in full.items():
        if name.startswith(LOWER):
            assert grad.abs().sum() > 0
            torch.testing.assert_close(tenth[name], 0.1 * grad, rtol=1e-4, atol=1e-7)
        else:  # the upper layer and the emission network keep their whole gradient
            torch.testing.assert_close(tenth[name], grad)


def test_dram_is_a_hard_family_chosen_by_arch():
    family = get_family("dram")
    assert family.mode == "hard" and family.samples_trajectories and not family.default_for_mode
    assert resolve_config({"mode": "hard", "arch": "dram"}).family is family
    assert "core" not in resolve_config({"mode": "hard", "arch": "dram"}).applicable()


def test_a_dram_run_resumes_exactly(tmp_path, interrupt_at_step):
    """(Its short run that learns is tests/test_soft_training.py's, from its quick_recipe.)"""
    short = [*FAST, "--preset", "cluttered60", "--max-steps", "8", "--batch-size", "16", "--checkpoint-every", "3",
             "--val-every", "4", "--context-size", "20", "--reinforce-samples", "2", "--run-dir", str(tmp_path)]
    assert train.main([*short, "--run-name", "whole"]) == 0
    interrupt_at_step(7)
    assert train.main([*short, "--run-name", "cut"]) == 130
    interrupt_at_step(None)
    assert train.main(["--resume", str(tmp_path / "cut")]) == 0
    whole, cut = (load_checkpoint(tmp_path / name / "last.pt")["model_state"] for name in ("whole", "cut"))
    assert whole.keys() == cut.keys()
    for key in whole:
        torch.testing.assert_close(whole[key], cut[key], rtol=0, atol=0)


@pytest.mark.parametrize("combine", ["product", "sum"])
def test_how_what_and_where_meet(combine):
    """The paper's product gates "what" by "where": where the location pathway is silent, the glimpse
    vector is zero whatever was seen. The sum (RAM's glimpse network, the ablation) still passes what
    was seen. Either way the classification loss reaches both pathways."""
    torch.manual_seed(0)
    model = DeepRecurrentAttentionModel(DRAMConfig(n_scales=3, glimpse_combine=combine))
    net = model.glimpse_network
    glimpse, location = torch.rand(B, 3, 12, 12), torch.rand(B, 2) * 2 - 1
    assert net(glimpse, location).shape == (B, 256)
    with torch.no_grad():  # silence the "where" pathway
        net.where.weight.zero_()
        net.where.bias.fill_(-1.0)
    silenced = net(glimpse, location)
    assert (silenced.abs().sum() == 0) == (combine == "product")
    torch.nn.init.normal_(net.where.bias)
    model(glimpse, location, model.initial_state()).logits.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters())


def test_the_glimpse_combination_is_a_dram_option(capsys):
    config = resolve_config({"mode": "hard", "arch": "dram", "glimpse_combine": "sum"})
    assert config.family.model_config(config)["glimpse_combine"] == "sum"
    assert DRAMConfig(**{k: v for k, v in DRAMConfig().to_dict().items() if k != "glimpse_combine"}).glimpse_combine \
        == "product"  # a checkpoint written before the option rebuilds the paper's network
    with pytest.raises(ValueError, match="glimpse_combine"):
        DRAMConfig(glimpse_combine="concat")
    assert train.main([*FAST[:-4], "--mode", "hard", "--glimpse-combine", "sum", "--max-steps", "1"]) == 2  # RAM's
    assert "ram (RAM (hard, REINFORCE)) does not use --glimpse-combine (an option of dram)" in capsys.readouterr().err


def test_a_dram_with_a_context_network_starts_from_one_without_and_reads_as_it_did(tmp_path):
    """--init-from a DRAM without context: the added network starts at rest, so the first step's
    outputs are the source's, whatever the coarse view shows."""
    from glimpse.checkpoint import load_model
    from glimpse.training.loop import initial_weights

    family = get_family("dram")
    assert train.main([*FAST, "--preset", "cluttered60", "--max-steps", "1", "--val-every", "1",
                       "--run-dir", str(tmp_path), "--run-name", "plain"]) == 0
    path = tmp_path / "plain" / "best.pt"
    plain, _ = load_model(path)
    config = resolve_config({"preset": "cluttered60", "mode": "hard", "arch": "dram", "context_size": 20,
                             "init_from": str(path)})
    weights, _ = initial_weights(config)
    warm = family.build(family.model_config(config))
    missing = warm.load_state_dict(weights, strict=False).missing_keys
    assert missing and all(k.startswith("context_network.") for k in missing)
    glimpse, location = torch.rand(B, config.n_scales, 12, 12), torch.zeros(B, 2)
    a, b = plain(glimpse, location, ()), warm(glimpse, location, (), context=torch.rand(B, 20, 20))
    torch.testing.assert_close(a.logits, b.logits)
    torch.testing.assert_close(a.mean, b.mean)
