import numpy as np
import pytest

from envs.canvas import CLUTTER_SIZE, DIGIT_SIZE, fixed_canvas_set, make_canvases


def test_digit_fully_inside_and_added_with_clipping(bundled):
    digits = bundled.train
    rng = np.random.default_rng(0)
    batch = make_canvases(rng, digits.images, digits.labels, np.arange(64), 60, 0)
    assert batch.images.shape == (64, 60, 60) and batch.images.dtype == np.uint8
    assert np.all(batch.digit_xy >= 0) and np.all(batch.digit_xy <= 60 - DIGIT_SIZE)
    for image, (x, y), index in zip(batch.images, batch.digit_xy, range(64)):
        # without clutter the canvas is exactly the digit at its position
        expected = np.zeros((60, 60), np.uint8)
        expected[y:y + 28, x:x + 28] = digits.images[index]
        np.testing.assert_array_equal(image, expected)
    np.testing.assert_array_equal(batch.labels, digits.labels[:64])


def test_clutter_count_and_value_range(bundled):
    digits = bundled.train
    # an all-white digit pool makes every clutter piece a full 8x8 block: count the ink
    white = np.full((2, 28, 28), 255, np.uint8)
    black_target = np.zeros((3, 28, 28), np.uint8)
    pool = np.concatenate([black_target, white])
    rng = np.random.default_rng(1)
    batch = make_canvases(rng, pool, np.zeros(5, np.int64), np.zeros(200, np.int64), 100, 1)
    assert np.all((batch.images == 0) | (batch.images == 255))
    # clutter comes from other digits than the target (index 0 is black, so some crops are black)
    ink = (batch.images == 255).sum(axis=(1, 2))
    assert set(np.unique(ink)) <= {0, CLUTTER_SIZE**2}
    real = make_canvases(rng, digits.images, digits.labels, np.arange(100), 60, 4)
    assert real.images.max() == 255 and real.images.min() == 0


def test_clutter_never_uses_the_target_digit():
    pool = np.zeros((2, 28, 28), np.uint8)
    pool[1] = 7  # the only *other* digit
    batch = make_canvases(np.random.default_rng(0), pool, np.array([0, 1]), np.zeros(50, np.int64), 60, 4)
    assert np.all(batch.images % 7 == 0) and batch.images.max() > 0


def test_centred_digit():
    pool = np.full((1, 28, 28), 200, np.uint8)
    batch = make_canvases(np.random.default_rng(0), pool, np.array([3]), np.array([0]), 28, 0, centred=True)
    np.testing.assert_array_equal(batch.images[0], pool[0])


def test_fixed_sets_are_reproducible(bundled):
    d = bundled.test
    a = fixed_canvas_set(d.images, d.labels, 60, 4, False, seed=2)
    b = fixed_canvas_set(d.images, d.labels, 60, 4, False, seed=2)
    np.testing.assert_array_equal(a.images, b.images)
    assert len(a.labels) == len(d.labels)
    assert not np.array_equal(a.images, fixed_canvas_set(d.images, d.labels, 60, 4, False, seed=3).images)


def test_clutter_needs_two_digits():
    with pytest.raises(ValueError, match="at least 2"):
        make_canvases(np.random.default_rng(0), np.zeros((1, 28, 28), np.uint8), np.zeros(1), np.zeros(1), 60, 2)
