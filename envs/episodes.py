"""A batch of synchronous glimpse episodes: the one engine behind the single and vector envs.

Both envs go through the same canvas recipe and the same sensor, so a single env and a
vector env shown the same canvas and locations return bit-identical glimpses.
"""
from __future__ import annotations

import numpy as np
import torch

from envs.task import GlimpseTask
from envs.canvas import CanvasBatch, make_canvases
from envs.data import Digits, load_mnist
from envs.retina import extract_glimpses, integral_images


class EpisodeBatch:
    """State of B episodes that start and end together.

    Attributes after :meth:`start`: ``canvases`` (B, H, W) uint8, ``labels`` (B,) int64,
    ``digit_xy`` (B, 2) (with K digits per canvas: (B, K) and (B, K, 2), in reading order),
    ``locations`` list of (B, 2) float32 (one per glimpse so far), ``t`` (glimpses taken).
    """

    def __init__(self, task: GlimpseTask):
        self.task = task
        self._digits: Digits | None = None
        self.data_source: str | None = None
        self.canvases = self.labels = self.digit_xy = None
        self._ii: torch.Tensor | None = None
        self.locations: list[np.ndarray] = []
        self.t = 0

    @property
    def digits(self) -> Digits:
        if self._digits is None:  # loaded lazily so that spaces can be inspected without data
            mnist = load_mnist(self.task.data_dir)
            self._digits, self.data_source = mnist.split(self.task.split), mnist.source
        return self._digits

    def sample_canvases(self, rng: np.random.Generator, indices: np.ndarray) -> CanvasBatch:
        digits = self.digits
        return make_canvases(rng, digits.images, digits.labels, indices, self.task.canvas_size,
                             self.task.n_clutter, self.task.centred_digit, self.task.n_digits)

    def check_canvases(self, images, labels, batch: int) -> tuple[np.ndarray, np.ndarray]:
        size = self.task.canvas_size
        images, labels = np.asarray(images), np.asarray(labels)
        if images.shape != (batch, size, size) or images.dtype != np.uint8:
            raise ValueError(f"canvases must be uint8 of shape {(batch, size, size)}, got {images.dtype} {images.shape}")
        shape = (batch,) if self.task.n_digits == 1 else (batch, self.task.n_digits)
        if labels.shape != shape or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"labels must be integers of shape {shape}, got {labels.dtype} {labels.shape}")
        if np.any((labels < 0) | (labels > 9)):
            raise ValueError("labels must be in 0..9")
        return images, labels.astype(np.int64)

    @staticmethod
    def first_locations(rng: np.random.Generator, batch: int, how) -> np.ndarray:
        if isinstance(how, str):
            if how == "centre":
                return np.zeros((batch, 2), np.float32)
            if how == "random":
                return rng.uniform(-1.0, 1.0, size=(batch, 2)).astype(np.float32)
            raise ValueError(f"first_location must be 'random', 'centre' or an array of locations, got {how!r}")
        locations = np.asarray(how, dtype=np.float32).reshape(-1, 2)
        if locations.shape[0] == 1:
            locations = np.repeat(locations, batch, axis=0)
        if locations.shape != (batch, 2) or np.any(np.abs(locations) > 1) or not np.all(np.isfinite(locations)):
            raise ValueError(f"first_location array must be ({batch}, 2) within [-1, 1], got {locations.shape}")
        return locations

    def start(self, canvases: np.ndarray, labels: np.ndarray, digit_xy: np.ndarray | None,
              first_locations: np.ndarray) -> np.ndarray:
        """Begin episodes on ``canvases``; returns the first glimpses (B, k, g, g) float32."""
        self.canvases, self.labels = canvases, labels
        self.digit_xy = digit_xy
        self._ii = integral_images(torch.from_numpy(canvases))
        self.locations, self.t = [], 0
        return self.look(first_locations)

    def look(self, locations: np.ndarray) -> np.ndarray:
        """Take the next glimpse of every episode at ``locations`` (B, 2)."""
        glimpses = extract_glimpses(self._ii, torch.from_numpy(locations), self.task.glimpse_size, self.task.n_scales)
        self.locations.append(locations)
        self.t += 1
        return glimpses.numpy()

    def rewards(self, labels: np.ndarray) -> np.ndarray:
        """(B,) float64: 1 where the canvas was read right (every digit of it), else 0."""
        right = labels == self.labels
        return (right if right.ndim == 1 else right.all(-1)).astype(np.float64)

    @property
    def finished(self) -> bool:
        return self.t >= self.task.episode_length

    def path(self) -> np.ndarray:
        """(B, t, 2) locations of the glimpses taken so far."""
        return np.stack(self.locations, axis=1)
