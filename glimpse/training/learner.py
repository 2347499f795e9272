"""What the training loop needs from a kind of model: one minibatch's loss, and pictures.

The loop (glimpse/training/loop.py) owns everything that is the same for hard and soft
attention: data order, optimiser, schedule, validation, checkpoints, logging.
"""
from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import torch
from torch import nn

from glimpse.data import MNISTSplits
from glimpse.training.config import TrainConfig

TASK_KEYS = ("canvas_size", "n_clutter", "centred_digit", "glimpse_size", "n_scales", "n_glimpses", "first_location")


def task_of(config: TrainConfig) -> dict:
    """The canvas recipe and sensor: stored in checkpoints, checked against evaluation images.
    ``n_digits`` appears only when it is above 1, so single-digit tasks keep the keys every
    earlier checkpoint has (readers use ``task.get("n_digits", 1)``)."""
    task = {key: getattr(config, key) for key in TASK_KEYS}
    if config.n_digits > 1:
        task["n_digits"] = config.n_digits
    return task


def local_batch_size(config: TrainConfig, world_size: int) -> int:
    """This process's share of the global --batch-size."""
    if config.batch_size % world_size:
        raise ValueError(f"--batch-size {config.batch_size} (the global batch) must be divisible by the "
                         f"number of processes, {world_size}")
    return config.batch_size // world_size


def cosine(progress: float) -> float:
    """1 at the start of the run (progress 0), 0 at its end (progress 1), half a cosine between."""
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, max(0.0, progress))))


class Learner(Protocol):
    kind: str
    model: nn.Module
    forward: nn.Module  # what ``loss`` calls: the model, or a DistributedDataParallel wrapper of it
    model_config: dict
    task: dict

    def loss(self, indices: np.ndarray, step_seed: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Loss of the minibatch of training digits ``indices``; all its randomness from ``step_seed``.
        ``indices`` is the global minibatch; with several processes each takes its own slice.
        Returns the scalar to minimise and detached metrics named TensorBoard-style."""

    def schedule(self, progress: float) -> dict[str, float]:
        """Set what changes over the run at ``progress`` (step / scheduled steps, 0..1) besides the
        learning rate; returns those values as scalars to log (TensorBoard names)."""

    def pictures(self, images: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
        """(3, H, W) uint8 images showing where the model looks on these canvases."""


def make_learner(config: TrainConfig, data: MNISTSplits, device: torch.device | str = "cpu",
                 rank: int = 0, world_size: int = 1) -> Learner:
    """The learner for ``config.mode`` with its model on ``device``; with ``world_size`` > 1 it
    trains on slice ``rank`` of each global minibatch."""
    if config.mode == "hard":
        from glimpse.training.hard import HardAttentionLearner

        return HardAttentionLearner(config, data, device, rank, world_size)
    from glimpse.training.soft import SoftAttentionLearner  # also trains the full-image baselines

    return SoftAttentionLearner(config, data, device, rank, world_size)
