"""What the training loop needs from a way of learning: one minibatch's loss, and pictures.

The loop (glimpse/training/loop.py) owns everything that is the same for every family: data
order, optimiser, schedule, validation, checkpoints, logging. A learner is chosen by the family's
``mode``: REINFORCE through the environment (hard.py) or backpropagation (soft.py, which also
trains the full-image baselines).
"""
from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from torch import nn

from envs.data import MNISTSplits
from envs.engine import CanvasBatch, DigitBank, indexed_device, make_canvases
from glimpse.inference import first_canvases_draws
from glimpse.models import Family
from glimpse.training.config import TrainConfig
from glimpse.viz import grid, where_it_looks

N_PICTURE_COLUMNS = 4


def local_batch_size(batch_size: int, world_size: int) -> int:
    """This process's share of the global --batch-size."""
    if batch_size % world_size:
        raise ValueError(f"--batch-size {batch_size} (the global batch) must be divisible by the "
                         f"number of processes, {world_size}")
    return batch_size // world_size


def pins_host_memory(device: torch.device) -> bool:
    """Whether copies to ``device`` go through pinned host memory: to a GPU, when one is there
    (pinning needs the GPU itself)."""
    return device.type == "cuda" and torch.cuda.is_available()


def host_to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """``array`` on ``device``. To a GPU through pinned memory: from pageable memory the copy
    would wait for the GPU even with non_blocking=True; pinned, it overlaps the step before."""
    host = torch.from_numpy(np.ascontiguousarray(array))
    if pins_host_memory(device):
        host = host.pin_memory()
    return host.to(device, non_blocking=True)


def training_canvases(bank: DigitBank, generator: torch.Generator, indices: np.ndarray, task: dict) -> CanvasBatch:
    """The canvases of the global minibatch ``indices`` (digits of ``bank``), drawn by the task's
    recipe on the bank's device from ``generator`` (seeded by the step)."""
    return make_canvases(generator, bank, host_to_device(indices, bank.device),
                         task["canvas_size"], task["n_clutter"], task["centred_digit"], task.get("n_digits", 1))


class LearnerSetup:
    """What every learner sets up alike: this process's share of the global batch, the task, the
    family's model on ``device``, the training digits moved there once, and the generator every
    step reseeds (all of a step's randomness comes from it)."""

    def __init__(self, config: TrainConfig, data: MNISTSplits, device: torch.device | str = "cpu",
                 rank: int = 0, world_size: int = 1):
        self.config, self.device, self.rank, self.world_size = config, indexed_device(device), rank, world_size
        self.local_batch = local_batch_size(config.batch_size, world_size)
        self.family = config.family
        self.task = config.task()
        self.model_config = self.family.model_config(config)
        self.model = self.family.build(self.model_config)  # built on the CPU: the same initial weights everywhere
        if any(p.device != self.device for p in self.model.parameters()):  # (a model built on its device stays:
            self.model.to(self.device)  # Module.to cannot run under FakeTensorMode, tests/test_fake_cuda.py)
        if config.compile != "off":  # each part, in place: an episode calls the parts step by step
            for part in self.model.children():
                part.compile(mode=config.compile)
        self.forward = self.model  # the loop may swap in a DistributedDataParallel wrapper
        self.train_digits = DigitBank.of(data.train, self.device)
        self.generator = torch.Generator(self.device)

    def schedule(self, progress: float) -> dict[str, float]:
        """What the family changes over the run besides the learning rate (a policy's std)."""
        return self.family.schedule(self.model, self.config, progress)


class Learner(Protocol):
    family: Family
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


@torch.no_grad()
def pictures(learner: Learner, images: np.ndarray, labels: np.ndarray, set_size: int | None = None
             ) -> dict[str, np.ndarray]:
    """Where the model looks on these canvases, the first of a set of ``set_size`` (default: these),
    as validation looks at them there (the same random first glimpses), titled with the true and
    predicted labels, as one TensorBoard image (none for a full-image network)."""
    if not learner.family.has_attention:
        return {}
    learner.model.eval()
    draws = first_canvases_draws(learner.family, learner.model, learner.task, len(images), set_size or len(images))
    drawn = where_it_looks(learner.family, learner.model, learner.task, images, labels, draws=draws)
    learner.model.train()
    columns = 2 if drawn[0].shape[2] > 2 * drawn[0].shape[1] else N_PICTURE_COLUMNS
    return {"attention/where_it_looks": grid(drawn, columns=columns)}
