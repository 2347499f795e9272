"""Show-Attend-Tell (glimpse/models/sat.py + encoder + decoder): attention maps, penalty, gradients."""
import pytest
import torch
import torch.nn.functional as F

from glimpse.models import build_model
from glimpse.models.sat import SATClassifier, SATConfig, doubly_stochastic_penalty
from glimpse.models.sat_encoder import ConvEncoder


@pytest.mark.parametrize("size,grid", [(60, 7), (100, 12), (28, 3)])
def test_shapes_and_attention_is_a_distribution_over_cells(size, grid):
    torch.manual_seed(0)
    model = SATClassifier(SATConfig(canvas_size=size, n_glimpses=4))
    out = model(torch.rand(2, 1, size, size))
    assert ConvEncoder.grid_size(size) == grid
    assert set(out) == {"logits", "alpha", "beta"}
    assert out["logits"].shape == (2, 10) and out["alpha"].shape == (2, 4, grid, grid) and out["beta"].shape == (2, 4)
    assert (out["alpha"] >= 0).all()
    torch.testing.assert_close(out["alpha"].sum((-1, -2)), torch.ones(2, 4))
    assert ((out["beta"] > 0) & (out["beta"] < 1)).all()


def test_penalty_matches_a_hand_computation():
    # B = 2, T = 2 steps, 1 x 3 grid
    alpha = torch.tensor([[[[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]]],     # coverage (1, 1, 0): 0 + 0 + 1 = 1
                          [[[0.5, 0.5, 0.0]], [[0.2, 0.2, 0.6]]]])    # coverage (.7, .7, .6): .09 + .09 + .16 = .34
    assert doubly_stochastic_penalty(alpha).item() == pytest.approx((1.0 + 0.34) / 2)


def test_penalty_sums_over_steps_not_per_step():
    # each step alone is a perfect distribution; only the sum over steps is penalised
    alpha = torch.zeros(1, 4, 2, 2)
    alpha[0, torch.arange(4), torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 0, 1])] = 1.0
    assert doubly_stochastic_penalty(alpha).item() == 0.0  # every cell covered exactly once
    alpha = torch.zeros(1, 4, 2, 2)
    alpha[0, :, 0, 0] = 1.0  # all four steps on one cell: (1-4)^2 + 3 * 1 = 12
    assert doubly_stochastic_penalty(alpha).item() == pytest.approx(12.0)


def test_gradients_reach_the_attention_mlp_gate_and_encoder():
    torch.manual_seed(0)
    model = build_model("sat", dict(canvas_size=60, n_glimpses=2))
    out = model(torch.rand(4, 1, 60, 60))
    (F.cross_entropy(out["logits"], torch.arange(4)) + doubly_stochastic_penalty(out["alpha"])).backward()
    decoder = model.decoder
    attention = decoder.attention
    for name, layer in (("W_a", attention.feature_proj), ("W_h", attention.hidden_proj), ("w", attention.score),
                        ("f_beta", decoder.gate), ("init_h", decoder.init_h), ("init_c", decoder.init_c)):
        assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0, name
    assert model.encoder.layers[0].weight.grad.abs().sum() > 0


def test_penalty_alone_trains_the_attention():
    torch.manual_seed(0)
    model = SATClassifier(SATConfig(canvas_size=60, n_glimpses=3))
    doubly_stochastic_penalty(model(torch.rand(2, 1, 60, 60))["alpha"]).backward()
    assert model.decoder.attention.score.weight.grad.abs().sum() > 0


def test_deterministic_under_a_seed():
    images = torch.rand(2, 1, 60, 60, generator=torch.Generator().manual_seed(7))
    outs = []
    for _ in range(2):
        torch.manual_seed(3)
        model = SATClassifier(SATConfig(canvas_size=60))
        outs.append(model(images))
    for key in ("logits", "alpha", "beta"):
        torch.testing.assert_close(outs[0][key], outs[1][key], rtol=0, atol=0)


def test_batch_elements_are_independent():
    torch.manual_seed(0)
    model = SATClassifier(SATConfig(canvas_size=60)).eval()
    images = torch.rand(3, 1, 60, 60)
    with torch.no_grad():
        together, alone = model(images), model(images[2:])
    torch.testing.assert_close(together["alpha"][2:], alone["alpha"], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(together["logits"][2:], alone["logits"], rtol=1e-4, atol=1e-5)


def test_config_round_trip_and_validation():
    config = SATConfig(canvas_size=100, channels=[8, 16, 32])
    assert config.channels == (8, 16, 32) and config.n_digits == 1
    assert SATConfig(**config.to_dict()) == config
    with pytest.raises(ValueError, match="n_digits must be an integer >= 1"):
        SATConfig(n_digits=0)
    with pytest.raises(ValueError, match="canvas_size"):
        SATConfig(canvas_size=20)
    model = SATClassifier(SATConfig(canvas_size=60, n_glimpses=1))
    with pytest.raises(ValueError, match=r"images must be \(B, 1, 60, 60\), got \(2, 60, 60\)"):
        model(torch.rand(2, 60, 60))


@pytest.mark.parametrize("weight", [0.0, 0.01])
def test_the_logged_regulariser_is_the_term_the_loss_adds(weight):
    """losses/ add up to the total: the regulariser is logged weighted; the penalty itself under train/."""
    from types import SimpleNamespace

    from glimpse.models import Look, get_family

    torch.manual_seed(0)
    out = build_model("sat", dict(canvas_size=60, n_glimpses=3))(torch.rand(2, 1, 60, 60))
    term, logged = get_family("sat").training_terms(Look(out["logits"], None, out),
                                                    SimpleNamespace(attention_weight=weight))
    penalty = doubly_stochastic_penalty(out["alpha"]).detach()
    torch.testing.assert_close(logged["train/doubly_stochastic_penalty"], penalty)
    torch.testing.assert_close(logged["losses/attention_regulariser"], term.detach())
    torch.testing.assert_close(term.detach(), weight * penalty)


def test_the_dropped_score_bias_leaves_a_seed_s_initial_weights_as_they_were(monkeypatch):
    """The attention score's bias (dead: softmax ignores a shift) was dropped; a seed must still start
    every other layer from the same weights, so that the recorded runs' recipes rebuild them."""
    from torch import nn

    from glimpse.models import attention_decoder

    torch.manual_seed(0)
    now = build_model("sat", {}).state_dict()

    def with_score_bias(self, feature_size, hidden_size, attention_size):  # the layout before
        nn.Module.__init__(self)
        self.feature_proj = nn.Linear(feature_size, attention_size)
        self.hidden_proj = nn.Linear(hidden_size, attention_size, bias=False)
        self.score = nn.Linear(attention_size, 1)

    monkeypatch.setattr(attention_decoder.AdditiveAttention, "__init__", with_score_bias)
    torch.manual_seed(0)
    before = build_model("sat", {}).state_dict()
    assert set(before) - set(now) == {"decoder.attention.score.bias"}
    for name, value in now.items():
        assert torch.equal(value, before[name]), name
