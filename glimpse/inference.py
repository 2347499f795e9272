"""Batched prediction for every model kind on plain canvases: used by validation, evaluate.py
and the report, so that all of them score models the same way."""
from __future__ import annotations

from collections.abc import Iterator

import gymnasium
import numpy as np
import torch
from torch import nn

from envs.episodes import EpisodeBatch
from envs.task import GlimpseTask
from envs.vector import ClutteredMNISTVectorEnv
from glimpse.rollout import Rollout, run_episodes


def read_right(predictions, labels):
    """Predicted and true digits, (N,) or (N, K) for K digits per canvas (numpy or torch) -> (N,)
    bool: a canvas counts as read right only when every one of its digits is."""
    right = predictions == labels
    return right.all(-1) if right.ndim == 2 else right


def canvases_to_tensor(images: np.ndarray) -> torch.Tensor:
    """(N, H, W) uint8 -> (N, 1, H, W) float32 in [0, 1]."""
    return torch.from_numpy(np.ascontiguousarray(images)).unsqueeze(1).float().div_(255.0)


def hard_env(task: dict, num_envs: int) -> ClutteredMNISTVectorEnv:
    """A vector env that will be fed explicit canvases (no digits are loaded)."""
    env = gymnasium.make_vec("glimpse/ClutteredMNIST60-v0", num_envs=num_envs,
                             vectorization_mode="vector_entry_point", **task)
    return env


def ram_episodes(model: nn.Module, task: dict, images: np.ndarray, labels: np.ndarray | None = None, *,
                 sample: bool = False, generator: torch.Generator | None = None,
                 record_glimpses: bool = False, first_locations: np.ndarray | None = None,
                 location_noise: torch.Tensor | None = None) -> Rollout:
    """One RAM episode per canvas, through the env (``labels`` only matter for the reward).

    ``first_locations`` (N, 2) overrides where the first glimpses fall; by default the task's
    rule applies ("random" ones drawn from seed 0). ``location_noise`` (N, T-1, 2), if given, is
    the standard normal noise of each sampled location, step by step, instead of ``generator``."""
    env = hard_env(task, len(images))
    labels = env.task.blank_labels(len(images)) if labels is None else np.asarray(labels, np.int64)
    options = {"images": images, "labels": labels}
    if first_locations is not None:
        options["first_location"] = first_locations
    noise = None
    if location_noise is not None:
        steps = iter(location_noise.unbind(1))

        def noise(mean: torch.Tensor) -> torch.Tensor:  # called once per sampled step, in order
            return next(steps).to(mean.device, mean.dtype)
    return run_episodes(model, env, sample=sample, generator=generator, seed=0, options=options,
                        record_glimpses=record_glimpses, noise=noise)


def first_glimpses(task: dict, n: int, seed: int) -> np.ndarray | None:
    """Where the first glimpses of ``n`` evaluation canvases fall, drawn once for the whole set so
    that a task with random first glimpses scores the same at any batch size (None: the centre)."""
    if task.get("first_location", "centre") != "random":
        return None
    return EpisodeBatch.first_locations(np.random.default_rng(seed), n, "random")


def ram_trajectories(model: nn.Module, task: dict, images: np.ndarray, batch_size: int = 500, n_samples: int = 0,
                     seed: int = 0) -> Iterator[tuple[slice, list[Rollout]]]:
    """RAM's evaluation episodes over (N, H, W) uint8 canvases, batch by batch: yields (the
    batch's slice of ``images``, one Rollout per trajectory).

    One deterministic trajectory (the policy mean) unless ``n_samples`` > 0: then that many
    sampled ones. Trajectory k draws its randomness for the whole set from seed + k (where a
    random first glimpse falls, the noise of each sampled location, the random-glimpse
    baseline's locations), so no result depends on ``batch_size``.
    """
    model.eval()
    n_trajectories = max(n_samples, 1)
    draws_locations = n_samples > 0 or getattr(model.config, "policy", "learned") == "random"
    firsts = [first_glimpses(task, len(images), seed + k) for k in range(n_trajectories)]
    steps = GlimpseTask(**task).episode_length
    noises = [torch.randn((len(images), steps - 1, 2), generator=torch.Generator().manual_seed(seed + k))
              if draws_locations else None for k in range(n_trajectories)]
    for start in range(0, len(images), batch_size):
        part = slice(start, start + batch_size)
        yield part, [ram_episodes(model, task, images[part], sample=n_samples > 0,
                                  first_locations=None if first is None else first[part],
                                  location_noise=None if noise is None else noise[part])
                     for first, noise in zip(firsts, noises)]


@torch.no_grad()
def predict_probabilities(kind: str, model: nn.Module, task: dict, images: np.ndarray, batch_size: int = 500,
                          n_samples: int = 0, seed: int = 0, progress=None) -> torch.Tensor:
    """Class probabilities (N, C) for (N, H, W) uint8 canvases; (N, K, C) for a model that reads K digits.

    Hard models follow the policy mean (deterministic) unless ``n_samples`` > 0, in which case
    the probabilities of that many sampled trajectories are averaged (reported as such); see
    :func:`ram_trajectories` for how they are seeded.
    """
    model.eval()
    device = next(model.parameters()).device
    if kind == "ram":
        batches = (sum(torch.softmax(rollout.logits, -1) for rollout in rollouts) / len(rollouts)
                   for _, rollouts in ram_trajectories(model, task, images, batch_size, n_samples, seed))
    else:
        batches = (torch.softmax(model(canvases_to_tensor(images[start:start + batch_size]).to(device))["logits"], -1)
                   for start in range(0, len(images), batch_size))
    outputs = []
    for probs in batches:
        outputs.append(probs.cpu())
        if progress is not None:
            progress.update(len(probs))
    return torch.cat(outputs)
