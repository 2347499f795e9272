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
[0, 1] for the glimpse and [-1, 1] for the location. :func:`make_flat` applies both wrappers::

    import envs
    from envs.flat_action import make_flat
    env_id = next(i for i, task in envs.ENV_IDS.items() if task == "mnist28")
    env = make_flat(env_id, data_dir="bundled")    # obs (66,), action (12,)

Note that a memoryless (MLP) policy sees only the current glimpse: the recurrent agents of this
lab (``glimpse/``) remember earlier glimpses, an MLP on these flat spaces does not.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import FlattenObservation

from envs.spaces import N_CLASSES

__all__ = ["FlatAction", "make_flat"]


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
        inner = env.action_space
        if not (isinstance(inner, spaces.Dict) and set(inner.spaces) == {"location", "label"}):
            raise TypeError(f"FlatAction needs a Dict action space with 'location' and 'label', got {inner}")
        label_space = inner["label"]
        if isinstance(label_space, spaces.Discrete) and label_space.n == N_CLASSES:
            self.n_digits = 1
        elif isinstance(label_space, spaces.MultiDiscrete) and np.all(label_space.nvec == N_CLASSES) \
                and label_space.nvec.ndim == 1:
            self.n_digits = len(label_space.nvec)
        else:
            raise TypeError(f"FlatAction needs a Discrete({N_CLASSES}) or MultiDiscrete([{N_CLASSES}] * K) "
                            f"label space, got {label_space}")
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


def make_flat(env_id: str, **kwargs) -> gym.Env:
    """``gymnasium.make(env_id, **kwargs)`` wrapped for flat agents.

    Observation: ``Box((k * g * g + 2,), float32)`` (flattened glimpse, then location);
    action: ``Box(-1, 1, (2 + 10 * K,), float32)`` (see :class:`FlatAction`).
    """
    return FlattenObservation(FlatAction(gym.make(env_id, **kwargs)))
