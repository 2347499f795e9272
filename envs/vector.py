"""N cluttered-MNIST episodes stepped together with array operations: what training uses.

Same protocol as :class:`envs.cluttered_mnist.ClutteredMNISTEnv`, for ``num_envs`` episodes
at once, with no per-episode Python loop. All episodes have T steps, so they end together;
``autoreset_mode`` is NEXT_STEP: the step after the final one resets every episode and
ignores its actions (calling ``reset`` yourself, as the trainer does, is equivalent).
Observations and rewards are numpy arrays (views of torch tensors, no copy).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from envs.episodes import EpisodeBatch
from envs.spaces import action_space, check_action, observation_space
from envs.task import GlimpseTask


class ClutteredMNISTVectorEnv(VectorEnv):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 2, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, render_mode: str | None = None, **task_kwargs):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.task = GlimpseTask(**task_kwargs)
        self.num_envs = num_envs
        self.render_mode = render_mode
        self.single_observation_space = observation_space(self.task)
        self.single_action_space = action_space(self.task)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.episodes = EpisodeBatch(self.task)
        self._needs_reset = True
        self._started = False

    @property
    def data_source(self) -> str:
        self.episodes.digits  # noqa: B018 - loads the data and sets its source
        return self.episodes.data_source

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Options: ``indices`` (num_envs,) digits of the split to place (default: uniform draws),
        or explicit ``images`` (num_envs, H, W) uint8 with ``labels``; ``first_location`` as in
        the single env ("random", "centre", or locations of shape (2,) or (num_envs, 2))."""
        super().reset(seed=seed)
        options = dict(options or {})
        n = self.num_envs
        first = self.episodes.first_locations(self.np_random, n, options.pop("first_location", self.task.first_location))
        if "images" in options:
            images, labels = self.episodes.check_canvases(options.pop("images"), options.pop("labels", None), n)
            digit_xy = None
        else:
            size = len(self.episodes.digits)
            indices = options.pop("indices", None)
            if indices is None:
                indices = self.np_random.integers(0, size, size=n)
            indices = np.asarray(indices)
            if indices.shape != (n,) or not np.issubdtype(indices.dtype, np.integer) or np.any((indices < 0) | (indices >= size)):
                raise ValueError(f"indices must be {n} integers in 0..{size - 1}, got {indices.dtype} {indices.shape}")
            batch = self.episodes.sample_canvases(self.np_random, indices)
            images, labels, digit_xy = batch.images, batch.labels, batch.digit_xy
        if options:
            raise ValueError(f"unknown reset options {sorted(options)}")
        glimpses = self.episodes.start(images, labels, digit_xy, first)
        self._needs_reset, self._started = False, True
        self._last_observation = {"glimpse": glimpses, "location": first}
        return self._last_observation, {}

    def step(self, actions):
        if not self._started:
            raise RuntimeError("step() before reset(): call reset() first")
        location, label = check_action(actions, batch=self.num_envs, n_digits=self.task.n_digits)
        n = self.num_envs
        not_done = np.zeros(n, dtype=bool)
        if self._needs_reset:  # NEXT_STEP autoreset: this step only starts new episodes
            observation, info = self.reset()
            return observation, np.zeros(n), not_done, not_done.copy(), info
        if not self.episodes.finished:
            glimpses = self.episodes.look(location)
            self._last_observation = {"glimpse": glimpses, "location": location}
            return self._last_observation, np.zeros(n), not_done, not_done.copy(), {}
        self._needs_reset = True
        reward = self.episodes.rewards(label)
        all_ = np.ones(n, dtype=bool)
        info = {"label": self.episodes.labels.copy(), "_label": all_.copy()}
        if self.episodes.digit_xy is not None:
            info["digit_xy"], info["_digit_xy"] = self.episodes.digit_xy.copy(), all_.copy()
        return self._last_observation, reward, all_, not_done, info

    def render(self):
        """A tuple of (H, W, 3) frames, one per episode: canvas, glimpse boxes, path so far."""
        if self.render_mode != "rgb_array":
            return None
        if self.episodes.canvases is None:
            raise RuntimeError("render() before reset()")
        from envs.render import draw_glimpse_path

        path = self.episodes.path()
        return tuple(
            np.ascontiguousarray(draw_glimpse_path(canvas, p, self.task.glimpse_size, self.task.n_scales).transpose(1, 2, 0))
            for canvas, p in zip(self.episodes.canvases, path)
        )
