"""Batched prediction for every registered family on plain canvases: used by validation,
evaluate.py, finding (did it find the digit) and the report, so that all of them score models the same way."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

from glimpse.models import Family, Look, get_family


def read_right(predictions, labels):
    """Predicted and true digits, (N,) or (N, K) for K digits per canvas (numpy or torch) -> (N,)
    bool: a canvas counts as read right only when every one of its digits is."""
    right = predictions == labels
    return right.all(-1) if right.ndim == 2 else right


def _rows(draws: dict | None, part: slice) -> dict | None:
    return None if draws is None else {name: value[part] for name, value in draws.items()}


def first_canvases_draws(family: Family, model: nn.Module, task: dict, n: int, set_size: int,
                         seed: int = 0) -> dict | None:
    """The randomness a deterministic :func:`looks` over a whole set of ``set_size`` canvases gives its
    first ``n`` (random first glimpses, drawn once for the set): pictures of a set's first canvases then
    show the trajectories its scores came from."""
    return _rows(family.evaluation_draws(model, task, set_size, seed, False), slice(0, n))


@torch.no_grad()
def looks(family: Family, model: nn.Module, task: dict, images: np.ndarray, batch_size: int = 500,
          n_samples: int = 0, seed: int = 0) -> Iterator[tuple[slice, list[Look]]]:
    """The family's reading of (N, H, W) uint8 canvases, batch by batch: yields (the batch's
    slice of ``images``, one :class:`Look` per trajectory).

    One deterministic trajectory (a hard model follows its policy mean) unless ``n_samples`` > 0:
    then that many sampled ones. Trajectory k draws its randomness for the whole set from seed + k
    (``Family.evaluation_draws``: where a random first glimpse falls, the noise of each sampled
    location), so no result depends on ``batch_size``.
    """
    model.eval()
    n_trajectories = max(n_samples, 1)
    draws = [family.evaluation_draws(model, task, len(images), seed + k, n_samples > 0) for k in range(n_trajectories)]
    for start in range(0, len(images), batch_size):
        part = slice(start, start + batch_size)
        yield part, [family.run(model, images[part], task, draws=_rows(d, part), sample=n_samples > 0) for d in draws]


@torch.no_grad()
def predict_probabilities(arch: str, model: nn.Module, task: dict, images: np.ndarray, batch_size: int = 500,
                          n_samples: int = 0, seed: int = 0, progress=None) -> torch.Tensor:
    """Class probabilities (N, C) for (N, H, W) uint8 canvases; (N, K, C) for a model that reads K digits.

    Hard models follow the policy mean (deterministic) unless ``n_samples`` > 0, in which case
    the probabilities of that many sampled trajectories are averaged (reported as such); see
    :func:`looks` for how they are seeded.
    """
    outputs = []
    for _, trajectories in looks(get_family(arch), model, task, images, batch_size, n_samples, seed):
        probs = sum(torch.softmax(look.logits, -1) for look in trajectories) / len(trajectories)
        outputs.append(probs.cpu())
        if progress is not None:
            progress.update(len(probs))
    return torch.cat(outputs)
