"""Cluttered-translated MNIST canvases, built with the standard recipe, batched in numpy.

Recipe (DeepMind's mnist-cluttered): start black; add ``n_clutter`` random 8x8 crops of
other digits of the same split at uniformly random positions; add the digit at a uniformly
random position fully inside the canvas; clip to the pixel range. Adding then clipping once
equals clipping after every piece because all values are non-negative.

Multi-digit canvases (``n_digits`` > 1, as in Ba et al. 2015's two-digit task) place that many
digits at uniformly random positions that do not overlap (rejection sampling) and label them
in reading order: left to right by the digit's left edge, then top to bottom.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DIGIT_SIZE = 28
CLUTTER_SIZE = 8
MAX_PLACEMENT_ROUNDS = 1_000  # rejection-sampling rounds before a canvas takes a layout that cannot fail


@dataclass(frozen=True)
class CanvasBatch:
    """``images`` (N, H, W) uint8; ``labels`` (N,) int64; ``digit_xy`` (N, 2) top-left (x, y) of the digit.

    With K > 1 digits per canvas: ``labels`` (N, K) and ``digit_xy`` (N, K, 2), in reading order."""

    images: np.ndarray
    labels: np.ndarray
    digit_xy: np.ndarray


def _paste_add(canvas: np.ndarray, patches: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """canvas[n, y_n:y_n+h, x_n:x_n+w] += patches[n] for every n at once (int16 canvas).

    Fancy-index ``+=`` is safe here: within one call every index triple is distinct
    (one patch per canvas), so no update is lost.
    """
    n, h, w = patches.shape
    rows = y[:, None, None] + np.arange(h)[None, :, None]
    cols = x[:, None, None] + np.arange(w)[None, None, :]
    canvas[np.arange(n)[:, None, None], rows, cols] += patches


def make_canvases(
    rng: np.random.Generator,
    digits: np.ndarray,
    labels: np.ndarray,
    indices: np.ndarray,
    canvas_size: int,
    n_clutter: int,
    centred: bool = False,
    n_digits: int = 1,
) -> CanvasBatch:
    """Build one canvas per entry of ``indices``.

    Args:
        rng: source of all randomness (positions, clutter sources, crops).
        digits: (M, 28, 28) uint8, the split's digits; clutter is cut from these too.
        labels: (M,) labels of ``digits``.
        indices: (N,) which digits to place.
        canvas_size: side H = W of the square canvas (>= 28).
        n_clutter: pieces of 8x8 clutter per canvas (>= 0).
        centred: put the digit in the centre instead of at a random position.
        n_digits: digits per canvas; ``indices`` gives the first of each, the others are drawn
            from ``rng`` (so a fixed set still uses every digit of its split once).
    """
    indices = np.asarray(indices, dtype=np.int64)
    n, m = len(indices), len(digits)
    canvas = np.zeros((n, canvas_size, canvas_size), dtype=np.int16)
    if n_clutter > 0 and m < 2:
        raise ValueError("clutter needs at least 2 digits in the split (it is cut from *other* digits)")
    for _ in range(n_clutter):
        # a uniformly random digit other than the one being placed
        source = (indices + 1 + rng.integers(0, m - 1, size=n)) % m
        crop_x, crop_y = rng.integers(0, DIGIT_SIZE - CLUTTER_SIZE + 1, size=(2, n))
        rows = crop_y[:, None, None] + np.arange(CLUTTER_SIZE)[None, :, None]
        cols = crop_x[:, None, None] + np.arange(CLUTTER_SIZE)[None, None, :]
        patches = digits[source[:, None, None], rows, cols]
        px, py = rng.integers(0, canvas_size - CLUTTER_SIZE + 1, size=(2, n))
        _paste_add(canvas, patches, px, py)
    if n_digits > 1:
        placed, digit_xy = _place_several(rng, canvas, digits, indices, n_digits, centred)
    else:
        placed = indices
        if centred:
            digit_xy = np.full((n, 2), (canvas_size - DIGIT_SIZE) // 2, dtype=np.int64)
        else:
            digit_xy = rng.integers(0, canvas_size - DIGIT_SIZE + 1, size=(n, 2))
        _paste_add(canvas, digits[indices], digit_xy[:, 0], digit_xy[:, 1])
    np.clip(canvas, 0, 255, out=canvas)
    return CanvasBatch(canvas.astype(np.uint8), np.asarray(labels)[placed].astype(np.int64), digit_xy)


def _place_several(rng, canvas, digits, indices, n_digits: int, centred: bool) -> tuple[np.ndarray, np.ndarray]:
    """Add ``n_digits`` non-overlapping digits to the int16 ``canvas`` (N, H, W); returns which
    digits (N, K) and where (N, K, 2), in reading order."""
    if centred:
        raise ValueError("several digits cannot all be centred: use random positions")
    n, size = len(indices), canvas.shape[-1]
    placed = np.concatenate([indices[:, None], rng.integers(0, len(digits), size=(n, n_digits - 1))], 1)
    digit_xy = non_overlapping_positions(rng, n, n_digits, size)
    order = np.lexsort((digit_xy[..., 1], digit_xy[..., 0]))  # by x, ties by y: reading order
    placed = np.take_along_axis(placed, order, 1)
    digit_xy = np.take_along_axis(digit_xy, order[..., None], 1)
    for k in range(n_digits):  # one vectorised paste per digit slot, not per canvas
        _paste_add(canvas, digits[placed[:, k]], digit_xy[:, k, 0], digit_xy[:, k, 1])
    return placed, digit_xy


def digits_that_fit(canvas_size: int) -> int:
    """How many non-overlapping digits a canvas certainly holds (as a grid): the most a task may ask for."""
    return (canvas_size // DIGIT_SIZE) ** 2


def non_overlapping_positions(rng: np.random.Generator, n: int, n_digits: int, canvas_size: int) -> np.ndarray:
    """(n, n_digits, 2) top-left corners of digits that do not overlap, never failing for a count
    that :func:`digits_that_fit` allows.

    Uniform over such layouts: canvases with any overlapping pair are redrawn whole. A canvas
    still overlapping after MAX_PLACEMENT_ROUNDS (which happens only where the digits nearly
    fill the canvas, e.g. 4 on 56x56) takes a layout that cannot fail instead: distinct random
    cells of the grid of ``canvas_size // 28`` cells a side, all shifted by one random offset
    within the grid's slack, so that no two digits meet."""
    if n_digits > digits_that_fit(canvas_size):
        raise ValueError(f"at most {digits_that_fit(canvas_size)} non-overlapping {DIGIT_SIZE}x{DIGIT_SIZE} digits "
                         f"fit on a {canvas_size}x{canvas_size} canvas, asked for {n_digits}")
    high = canvas_size - DIGIT_SIZE + 1
    xy = rng.integers(0, high, size=(n, n_digits, 2))
    pairs = np.triu_indices(n_digits, 1)
    for _ in range(MAX_PLACEMENT_ROUNDS):
        gaps = np.abs(xy[:, pairs[0]] - xy[:, pairs[1]])  # (n, pairs, 2)
        bad = (gaps < DIGIT_SIZE).all(-1).any(-1)
        if not bad.any():
            return xy
        xy[bad] = rng.integers(0, high, size=(int(bad.sum()), n_digits, 2))
    side = canvas_size // DIGIT_SIZE
    stuck = int(bad.sum())
    cells = np.argsort(rng.random((stuck, side * side)), axis=1)[:, :n_digits]  # distinct cells per canvas
    offset = rng.integers(0, canvas_size - side * DIGIT_SIZE + 1, size=(stuck, 1, 2))
    xy[bad] = np.stack([cells % side, cells // side], -1) * DIGIT_SIZE + offset
    return xy


def fixed_canvas_set(digits, labels, canvas_size: int, n_clutter: int, centred: bool, seed: int,
                     n_digits: int = 1) -> CanvasBatch:
    """Every digit of a split placed once (as the first of ``n_digits``), with clutter drawn from
    ``seed``: a fixed val/test set."""
    rng = np.random.default_rng(seed)
    return make_canvases(rng, digits, labels, np.arange(len(labels)), canvas_size, n_clutter, centred, n_digits)
