"""Flat action and observation spaces for off-the-shelf RL agents (Stable-Baselines3, CleanRL).

Why: :class:`envs.cluttered_mnist.ClutteredMNISTEnv` takes a ``Dict`` action
``{"location": Box(-1, 1, (2,)), "label": Discrete(10)}`` (``MultiDiscrete([10] * K)`` with K
digits) and returns a ``Dict`` observation ``{"glimpse": Box(0, 1, (k, g, g)), "location":
Box(-1, 1, (2,))}``. Standard agents accept neither a ``Dict`` action space nor a mixed
continuous/discrete one, so :class:`FlatAction` re-encodes the action as one ``Box``:

=========================  =============================================================
flat action index          meaning
=========================  =============================================================
``[0:2]``                  the location (x, y) of the next glimpse, in [-1, 1]
``[2 + 10*d : 12 + 10*d]`` 10 class scores for digit d (reading order); argmax = label
=========================  =============================================================

so the flat action has shape ``(2 + 10 * K,)``, float32, bounds [-1, 1]. The label part is only
judged on the last step of an episode and the location part is ignored there (as in the env).

Observations: gymnasium's own :class:`gymnasium.wrappers.FlattenObservation` works on this env
(checked in tests/test_flat_action.py): it concatenates the ``Dict`` in key order, giving a
float32 vector of shape ``(k * g * g + 2,)`` = flattened glimpse, then location, with bounds
[0, 1] for the glimpse and [-1, 1] for the location (with a ``context_size`` s, the s * s coarse
view comes first: the keys sort as context, glimpse, location). :func:`make_flat` applies both wrappers::

    import envs
    from envs.flat_action import make_flat
    env_id = next(i for i, task in envs.ENV_IDS.items() if task == "mnist28")
    env = make_flat(env_id, data_dir="bundled")    # obs (66,), action (12,)

Two options make standard agents learn (measured in docs/environments.md):

- ``stack=T`` adds gymnasium's :class:`~gymnasium.wrappers.FrameStackObservation` (zero padding):
  the observation becomes the episode's last T flat observations, oldest first, so a memoryless
  (MLP) policy sees every glimpse and location so far, as the recurrent agents of ``glimpse/``
  remember them. Nothing else is shown.
- ``grid=N`` uses :class:`GridAction` instead of :class:`FlatAction`: a discrete action, the
  location as a point of an N x N grid over [-1, 1]^2 and the label as a class index, which
  suits agents with categorical policies (PPO, A2C, DQN-style) better than Gaussian class scores.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import FlattenObservation, FrameStackObservation

from envs.spaces import N_CLASSES

__all__ = ["FlatAction", "GridAction", "grid_points", "make_flat"]


class FlatAction(gym.ActionWrapper, gym.utils.RecordConstructorArgs):
    """Expose a cluttered-MNIST env's ``Dict`` action as a flat ``Box(-1, 1, (2 + 10 * K,), float32)``.

    ``action[:2]`` is the glimpse location; ``action[2:]``, reshaped to ``(K, 10)``, holds one row
    of class scores per digit (reading order) and the label of digit d is ``argmax`` of row d.
    The scores are only compared, so any scale works; the [-1, 1] bounds suit Gaussian policies.

    :meth:`action` raises ValueError for a wrong shape, NaN/inf, or a location outside [-1, 1]
    (clip first, e.g. with :class:`gymnasium.wrappers.ClipAction`; SB3 clips by itself).
    """

    def __init__(self, env: gym.Env):
        gym.utils.RecordConstructorArgs.__init__(self)  # lets env.spec.make() rebuild the wrapped env
        gym.ActionWrapper.__init__(self, env)
        self.n_digits = _digits_of(env.action_space, type(self).__name__)
        self.action_space = spaces.Box(-1.0, 1.0, (2 + N_CLASSES * self.n_digits,), np.float32)

    def action(self, action) -> dict:
        """Flat ``(2 + 10 * K,)`` action -> the env's ``{"location": (2,) float32, "label": ...}``.

        ``label`` is an int (K = 1) or an int64 array of shape (K,).
        """
        if hasattr(action, "detach"):  # torch tensors
            action = action.detach().cpu().numpy()
        flat = np.asarray(action)
        expected = self.action_space.shape
        if flat.shape != expected:
            hint = " (a batch? FlatAction wraps a single env; vectorise after wrapping)" if flat.ndim == 2 else ""
            raise ValueError(f"flat action must have shape {expected} = 2 location values + {N_CLASSES} scores "
                             f"for each of {self.n_digits} digit(s), got shape {flat.shape}{hint}")
        if not (np.issubdtype(flat.dtype, np.floating) or np.issubdtype(flat.dtype, np.integer)) \
                or flat.dtype == np.bool_:
            raise ValueError(f"flat action must be real numbers, got dtype {flat.dtype}")
        flat = flat.astype(np.float32, copy=False)
        if not np.all(np.isfinite(flat)):
            raise ValueError("flat action contains NaN or inf")
        location = flat[:2].copy()
        if np.any(np.abs(location) > 1.0):
            raise ValueError(f"flat action[:2] (the location) must lie in [-1, 1], got {location.tolist()}; "
                             "clip it first (gymnasium.wrappers.ClipAction)")
        labels = flat[2:].reshape(self.n_digits, N_CLASSES).argmax(axis=1).astype(np.int64)
        label = int(labels[0]) if self.n_digits == 1 else labels
        return {"location": location, "label": label}


def _digits_of(action_space, wrapper: str) -> int:
    """K, the digits an env's ``Dict`` action labels; TypeError for any other action space."""
    if not (isinstance(action_space, spaces.Dict) and set(action_space.spaces) == {"location", "label"}):
        raise TypeError(f"{wrapper} needs a Dict action space with 'location' and 'label', got {action_space}")
    label_space = action_space["label"]
    if isinstance(label_space, spaces.Discrete) and label_space.n == N_CLASSES:
        return 1
    if isinstance(label_space, spaces.MultiDiscrete) and label_space.nvec.ndim == 1 \
            and np.all(label_space.nvec == N_CLASSES):
        return len(label_space.nvec)
    raise TypeError(f"{wrapper} needs a Discrete({N_CLASSES}) or MultiDiscrete([{N_CLASSES}] * K) "
                    f"label space, got {label_space}")


def grid_points(grid: int) -> np.ndarray:
    """The ``(grid,)`` float32 coordinates a :class:`GridAction` index stands for: evenly spaced
    over [-1, 1] with both ends included (one point: the centre, 0)."""
    if isinstance(grid, bool) or not isinstance(grid, (int, np.integer)) or not 1 <= grid <= 64:
        raise ValueError(f"grid must be an integer in 1..64 (points per axis), got {grid!r}")
    return np.linspace(-1.0, 1.0, grid, dtype=np.float32) if grid > 1 else np.zeros(1, np.float32)


class GridAction(gym.ActionWrapper, gym.utils.RecordConstructorArgs):
    """Expose a cluttered-MNIST env's ``Dict`` action as ``MultiDiscrete([grid, grid] + [10] * K)``.

    ``action[0]`` and ``action[1]`` index x and y of the next glimpse on :func:`grid_points`
    (``grid`` points per axis over [-1, 1]); ``action[2 + d]`` is the class of digit d (reading
    order). As in the env, the label is judged on the last step only and the location is ignored
    there. :meth:`action` raises ValueError for a wrong shape or an index outside its range.
    """

    def __init__(self, env: gym.Env, grid: int = 5):
        gym.utils.RecordConstructorArgs.__init__(self, grid=grid)
        gym.ActionWrapper.__init__(self, env)
        self.n_digits = _digits_of(env.action_space, type(self).__name__)
        self.points = grid_points(grid)
        self.action_space = spaces.MultiDiscrete([grid, grid] + [N_CLASSES] * self.n_digits)

    def action(self, action) -> dict:
        """``(2 + K,)`` indices -> the env's ``{"location": (2,) float32, "label": ...}``."""
        if hasattr(action, "detach"):
            action = action.detach().cpu().numpy()
        index = np.asarray(action)
        if index.shape != self.action_space.shape:
            raise ValueError(f"grid action must have shape {self.action_space.shape} = x and y indices + a class "
                             f"for each of {self.n_digits} digit(s), got shape {index.shape}")
        if not np.issubdtype(index.dtype, np.integer) or np.any(index < 0) or np.any(index >= self.action_space.nvec):
            raise ValueError(f"grid action must hold integer indices below {self.action_space.nvec.tolist()}, "
                             f"got {index.tolist()}")
        location = self.points[index[:2]]
        labels = index[2:].astype(np.int64)
        return {"location": location, "label": int(labels[0]) if self.n_digits == 1 else labels}


def make_flat(env_id: str, *, grid: int | None = None, stack: int = 1, **kwargs) -> gym.Env:
    """``gymnasium.make(env_id, **kwargs)`` wrapped for flat agents.

    Observation: ``Box((k * g * g + 2,), float32)`` (flattened glimpse, then location; a context
    view, if the task has one, before both), or with
    ``stack=T`` > 1 ``Box((T, k * g * g + 2), float32)``: the last T of them, oldest first, zeros
    before the episode's first. Action: ``Box(-1, 1, (2 + 10 * K,), float32)`` (see
    :class:`FlatAction`), or with ``grid=N`` ``MultiDiscrete([N, N] + [10] * K)`` (see
    :class:`GridAction`).
    """
    if isinstance(stack, bool) or not isinstance(stack, int) or stack < 1:
        raise ValueError(f"stack must be a positive integer (observations per stack), got {stack!r}")
    env = gym.make(env_id, **kwargs)
    env = FlattenObservation(FlatAction(env) if grid is None else GridAction(env, grid))
    return FrameStackObservation(env, stack, padding_type="zero") if stack > 1 else env
