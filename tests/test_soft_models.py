"""DRAW's filterbank read and Show-Attend-Tell's attention: invariants and gradients."""
import math

import pytest
import torch

from glimpse.models import build_model
from glimpse.models.attention_decoder import AdditiveAttention
from glimpse.models.filterbank import attention_params, filter_axis, filterbank_matrices, read
from glimpse.models.sat import doubly_stochastic_penalty


def raw_params(gx=0.0, gy=0.0, sigma2=1.0, delta_tilde=1.0, gamma=1.0, batch=1):
    row = torch.tensor([gx, gy, math.log(sigma2), math.log(delta_tilde), math.log(gamma)])
    return row.repeat(batch, 1)


def test_filters_are_normalised():
    params = attention_params(raw_params(0.1, -0.2, sigma2=4.0, batch=3), 60, 60, 12)
    f_x, f_y = filterbank_matrices(params, 60, 60, 12)
    assert f_x.shape == (3, 12, 60) and f_y.shape == (3, 12, 60)
    torch.testing.assert_close(f_x.sum(-1), torch.ones(3, 12))
    torch.testing.assert_close(f_y.sum(-1), torch.ones(3, 12))


def test_no_nan_when_filters_fall_off_the_canvas():
    raw = raw_params(gx=40.0, gy=-40.0, sigma2=1e-4, batch=2).requires_grad_()
    params = attention_params(raw, 28, 28, 5)
    f_x, f_y = filterbank_matrices(params, 28, 28, 5)
    patch = read(torch.rand(2, 28, 28), f_x, f_y, params.gamma)
    assert torch.isfinite(patch).all()
    patch.sum().backward()
    assert torch.isfinite(raw.grad).all()


def test_read_of_a_known_image_returns_the_expected_patch():
    # stride 1, tiny sigma: the read is the crop of N x N pixels around the centre
    size, n = 20, 4
    image = torch.arange(size * size, dtype=torch.float32).reshape(1, size, size)
    delta_tilde = (n - 1) / (size - 1)  # stride = 1 pixel
    centre_unit = 10.0 / size * 2 - 1  # pixel coordinate 10: between pixels 9 and 10
    params = attention_params(raw_params(centre_unit, centre_unit, sigma2=0.01, delta_tilde=delta_tilde), size, size, n)
    assert params.stride.item() == pytest.approx(1.0)
    f_x, f_y = filterbank_matrices(params, size, size, n)
    patch = read(image, f_x, f_y, params.gamma)
    # filter centres at 8.5, 9.5, 10.5, 11.5 = the centres of pixels 8..11
    torch.testing.assert_close(patch[0], image[0, 8:12, 8:12], atol=1e-3, rtol=0)
    half = read(image, f_x, f_y, params.gamma * 0.5)
    torch.testing.assert_close(half, patch * 0.5)


def test_known_pixel_lands_in_the_right_filter():
    filters = filter_axis(torch.tensor([10.0]), torch.tensor([2.0]), torch.tensor([0.05]), 20, 3)
    # mu = 8, 10, 12 -> pixels whose centres are nearest: 7 or 8 (7.5 and 8.5 tie) etc.
    assert filters[0].argmax(-1).tolist() in ([7, 9, 11], [8, 10, 12], [7, 9, 12], [8, 10, 11])


def test_gradients_reach_every_attention_parameter():
    raw = raw_params(0.2, -0.1, sigma2=3.0, delta_tilde=0.5, gamma=1.5, batch=2).requires_grad_()
    image = torch.rand(2, 30, 30)
    params = attention_params(raw, 30, 30, 6)
    f_x, f_y = filterbank_matrices(params, 30, 30, 6)
    (read(image, f_x, f_y, params.gamma) * torch.rand(2, 6, 6)).sum().backward()
    assert torch.all(raw.grad.abs().sum(0) > 0), raw.grad


@pytest.mark.parametrize("size,steps", [(60, 6), (100, 8)])
def test_draw_shapes_and_first_read_covers_the_canvas(size, steps):
    torch.manual_seed(0)
    model = build_model("draw", dict(canvas_size=size, n_glimpses=steps))
    out = model(torch.rand(4, 1, size, size))
    assert out["logits"].shape == (4, 10) and out["centre"].shape == (4, steps, 2)
    assert out["reads"].shape == (4, steps, 12, 12) and out["stride"].shape == (4, steps)
    torch.testing.assert_close(out["centre"][:, 0], torch.zeros(4, 2))  # h0 = 0: centred
    torch.testing.assert_close(out["stride"][:, 0] * 11, torch.full((4,), size - 1.0))  # the grid spans the canvas
    with pytest.raises(ValueError, match="images must be"):
        model(torch.rand(4, 1, size + 1, size))


def test_draw_gradients_reach_the_attention_layer():
    torch.manual_seed(0)
    model = build_model("draw", dict(canvas_size=60, n_glimpses=3))
    torch.nn.functional.cross_entropy(model(torch.rand(8, 1, 60, 60))["logits"], torch.arange(8)).backward()
    assert model.attention.weight.grad.abs().sum() > 0 and model.attention.bias.grad.abs().sum() > 0


@pytest.mark.parametrize("size,grid", [(60, 7), (100, 12)])
def test_sat_shapes_and_attention_sums_to_one(size, grid):
    torch.manual_seed(0)
    model = build_model("sat", dict(canvas_size=size, n_glimpses=4))
    out = model(torch.rand(3, 1, size, size))
    assert out["logits"].shape == (3, 10) and out["alpha"].shape == (3, 4, grid, grid)
    torch.testing.assert_close(out["alpha"].sum((-1, -2)), torch.ones(3, 4))
    assert torch.all((out["beta"] > 0) & (out["beta"] < 1))


def test_doubly_stochastic_penalty_is_over_steps():
    alpha = torch.zeros(2, 3, 1, 2)  # two cells, three steps
    alpha[0, :, 0, 0] = 1.0  # all attention on cell 0: coverage (3, 0) -> (1-3)^2 + (1-0)^2 = 5
    alpha[1, :, 0, :] = 0.5  # spread: coverage (1.5, 1.5) -> 0.25 + 0.25 = 0.5
    assert doubly_stochastic_penalty(alpha).item() == pytest.approx((5 + 0.5) / 2)


def test_sat_gradients_reach_the_attention_mlp():
    torch.manual_seed(0)
    model = build_model("sat", dict(canvas_size=60, n_glimpses=2))
    out = model(torch.rand(4, 1, 60, 60))
    (torch.nn.functional.cross_entropy(out["logits"], torch.arange(4)) + doubly_stochastic_penalty(out["alpha"])).backward()
    attention = model.decoder.attention
    assert isinstance(attention, AdditiveAttention)
    for layer in (attention.feature_proj, attention.hidden_proj, attention.score):
        assert layer.weight.grad.abs().sum() > 0


def test_sat_is_deterministic_under_a_seed():
    outs = []
    for _ in range(2):
        torch.manual_seed(3)
        model = build_model("sat", dict(canvas_size=60))
        outs.append(model(torch.ones(1, 1, 60, 60))["logits"])
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)
