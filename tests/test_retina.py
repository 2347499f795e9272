import numpy as np
import pytest
import torch
import torch.nn.functional as F

from envs.coords import pixels_to_unit
from envs.retina import extract_glimpses, integral_images


def test_known_pixel_lands_where_it_should_at_every_scale():
    size, g, k = 64, 4, 3
    canvas = torch.zeros(1, size, size, dtype=torch.uint8)
    px, py = 33, 30
    canvas[0, py, px] = 255
    # centre of the glimpse exactly on the pixel's top-left corner: (px, py) in pixels
    loc = torch.stack([pixels_to_unit(torch.tensor(float(px)), size), pixels_to_unit(torch.tensor(float(py)), size)])[None]
    out = extract_glimpses(integral_images(canvas), loc, g, k)
    assert out.shape == (1, k, g, g)
    for s in range(k):
        cell = 2**s
        # the patch starts at px - g*cell/2, so the pixel is in cell g/2 (row and column) of every scale
        expected = torch.zeros(g, g)
        expected[g // 2, g // 2] = 1.0 / cell**2
        torch.testing.assert_close(out[0, s], expected)


def test_matches_crop_and_average_pool_with_zero_padding():
    torch.manual_seed(0)
    canvases = torch.randint(0, 256, (5, 40, 40), dtype=torch.uint8)
    loc = torch.tensor([[0.0, 0.0], [-1.0, -1.0], [1.0, 1.0], [0.3, -0.7], [-0.95, 0.5]])
    g, k = 6, 3
    out = extract_glimpses(integral_images(canvases), loc, g, k)
    pad = g * 2 ** (k - 1)
    padded = F.pad(canvases.float() / 255, (pad, pad, pad, pad))
    for b in range(5):
        for s in range(k):
            w = g * 2**s
            cx, cy = ((loc[b] + 1) * 20).tolist()
            x0, y0 = int(np.floor(cx - w / 2 + 0.5)), int(np.floor(cy - w / 2 + 0.5))
            crop = padded[b, y0 + pad:y0 + pad + w, x0 + pad:x0 + pad + w]
            ref = F.avg_pool2d(crop[None, None], 2**s)[0, 0]
            torch.testing.assert_close(out[b, s], ref, atol=1e-6, rtol=0)


def test_values_in_unit_range_and_exact_for_large_canvases():
    canvases = torch.full((2, 100, 100), 255, dtype=torch.uint8)
    out = extract_glimpses(integral_images(canvases), torch.zeros(2, 2), 12, 4)
    assert torch.all(out == 1.0)
    big = torch.full((1, 300, 300), 255, dtype=torch.uint8)  # sums beyond float32's exact range
    assert integral_images(big).dtype == torch.float64


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match="uint8"):
        integral_images(torch.zeros(2, 10, 10))
    with pytest.raises(ValueError, match="locations"):
        extract_glimpses(integral_images(torch.zeros(2, 10, 10, dtype=torch.uint8)), torch.zeros(3, 2), 4, 1)
