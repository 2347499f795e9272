"""N cluttered-MNIST episodes stepped together on one device: what training uses.

Same protocol as :class:`envs.cluttered_mnist.ClutteredMNISTEnv`, for ``num_envs`` episodes at
once, run by the torch engine (:class:`envs.engine.EpisodeEngine`) on ``device``. Observations,
rewards, flags and infos are torch tensors on that device; actions may be tensors or arrays.
Wrap it in :class:`TorchToNumpy` for tools that want numpy (Gymnasium's vector wrappers, such
as ``RecordEpisodeStatistics``, among them). All episodes have T steps, so they
end together; ``autoreset_mode`` is NEXT_STEP: the step after the final one resets every episode
and ignores its actions (calling ``reset`` yourself, as the trainer does, is equivalent).

``validate=False`` skips the checks that read actions and reset inputs on the host (a sync per
step on a GPU); shapes and dtypes are still checked. The trainer sets it: its actions are valid
by construction, and then an episode runs from reset to the last step without leaving the device.
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from envs.engine import EpisodeEngine, indexed_device
from envs.spaces import action_space, check_batched_action, observation_space
from envs.seeding import seed_engine, unchanged_on_error
from envs.task import GlimpseTask


class ClutteredMNISTVectorEnv(VectorEnv):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 2, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, render_mode: str | None = None, device: torch.device | str = "cpu",
                 validate: bool = True, **task_kwargs):
        if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        num_envs = int(num_envs)  # numpy integers too
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.task = GlimpseTask(**task_kwargs)
        self.num_envs = num_envs
        self.render_mode = render_mode
        self.device = indexed_device(device)
        self.validate = validate
        self.single_observation_space = observation_space(self.task)
        self.single_action_space = action_space(self.task)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.engine = EpisodeEngine(self.task, device)  # it names a missing GPU as the user spelled it
        self._generator_seeded = False
        self._needs_reset = True
        self._started = False

    @property
    def data_source(self) -> str:
        self.engine.bank  # noqa: B018 - loads the data and sets its source
        return self.engine.data_source

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Options: ``indices`` (num_envs,) digits of the split to place (default: uniform draws),
        or explicit ``images`` (num_envs, H, W) uint8 with ``labels``; ``first_location`` as in
        the single env ("random", "centre", or locations of shape (2,) or (num_envs, 2)).
        Arrays or tensors; tensors already on the env's device are used without a copy."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ValueError(f"seed must be one integer, which seeds all {self.num_envs} episodes "
                             f"(Gymnasium's list of seeds, one per env, does not apply), got {seed!r}")
        with unchanged_on_error(self, self.engine.generator):
            return self._reset(None if seed is None else int(seed), dict(options or {}))

    def _reset(self, seed: int | None, options: dict):
        super().reset(seed=seed)
        seed_engine(self, self.engine.generator, seed)
        n, engine = self.num_envs, self.engine
        first = engine.first_locations(n, options.pop("first_location", self.task.first_location), self.validate)
        if "images" in options:
            if "labels" not in options:
                raise ValueError("reset option 'images' needs its 'labels' (one per digit), to judge the answers by")
            images, labels = engine.user_canvases(options.pop("images"), options.pop("labels"), n, self.validate)
            digit_xy = None
        else:
            batch = engine.sample_canvases(engine.digit_indices(options.pop("indices", None), n, self.validate))
            images, labels, digit_xy = batch.images, batch.labels, batch.digit_xy
        if "reset_mask" in options:
            raise ValueError("reset option 'reset_mask' does not apply: all episodes end together, so a reset "
                             "restarts all of them")
        if options:
            raise ValueError(f"unknown reset options {sorted(options)}")
        glimpses = engine.start(images, labels, digit_xy, first)
        self._needs_reset, self._started = False, True
        self._last_observation = self._observation(glimpses, first)
        return self._last_observation, {}

    def step(self, actions):
        if not self._started:
            raise RuntimeError("step() before reset(): call reset() first")
        n, engine = self.num_envs, self.engine
        not_done = torch.zeros(n, dtype=torch.bool, device=self.device)
        no_reward = torch.zeros(n, device=self.device)
        if self._needs_reset:  # NEXT_STEP autoreset: this step only starts new episodes, its actions unread
            observation, info = self.reset()
            return observation, no_reward, not_done, not_done.clone(), info
        location, label = check_batched_action(actions, n, self.task.n_digits, self.device, self.validate)
        if not engine.finished:
            self._last_observation = self._observation(engine.look(location), location)
            return self._last_observation, no_reward, not_done, not_done.clone(), {}
        self._needs_reset = True
        reward = engine.rewards(label)
        every = torch.ones(n, dtype=torch.bool, device=self.device)
        info = {"label": engine.labels.clone(), "_label": every.clone()}
        if engine.digit_xy is not None:
            info["digit_xy"], info["_digit_xy"] = engine.digit_xy.clone(), every.clone()
        final = {key: value.clone() for key, value in self._last_observation.items()}  # not step T-1's tensors
        return final, reward, every, not_done, info

    def _observation(self, glimpses: torch.Tensor, locations: torch.Tensor) -> dict:
        # a copy of the locations: the engine keeps them (the path render draws), out of a user's in-place reach
        observation = {"glimpse": glimpses, "location": locations.clone()}
        if self.engine.context is not None:  # the same view all episode, a fresh copy each step (Gymnasium's rule)
            observation["context"] = self.engine.context.clone()
        return observation

    def render(self):
        """A tuple of (H, W, 3) frames, one per episode: canvas, glimpse boxes, path so far."""
        if self.render_mode != "rgb_array":
            return None
        if self.engine.canvases is None:
            raise RuntimeError("render() before reset()")
        from envs.render import draw_glimpse_path

        path = self.engine.path().cpu().numpy()
        return tuple(
            np.ascontiguousarray(draw_glimpse_path(canvas, p, self.task.glimpse_size, self.task.n_scales).transpose(1, 2, 0))
            for canvas, p in zip(self.engine.canvases.cpu().numpy(), path)
        )


def _to_numpy(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {key: _to_numpy(v) for key, v in value.items()}
    return value


class TorchToNumpy(VectorWrapper):
    """The vector env for tools that want numpy: observations, rewards, flags and infos come back
    as numpy arrays on the host (one copy per step from the device); actions may be numpy."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        observation, info = self.env.reset(seed=seed, options=options)
        return _to_numpy(observation), _to_numpy(info)

    def step(self, actions):
        return tuple(_to_numpy(part) for part in self.env.step(actions))
