"""The engine's canvas recipe (envs/engine.py): 8x8 clutter crops of other digits, the digit fully
inside, values clipped; seeded, batched, the same on every run; glimpses equal the v0 retina."""
from pathlib import Path

import numpy as np
import pytest
import torch

from envs.engine import CLUTTER_SIZE, DIGIT_SIZE, DigitBank, fixed_canvas_set, make_canvases, non_overlapping_positions
from envs.retina import extract_glimpses, integral_images

FIXTURE = Path(__file__).parent / "fixtures" / "retina_v0.npz"


def canvases(images, labels, indices, size, clutter, seed=0, **kwargs):
    """make_canvases on the CPU from arrays, returned as numpy."""
    bank = DigitBank.from_arrays(images, labels)
    return make_canvases(torch.Generator().manual_seed(seed), bank, torch.as_tensor(indices), size, clutter,
                         **kwargs).numpy()


def test_digit_fully_inside_and_added_with_clipping(bundled):
    digits = bundled.train
    batch = canvases(digits.images, digits.labels, np.arange(64), 60, 0)
    assert batch.images.shape == (64, 60, 60) and batch.images.dtype == np.uint8
    assert np.all(batch.digit_xy >= 0) and np.all(batch.digit_xy <= 60 - DIGIT_SIZE)
    for image, (x, y), index in zip(batch.images, batch.digit_xy, range(64)):
        # without clutter the canvas is exactly the digit at its position
        expected = np.zeros((60, 60), np.uint8)
        expected[y:y + 28, x:x + 28] = digits.images[index]
        np.testing.assert_array_equal(image, expected)
    np.testing.assert_array_equal(batch.labels, digits.labels[:64])


def test_clutter_is_whole_8x8_crops_and_values_are_clipped(bundled):
    # an all-white digit pool makes every clutter piece a full 8x8 block: count the ink
    pool = np.concatenate([np.zeros((3, 28, 28), np.uint8), np.full((2, 28, 28), 255, np.uint8)])
    batch = canvases(pool, np.zeros(5, np.int64), np.zeros(200, np.int64), 100, 1, seed=1)
    assert np.all((batch.images == 0) | (batch.images == 255))
    ink = (batch.images == 255).sum(axis=(1, 2))
    assert set(np.unique(ink)) <= {0, CLUTTER_SIZE**2} and ink.max() == CLUTTER_SIZE**2
    # overlapping white pieces clip at 255 instead of wrapping around
    many = canvases(pool, np.zeros(5, np.int64), np.zeros(50, np.int64), 28, 40, seed=2)
    assert many.images.max() == 255 and set(np.unique(many.images)) <= {0, 255}
    real = canvases(bundled.train.images, bundled.train.labels, np.arange(100), 60, 4)
    assert real.images.max() == 255 and real.images.min() == 0


def test_clutter_never_uses_the_target_digit():
    pool = np.full((2, 28, 28), 100, np.uint8)  # the target: ink of 100 everywhere
    pool[1] = 7  # the only *other* digit
    batch = canvases(pool, np.array([0, 1]), np.zeros(50, np.int64), 60, 4)
    outside = batch.images.copy()
    for image, (x, y) in zip(outside, batch.digit_xy):  # the digit's own 28x28 box
        image[y:y + 28, x:x + 28] = 0
    assert np.all(outside % 7 == 0) and outside.max() > 0, "clutter must come from the other digits only"


def test_centred_digit():
    pool = np.full((1, 28, 28), 200, np.uint8)
    batch = canvases(pool, np.array([3]), np.array([0]), 28, 0, centred=True)
    np.testing.assert_array_equal(batch.images[0], pool[0])


def test_fixed_sets_are_reproducible_and_seeded(bundled):
    d = bundled.test
    a = fixed_canvas_set(d.images, d.labels, 60, 4, False, seed=2)
    b = fixed_canvas_set(d.images, d.labels, 60, 4, False, seed=2)
    np.testing.assert_array_equal(a.images, b.images)
    np.testing.assert_array_equal(a.labels, d.labels)  # every digit once, in order
    assert not np.array_equal(a.images, fixed_canvas_set(d.images, d.labels, 60, 4, False, seed=3).images)


def test_a_batch_is_independent_of_what_else_is_drawn(bundled):
    """The draw order is fixed: the same seed gives the same canvases whatever the digits."""
    d = bundled.train
    a = canvases(d.images, d.labels, np.arange(32), 60, 4, seed=9)
    b = canvases(d.images, d.labels, np.arange(32, 64), 60, 4, seed=9)
    np.testing.assert_array_equal(a.digit_xy, b.digit_xy)


def test_clutter_needs_two_digits():
    with pytest.raises(ValueError, match="at least 2"):
        canvases(np.zeros((1, 28, 28), np.uint8), np.zeros(1, np.int64), np.zeros(1, np.int64), 60, 2)


def test_grid_fallback_when_no_candidate_layout_fits():
    """4 digits on 56x56 have one layout up to a shift: candidates almost never fit, the grid does."""
    xy = non_overlapping_positions(torch.Generator().manual_seed(0), 200, 4, 56).numpy()
    for layout in xy:
        for i in range(4):
            for j in range(i + 1, 4):
                assert np.any(np.abs(layout[i] - layout[j]) >= DIGIT_SIZE)
    assert xy.min() >= 0 and xy.max() <= 56 - DIGIT_SIZE


@pytest.mark.parametrize("name", ["m28", "c60", "c100"])
def test_glimpses_equal_the_v0_retina_on_its_canvases(name):
    """A fixture of the numpy-era sensor's output (made before the engine replaced it)."""
    with np.load(FIXTURE) as fixture:
        images, locations, expected = (fixture[f"{name}_{part}"] for part in ("canvases", "locations", "glimpses"))
        g, k = fixture[f"{name}_sensor"]
    ii = integral_images(torch.from_numpy(images))
    for t in range(locations.shape[1]):
        got = extract_glimpses(ii, torch.from_numpy(locations[:, t]), int(g), int(k)).numpy()
        np.testing.assert_array_equal(got, expected[:, t])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
def test_cuda_engine_reads_what_the_cpu_engine_reads(bundled):
    """Same canvases, same locations: the CUDA sensor returns the CPU sensor's glimpses."""
    batch = fixed_canvas_set(bundled.test.images[:64], bundled.test.labels[:64], 60, 4, False, seed=2)
    locations = torch.rand(64, 2, generator=torch.Generator().manual_seed(0)) * 2 - 1
    cpu = extract_glimpses(integral_images(torch.from_numpy(batch.images)), locations, 12, 3)
    cuda = extract_glimpses(integral_images(torch.from_numpy(batch.images).cuda()), locations.cuda(), 12, 3)
    torch.testing.assert_close(cuda.cpu(), cpu, rtol=0, atol=1e-6)
    bank = DigitBank.from_arrays(bundled.test.images, bundled.test.labels, "cuda")
    made = make_canvases(torch.Generator("cuda").manual_seed(0), bank, torch.arange(64, device="cuda"), 60, 4)
    assert made.images.device.type == "cuda" and made.images.shape == (64, 60, 60)
