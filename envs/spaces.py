"""Observation and action spaces of one episode, and checks that name what is wrong with an action."""
from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from envs.task import GlimpseTask

N_CLASSES = 10


def observation_space(task: GlimpseTask) -> spaces.Dict:
    """``glimpse`` (k, g, g) and its ``location`` (2,); with ``context_size`` s > 0 also
    ``context`` (s, s), the whole canvas seen coarsely (the same view all episode)."""
    parts = {
        "glimpse": spaces.Box(0.0, 1.0, (task.n_scales, task.glimpse_size, task.glimpse_size), np.float32),
        "location": spaces.Box(-1.0, 1.0, (2,), np.float32),
    }
    if task.context_size:
        parts["context"] = spaces.Box(0.0, 1.0, (task.context_size, task.context_size), np.float32)
    return spaces.Dict(parts)


def action_space(task: GlimpseTask) -> spaces.Dict:
    """``label``: one class, or with several digits one class per digit in reading order."""
    label = spaces.Discrete(N_CLASSES) if task.n_digits == 1 else spaces.MultiDiscrete([N_CLASSES] * task.n_digits)
    return spaces.Dict({"location": spaces.Box(-1.0, 1.0, (2,), np.float32), "label": label})


def check_action(action, batch: int | None = None, n_digits: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Validate an action (one episode when ``batch`` is None, else ``batch`` of them).

    Returns ``location`` as float32 (2,) or (batch, 2) and ``label`` as int64: () or (batch,)
    with one digit, (n_digits,) or (batch, n_digits) with several.
    Raises ValueError/TypeError naming the problem; nothing about the env changes on failure.
    """
    if not hasattr(action, "keys") or set(action.keys()) != {"location", "label"}:
        keys = sorted(action.keys()) if hasattr(action, "keys") else type(action).__name__
        raise ValueError(f"action must be a dict with keys 'location' and 'label', got {keys}")
    location, label = _as_numpy(action["location"]), _as_numpy(action["label"])
    loc_shape = (2,) if batch is None else (batch, 2)
    label_shape = (() if batch is None else (batch,)) + (() if n_digits == 1 else (n_digits,))
    if location.shape != loc_shape:
        raise ValueError(f"action['location'] must have shape {loc_shape}, got {location.shape}")
    if not (np.issubdtype(location.dtype, np.floating) or np.issubdtype(location.dtype, np.integer)):
        raise TypeError(f"action['location'] must be numbers (floating point), got dtype {location.dtype}")
    if not np.all(np.isfinite(location)):
        raise ValueError("action['location'] contains NaN or inf")
    if np.any(np.abs(location) > 1.0):
        worst = float(np.abs(location).max())
        raise ValueError(f"action['location'] must lie in [-1, 1] (got |value| up to {worst!r}); clip it first")
    if label.shape != label_shape:
        raise ValueError(f"action['label'] must have shape {label_shape}, got {label.shape}")
    if not (np.issubdtype(label.dtype, np.integer) and not np.issubdtype(label.dtype, np.bool_)):
        raise TypeError(f"action['label'] must be an integer class index, got dtype {label.dtype}")
    if np.any((label < 0) | (label >= N_CLASSES)):
        raise ValueError(f"action['label'] must be in 0..{N_CLASSES - 1}, got {label.min()}..{label.max()}")
    # copies: observations and the glimpse path keep these, and a caller may refill one buffer each step
    return location.astype(np.float32, copy=True), label.astype(np.int64, copy=True)


def check_batched_action(action, batch: int, n_digits: int, device: torch.device,
                         validate: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The vector env's check: ``batch`` actions as tensors (or arrays) -> ``location`` (batch, 2)
    float32 and ``label`` (batch,) or (batch, n_digits) int64, on ``device``.

    Keys, shapes and dtypes are always checked (no tensor value is read). With ``validate`` the
    values are too, with :func:`check_action`'s messages: that reads them on the host, a sync per
    step on a GPU, which a trainer whose actions are valid by construction switches off.
    """
    if validate:
        location, label = check_action(action, batch, n_digits)
        return torch.from_numpy(location).to(device), torch.from_numpy(label).to(device)
    if not hasattr(action, "keys") or set(action.keys()) != {"location", "label"}:
        keys = sorted(action.keys()) if hasattr(action, "keys") else type(action).__name__
        raise ValueError(f"action must be a dict with keys 'location' and 'label', got {keys}")
    location, label = (v if isinstance(v, torch.Tensor) else torch.as_tensor(np.asarray(v))
                       for v in (action["location"], action["label"]))
    label_shape = (batch,) + (() if n_digits == 1 else (n_digits,))
    if tuple(location.shape) != (batch, 2) or location.dtype == torch.bool or location.dtype.is_complex:
        raise ValueError(f"action['location'] must be floating point of shape {(batch, 2)}, got "
                         f"{location.dtype} {tuple(location.shape)}")
    if tuple(label.shape) != label_shape or label.dtype.is_floating_point or label.dtype == torch.bool:
        raise ValueError(f"action['label'] must be integer class indices of shape {label_shape}, got "
                         f"{label.dtype} {tuple(label.shape)}")
    # detached: the episode keeps the locations, and must not hold on to a caller's autograd graph
    return (location.detach().to(device, torch.float32, copy=True),
            label.detach().to(device, torch.int64, copy=True))


def _as_numpy(value) -> np.ndarray:
    if hasattr(value, "detach"):  # torch tensors: accepted, zero-copy on CPU
        value = value.detach().cpu().numpy()
    return np.asarray(value)
