"""DRAW's filterbank (glimpse/models/filterbank.py): normalisation, NaN guard, geometry, gradients."""
import math

import pytest
import torch

from envs.coords import pixels_to_unit
from glimpse.models.filterbank import FilterbankParams, attention_params, filterbank_matrices, read


def raw_params(gx=0.0, gy=0.0, sigma2=1.0, delta_tilde=1.0, gamma=1.0, batch=1, dtype=torch.float32):
    """(batch, 5) raw attention parameters (g~X, g~Y, log sigma^2, log delta~, log gamma)."""
    row = torch.tensor([gx, gy, math.log(sigma2), math.log(delta_tilde), math.log(gamma)], dtype=dtype)
    return row.repeat(batch, 1)


def unit_stride(size: int, n: int) -> float:
    """delta~ giving a stride of exactly one pixel."""
    return (n - 1) / (size - 1)


def test_params_follow_the_paper_and_coords_convention():
    raw = torch.stack([raw_params(0.0, 0.0, 2.0, 1.0, 3.0)[0], raw_params(-1.0, 1.0, 1.0, 0.5, 1.0)[0]])
    params = attention_params(raw, 40, 60, 12)  # height 40, width 60
    assert isinstance(params, FilterbankParams)
    torch.testing.assert_close(params.centre, raw[:, :2])  # g~ is the unit coordinate itself
    # g~ = 0 is the canvas centre (x along the width, y along the height); g~ = -1 / +1 the edges
    torch.testing.assert_close(params.centre_px, torch.tensor([[30.0, 20.0], [0.0, 40.0]]))
    # delta = (max(A, B) - 1) / (N - 1) * delta~
    torch.testing.assert_close(params.stride, torch.tensor([59 / 11, 59 / 22]))
    torch.testing.assert_close(params.sigma2, torch.tensor([2.0, 1.0]))
    torch.testing.assert_close(params.gamma, torch.tensor([3.0, 1.0]))
    with pytest.raises(ValueError, match=r"\(B, 5\)"):
        attention_params(torch.zeros(2, 4), 40, 60, 12)


def test_stride_floor_follows_the_zoom():
    # the same learned part at two zooms: the floor is k strides wide at each, on top of exp(raw)
    raw = torch.stack([raw_params(0.0, 0.0, 1e-3, 1.0)[0], raw_params(0.2, 0.1, 1e-3, 0.1)[0]]).requires_grad_(True)
    params = attention_params(raw, 60, 60, 12, min_sigma_strides=0.4)
    torch.testing.assert_close(params.sigma2, 1e-3 + (0.4 * params.stride) ** 2)
    params.sigma2.sum().backward()
    assert (raw.grad[:, 2] != 0).all() and (raw.grad[:, 3] != 0).all()  # sigma learns; zooming widens the floor
    # zoomed in to a 2 px stride with needle-thin filters centred on the odd pixels (19, 21, ...,
    # 41), the grid point-samples the canvas and misses a stroke on pixel column 30; the floor sees it
    stroke = torch.zeros(1, 60, 60)
    stroke[0, :, 30] = 1.0
    zoomed = raw_params(pixels_to_unit(torch.tensor(30.5), 60).item(), 0.0, 1e-4, 2.0 * unit_stride(60, 12))

    def stroke_seen(k):
        params = attention_params(zoomed, 60, 60, 12, min_sigma_strides=k)
        torch.testing.assert_close(params.stride, torch.tensor([2.0]))
        f_x, f_y = filterbank_matrices(params, 60, 60, 12)
        return read(stroke, f_x, f_y, params.gamma).amax().item()
    assert stroke_seen(0.0) < 1e-6
    assert stroke_seen(0.4) > 0.1
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="min_sigma_strides"):
            attention_params(raw, 60, 60, 12, min_sigma_strides=bad)


def test_unit_delta_spreads_the_grid_from_first_to_last_pixel_centre():
    size, n = 60, 12
    params = attention_params(raw_params(sigma2=1e-3, batch=1), size, size, n)
    f_x, _ = filterbank_matrices(params, size, size, n)
    # with tiny sigma each filter sits on one pixel: first on pixel 0, last on pixel size - 1
    assert f_x[0].argmax(-1)[[0, -1]].tolist() == [0, size - 1]


def test_filters_are_normalised_on_the_canvas_and_vanish_off_it():
    height, width, n = 30, 50, 8
    # stride uses max(A, B) = 50, so delta~ < 1 keeps the first two grids on the 30-pixel height
    raw = torch.cat([raw_params(0.1, -0.2, sigma2=4.0, delta_tilde=0.5), raw_params(0.7, 0.3, sigma2=0.5, delta_tilde=0.3),
                     raw_params(5.0, -5.0, sigma2=1.0, delta_tilde=0.2)])  # last: grid far off the canvas
    params = attention_params(raw, height, width, n)
    f_x, f_y = filterbank_matrices(params, height, width, n)
    assert f_x.shape == (3, n, width) and f_y.shape == (3, n, height)
    assert (f_x >= 0).all() and (f_y >= 0).all()
    torch.testing.assert_close(f_x[:2].sum(-1), torch.ones(2, n))
    torch.testing.assert_close(f_y[:2].sum(-1), torch.ones(2, n))
    # off the canvas Z underflows: rows are ~0 rather than NaN (the eps guard)
    assert torch.isfinite(f_x[2]).all() and f_x[2].sum() < 1e-3 and f_y[2].sum() < 1e-3


@pytest.mark.parametrize("sigma2", [0.005, 1e-3, 1e-5])
def test_a_filter_narrower_than_a_pixel_on_the_canvas_still_reads_its_nearest_pixels(sigma2):
    """Centred between two pixel centres, every exp underflows; the row must not go dark (the
    paper normalises every filter), but read the two pixels it lies between, half each."""
    from glimpse.models.filterbank import filter_axis

    midway = filter_axis(torch.tensor([30.5]), torch.tensor([1.0]), torch.tensor([sigma2]), 60, 4)  # mu 29, 30, 31, 32
    torch.testing.assert_close(midway.sum(-1), torch.ones(1, 4))
    torch.testing.assert_close(midway[0, 0, 28:30], torch.tensor([0.5, 0.5]))  # pixel centres 28.5 and 29.5
    on_centres = filter_axis(torch.tensor([30.0]), torch.tensor([1.0]), torch.tensor([sigma2]), 60, 4)  # mu 28.5 ..
    torch.testing.assert_close(on_centres[0], torch.eye(60)[28:32])
    # a filter wide enough not to underflow is the plain normalised Gaussian, bit for bit
    mu, sigma2 = torch.tensor([30.5 - 1.5, 30.5 - 0.5, 30.5 + 0.5, 30.5 + 1.5]), 0.05
    plain = torch.exp(-((torch.arange(60) + 0.5 - mu[:, None]) ** 2) / (2 * torch.tensor(sigma2)))
    wide = filter_axis(torch.tensor([30.5]), torch.tensor([1.0]), torch.tensor([sigma2]), 60, 4)[0]
    torch.testing.assert_close(wide, plain / plain.sum(-1, keepdim=True), rtol=0, atol=0)


@pytest.mark.parametrize("gx,gy,log_sigma2", [(30.0, -30.0, 0.0), (0.0, 0.0, -60.0), (1e3, 1e3, -200.0)])
def test_no_nan_far_off_the_canvas_or_with_tiny_sigma(gx, gy, log_sigma2):
    raw = torch.tensor([[gx, gy, log_sigma2, 0.0, 0.0], [0.1, 0.2, log_sigma2, -1.0, 0.0]], requires_grad=True)
    params = attention_params(raw, 28, 28, 5)
    f_x, f_y = filterbank_matrices(params, 28, 28, 5)
    patch = read(torch.rand(2, 28, 28), f_x, f_y, params.gamma)
    assert torch.isfinite(f_x).all() and torch.isfinite(f_y).all() and torch.isfinite(patch).all()
    patch.sum().backward()
    assert torch.isfinite(raw.grad).all()


def test_single_bright_pixel_lands_where_expected_on_a_non_square_canvas():
    # height != width and row != column, so a swapped x / y would put the pixel elsewhere
    height, width, n = 24, 40, 5
    row, col = 9, 27
    image = torch.zeros(1, height, width)
    image[0, row, col] = 1.0
    centre_row, centre_col = 10, 26  # read centred on the centre of pixel (10, 26): odd N, stride 1
    gx = pixels_to_unit(torch.tensor(centre_col + 0.5), width).item()
    gy = pixels_to_unit(torch.tensor(centre_row + 0.5), height).item()
    params = attention_params(raw_params(gx, gy, sigma2=0.01, delta_tilde=unit_stride(width, n)), height, width, n)
    assert params.stride.item() == pytest.approx(1.0)
    patch = read(image, *filterbank_matrices(params, height, width, n), params.gamma)[0]
    expected = torch.zeros(n, n)
    expected[row - centre_row + n // 2, col - centre_col + n // 2] = 1.0  # patch (1, 3)
    torch.testing.assert_close(patch, expected, atol=1e-4, rtol=0)


def test_read_with_stride_one_and_small_sigma_is_the_crop():
    size, n = 20, 4
    image = torch.rand(2, size, size)
    # even N: centre on the corner between pixels 9 and 10 so filters sit on pixel centres 8..11
    centre = pixels_to_unit(torch.tensor(10.0), size).item()
    raw = torch.cat([raw_params(centre, centre, sigma2=0.01, delta_tilde=unit_stride(size, n)),
                     raw_params(centre, centre, sigma2=0.01, delta_tilde=unit_stride(size, n), gamma=0.5)])
    params = attention_params(raw, size, size, n)
    patch = read(image, *filterbank_matrices(params, size, size, n), params.gamma)
    assert patch.shape == (2, n, n)
    torch.testing.assert_close(patch[0], image[0, 8:12, 8:12], atol=1e-4, rtol=0)
    torch.testing.assert_close(patch[1], 0.5 * image[1, 8:12, 8:12], atol=1e-4, rtol=0)  # gamma scales


def test_batched_read_equals_reads_one_at_a_time():
    torch.manual_seed(0)
    raw = torch.randn(4, 5) * 0.5
    images = torch.rand(4, 32, 32)
    params = attention_params(raw, 32, 32, 6)
    batched = read(images, *filterbank_matrices(params, 32, 32, 6), params.gamma)
    for b in range(4):
        one = attention_params(raw[b:b + 1], 32, 32, 6)
        torch.testing.assert_close(batched[b:b + 1], read(images[b:b + 1], *filterbank_matrices(one, 32, 32, 6), one.gamma))


def test_gradients_reach_every_raw_parameter_and_the_attention_layer():
    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 5)
    with torch.no_grad():
        layer.bias.copy_(raw_params(0.2, -0.1, sigma2=3.0, delta_tilde=0.5, gamma=1.5)[0])
    raw = layer(torch.randn(2, 8) * 0.1)
    raw.retain_grad()
    params = attention_params(raw, 30, 30, 6)
    patch = read(torch.rand(2, 30, 30), *filterbank_matrices(params, 30, 30, 6), params.gamma)
    (patch * torch.rand(2, 6, 6)).sum().backward()
    assert (raw.grad.abs().sum(0) > 0).all(), raw.grad  # all five: g~X, g~Y, sigma^2, delta~, gamma
    assert (layer.weight.grad.abs().sum(1) > 0).all() and (layer.bias.grad.abs() > 0).all()


def test_read_passes_gradcheck():
    torch.manual_seed(0)
    raw = (raw_params(0.1, -0.2, sigma2=2.0, delta_tilde=0.7, dtype=torch.float64)
           + 0.05 * torch.randn(1, 5, dtype=torch.float64)).requires_grad_()
    image = torch.rand(1, 9, 11, dtype=torch.float64)

    def fn(raw):
        params = attention_params(raw, 9, 11, 3)
        return read(image, *filterbank_matrices(params, 9, 11, 3), params.gamma)

    assert torch.autograd.gradcheck(fn, (raw,))
