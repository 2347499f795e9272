"""A RAM episode through the (vector) environment: the agent acts with ``step``, the env
returns glimpses, the reward and, at the end, the label."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from glimpse.models.ram import RecurrentAttentionModel
from glimpse.models.ram.location import LocationPolicy


class Rollout(NamedTuple):
    """For B episodes of T glimpses: ``logits`` (B, C) after the last glimpse; ``reward`` (B,)
    and ``labels`` (B,) from the env; ``log_probs`` and ``baselines`` (B, T-1) for the T-1
    chosen locations; ``locations`` (B, T, 2) where each glimpse was taken; ``glimpses``
    (B, T, k, g, g) if recorded, else None."""

    logits: torch.Tensor
    reward: torch.Tensor
    labels: torch.Tensor
    log_probs: torch.Tensor
    baselines: torch.Tensor
    locations: torch.Tensor
    glimpses: torch.Tensor | None


def run_episodes(model: RecurrentAttentionModel, env, *, sample: bool, generator: torch.Generator | None = None,
                 seed: int | None = None, options: dict | None = None, record_glimpses: bool = False) -> Rollout:
    """Play one episode in each of the env's ``num_envs`` slots.

    ``sample=True`` draws locations from the Gaussian policy (training); ``False`` follows its
    mean (deterministic evaluation).
    """
    observation, _ = env.reset(seed=seed, options=options)
    n_glimpses = env.task.n_glimpses
    state = model.initial_state(env.num_envs)
    log_probs, baselines, locations, glimpses = [], [], [], []
    for t in range(n_glimpses):
        glimpse = torch.from_numpy(observation["glimpse"])
        location = torch.from_numpy(observation["location"])
        locations.append(location)
        if record_glimpses:
            glimpses.append(glimpse)
        out = model(glimpse, location, state)
        state = out.state
        if t < n_glimpses - 1:
            next_location = LocationPolicy.sample(out.mean, out.std, generator) if sample else out.mean.detach()
            log_probs.append(LocationPolicy.log_prob(out.mean, out.std, next_location))
            baselines.append(out.baseline)
        else:  # the final step's location is never looked at
            next_location = out.mean.detach()
        action = {"location": next_location.clamp(-1.0, 1.0).numpy(), "label": out.logits.argmax(-1).numpy()}
        observation, reward, terminated, truncated, info = env.step(action)
    assert terminated.all(), "the environment must end every episode after n_glimpses steps"
    empty = out.logits.new_zeros(env.num_envs, 0)
    return Rollout(
        logits=out.logits,
        reward=torch.from_numpy(np.asarray(reward, dtype=np.float32)),
        labels=torch.from_numpy(info["label"]),
        log_probs=torch.stack(log_probs, 1) if log_probs else empty,
        baselines=torch.stack(baselines, 1) if baselines else empty,
        locations=torch.stack(locations, 1),
        glimpses=torch.stack(glimpses, 1) if record_glimpses else None,
    )
