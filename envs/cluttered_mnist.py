"""One cluttered-MNIST glimpse episode as a Gymnasium env (docs/environments.md has the protocol).

Episode: ``reset`` shows glimpse 1 at the env's first location; each ``step`` takes
``{"location", "label"}``: steps 1..T-1 return the glimpse at the new location, step T
judges the label (reward 1 if right, else 0), terminates, and reveals the true label in
``info["label"]``. The location of step T is not looked at. With several digits per canvas
(``n_digits`` > 1) the label is one class per digit in reading order (left to right, then top
to bottom), and the reward is 1 only when every digit is right.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

import torch

from envs.engine import EpisodeEngine, as_tensor
from envs.spaces import action_space, check_action, observation_space
from envs.seeding import seed_engine, unchanged_on_error
from envs.task import GlimpseTask


class ClutteredMNISTEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 2}

    def __init__(self, render_mode: str | None = None, device: torch.device | str = "cpu", **task_kwargs):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.task = GlimpseTask(**task_kwargs)
        self.render_mode = render_mode
        self.observation_space = observation_space(self.task)
        self.action_space = action_space(self.task)
        self._episodes = EpisodeEngine(self.task, device)
        self._generator_seeded = False
        self._active = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Options: ``first_location`` ("random", "centre" or an (x, y) pair), or an explicit
        ``canvas`` ((H, W) uint8) with its ``label`` (one per digit), or a digit ``index`` into the
        split (the first digit placed, at a random place: with several digits not necessarily the first
        in reading order; the others are drawn from the env's generator)."""
        with unchanged_on_error(self, self._episodes.generator):
            return self._reset(seed, dict(options or {}))

    def _reset(self, seed: int | None, options: dict):
        super().reset(seed=seed)
        engine = self._episodes
        seed_engine(self, engine.generator, seed)
        how = options.pop("first_location", self.task.first_location)
        first = engine.first_locations(1, how if how is None or isinstance(how, str) else _pair(how))
        if "canvas" in options:
            if "label" not in options:
                raise ValueError("reset option 'canvas' needs its 'label' (one per digit), to judge the answer by")
            label = np.asarray(options.pop("label"))
            images, labels = engine.user_canvases(np.asarray(options.pop("canvas"))[None], label[None], 1)
            digit_xy = None
        else:
            index = options.pop("index", None)
            if index is not None and (isinstance(index, bool) or not isinstance(index, (int, np.integer))):
                raise ValueError(f"index must be an integer (a digit of the {self.task.split} split), "
                                 f"got {type(index).__name__} {index!r}")
            if index is not None and not 0 <= index < len(engine.bank):
                raise ValueError(f"index {index!r} outside the {self.task.split} split (0..{len(engine.bank) - 1})")
            batch = engine.sample_canvases(engine.digit_indices(None if index is None else [index], 1))
            images, labels, digit_xy = batch.images, batch.labels, batch.digit_xy
        if options:
            raise ValueError(f"unknown reset options {sorted(options)}")
        glimpses = engine.start(images, labels, digit_xy, first)
        self._active = True
        return self._observation(glimpses[0].cpu().numpy(), first[0].cpu().numpy()), {}

    def step(self, action):
        if not self._active:
            raise RuntimeError("step() called on a finished or never-started episode: call reset() first")
        location, label = check_action(action, n_digits=self.task.n_digits)
        engine = self._episodes
        if engine.t < self.task.episode_length:
            glimpse = engine.look(as_tensor(location[None], engine.device))[0]
            observation = self._observation(glimpse.cpu().numpy(), location)
            return observation, 0.0, False, False, {}
        # final step: judge the label; the observation repeats the last glimpse
        self._active = False
        true_label = engine.labels[0].cpu().numpy()
        reward = float(engine.rewards(as_tensor(label[None], engine.device))[0])
        info = {"label": int(true_label) if true_label.ndim == 0 else true_label.copy()}
        if engine.digit_xy is not None:
            info["digit_xy"] = engine.digit_xy[0].cpu().numpy()
        final = {key: value.copy() for key, value in self._last_observation.items()}  # not step T-1's arrays
        return final, reward, True, False, info

    def _observation(self, glimpse: np.ndarray, location: np.ndarray) -> dict:
        # copies: the engine keeps the path (for render) in memory a user's in-place edit must not reach
        self._last_observation = {"glimpse": glimpse, "location": np.array(location, dtype=np.float32)}
        if self._episodes.context is not None:  # the same view all episode, a fresh copy each step
            self._last_observation["context"] = self._episodes.context[0].cpu().numpy().copy()
        return self._last_observation

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        if self._episodes.canvases is None:
            raise RuntimeError("render() before reset()")
        from envs.render import draw_glimpse_path

        frame = draw_glimpse_path(self._episodes.canvases[0].cpu().numpy(), self._episodes.path()[0].cpu().numpy(),
                                  self.task.glimpse_size, self.task.n_scales)
        return np.ascontiguousarray(frame.transpose(1, 2, 0))  # Gymnasium frames are (H, W, 3)


def _pair(how) -> np.ndarray:
    """An explicit first location as (1, 2) float32, or a ValueError that says what was expected."""
    try:
        return np.asarray(how, np.float32).reshape(1, 2)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"first_location must be 'random', 'centre' or an (x, y) pair in [-1, 1], "
                         f"got {type(how).__name__} {how!r}") from exc
