"""Did the attention find the digit? Where a model looked, step by step, against where the digit is.

The canvas generator knows each digit's 28x28 box (``CanvasBatch.digit_xy``, its top-left
pixel), so on the fixed test canvases we can measure what accuracy alone hides: whether a model
errs because it never looked at the digit or because it misread a digit it found. Where a model
looks at step t is the ``centres`` of its family's :class:`glimpse.models.Attention` (RAM: the
centre of glimpse t, following the policy mean as evaluate.py scores it; DRAW: the centre of the
filterbank grid; Show-Attend-Tell: the attention-weighted mean of its cells' receptive-field
centres; the Spatial Transformer: the centre of its crop). A model that reads K digits in turn
(K blocks of steps, digit k answered at the end of block k) is asked per block whether it looked
at the digit it was to read or at another one (:func:`reading_summary`).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from envs.engine import DIGIT_SIZE
from envs.coords import unit_to_pixels
from envs.data import load_mnist
from glimpse.checkpoint import load_model
from glimpse.benchmark import fixed_set
from glimpse.inference import looks
from glimpse.models import get_family

# A step "found" the digit within this many pixels of its centre: the digit is 28x28, so RAM's
# finest 12x12 scale then holds part of it, and DRAW's read at a typical final stride all of it.
DEFAULT_RADIUS = 10.0
# Two-digit canvases: the canvas error is broken down by the gap between neighbouring digits' left
# edges at these pixels (the digit's ink starts a few pixels inside its 28x28 box, so below about
# 3 px which digit comes first is hardly visible).
GAP_EDGES = (3, 10)


class NoAttention(ValueError):
    """The model reads the whole canvas: there is nowhere it looked."""


@torch.no_grad()
def attention_centres(arch: str, model: nn.Module, task: dict, images: np.ndarray, batch_size: int = 500,
                      seed: int = 0, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """(N, H, W) uint8 canvases -> (centres (N, T, 2) pixel (x, y) of each step, predictions (N,)
    or (N, K) for a model that reads K digits per canvas).

    The predictions are evaluate.py's (deterministic); ``seed`` places random first glimpses as
    ``evaluate.py --seed`` does. ``progress``: a tqdm bar to advance by each batch."""
    family = get_family(arch)
    if not family.has_attention:
        raise NoAttention(f"a {arch} model reads the whole canvas: there is no attention to locate")
    centres, predictions = [], []
    for part, (look,) in looks(family, model, task, images, batch_size, seed=seed):
        centres.append(unit_to_pixels(look.attention.centres.cpu(), task["canvas_size"]).numpy())
        predictions.append(look.logits.argmax(-1).cpu().numpy())
        if progress is not None:
            progress.update(len(images[part]))
    return np.concatenate(centres), np.concatenate(predictions)


def finding_summary(centres: np.ndarray, digit_xy: np.ndarray, predictions: np.ndarray, labels: np.ndarray,
                         radius: float) -> dict:
    """centres (N, T, 2) pixels, digit_xy (N, 2) top-left of each digit's box -> a summary dict.

    A canvas counts as *found* when some step looked within ``radius`` pixels of the digit's
    centre. Per step: the median distance and the fraction of canvases looked at within the radius;
    overall: the error where the digit was found and where it was not (None where no canvas)."""
    distance = np.linalg.norm(centres - (digit_xy + DIGIT_SIZE / 2)[:, None, :], axis=-1)  # (N, T)
    found = (distance <= radius).any(1)
    wrong = predictions != labels

    def error(mask):
        return float(wrong[mask].mean()) if mask.any() else None

    return {"n": int(len(labels)), "radius": float(radius), "error": float(wrong.mean()),
            "median_distance_per_step": np.median(distance, 0).round(2).tolist(),
            "within_radius_per_step": (distance <= radius).mean(0).round(4).tolist(),
            "found": float(found.mean()), "error_when_found": error(found), "error_when_not_found": error(~found),
            "share_of_errors_not_found": float((wrong & ~found).sum() / max(wrong.sum(), 1))}


def reading_summary(centres: np.ndarray, digit_xy: np.ndarray, predictions: np.ndarray, labels: np.ndarray,
                    radius: float, gap_edges: tuple[int, ...] = GAP_EDGES) -> dict:
    """Several digits per canvas, read in turn: centres (N, K * T, 2) pixels, T steps per digit;
    digit_xy (N, K, 2) top-left of each digit's box; predictions and labels (N, K), all in reading
    order (left to right by the box's left edge) -> a summary dict.

    Per digit k: its error; how often block k (the steps that end in digit k's answer) looked
    within ``radius`` of digit k (*found*), and how often only at another digit; its error where
    found (reading apart from finding; None where never found); the share of
    canvases where digit k's answer is another digit's label (it read the wrong one). Then the
    canvas error by the horizontal gap between neighbouring digits' left edges, the quantity the
    reading order turns on: at a gap of a pixel or two the order is all but invisible."""
    n, k = labels.shape
    if centres.shape[1] % k:
        raise ValueError(f"{centres.shape[1]} steps do not split into {k} blocks, one per digit")
    blocks = centres.reshape(n, k, -1, 2)  # (N, K blocks, T, 2)
    digit_centres = digit_xy + DIGIT_SIZE / 2  # (N, K, 2)
    # near[n, b, d]: some step of block b looked within the radius of digit d
    distance = np.linalg.norm(blocks[:, :, :, None, :] - digit_centres[:, None, None, :, :], axis=-1)
    near = (distance <= radius).any(2)
    own = near[:, np.arange(k), np.arange(k)]  # (N, K)
    elsewhere = (near & ~np.eye(k, dtype=bool)).any(2) & ~own
    wrong = predictions != labels  # (N, K)
    others = labels[:, None, :] == predictions[:, :, None]  # others[n, b, d]: answer b is digit d's label
    read_another = wrong & (others & ~np.eye(k, dtype=bool)).any(2)
    found_wrong = [float(wrong[own[:, d], d].mean()) if own[:, d].any() else None for d in range(k)]
    canvas_wrong = wrong.any(1)
    gap = np.diff(digit_xy[..., 0], axis=1).min(1) if k > 1 else np.full(n, np.inf)  # (N,) >= 0, sorted
    bounds = (0, *gap_edges, None)
    by_gap = []
    for low, high in zip(bounds[:-1], bounds[1:]):
        mask = (gap >= low) & (gap < (np.inf if high is None else high))
        by_gap.append({"low": low, "high": high, "share": float(mask.mean()),
                       "error": float(canvas_wrong[mask].mean()) if mask.any() else None})

    def mean(x):
        return x.mean(0).round(4).tolist()

    return {"n": int(n), "n_digits": int(k), "radius": float(radius), "error": float(canvas_wrong.mean()),
            "digit_error": mean(wrong), "found": mean(own), "only_another_digit": mean(elsewhere),
            "error_where_found": [None if e is None else round(e, 4) for e in found_wrong],
            "answered_another_digit": mean(read_another), "error_by_gap": by_gap}


def localise_checkpoint(checkpoint, *, data_dir: str | None = None, split: str = "test",
                        radius: float = DEFAULT_RADIUS, seed: int = 0, batch_size: int = 500,
                        canvas_seed: int | None = None, limit: int | None = None, progress=None) -> dict:
    """:func:`finding_summary` (or for a model that reads several digits per canvas
    :func:`reading_summary`) of a checkpoint on its fixed test (or validation) canvases, or with
    ``canvas_seed`` on fresh canvases of the split's digits drawn from that seed; ``limit``: only
    the first that many. ``progress``: a function of the number of canvases that returns a tqdm bar
    to advance, or None."""
    if not radius > 0 or batch_size < 1:
        raise ValueError("--radius must be > 0 and --batch-size >= 1")
    if canvas_seed is not None and canvas_seed < 0:
        raise ValueError(f"--canvas-seed must be >= 0, got {canvas_seed}")
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be >= 1, got {limit}")
    model, payload = load_model(checkpoint)
    task, arch = payload["task"], payload["kind"]
    canvases, _ = fixed_set(task, load_mnist(data_dir).split(split), split, canvas_seed)
    canvases = canvases[:limit]  # a slice to None keeps them all
    bar = progress(len(canvases.images)) if progress is not None else None
    try:
        centres, predictions = attention_centres(arch, model, task, canvases.images, batch_size, seed, bar)
    finally:
        if bar is not None:
            bar.close()
    summarise = reading_summary if task.get("n_digits", 1) > 1 else finding_summary
    summary = summarise(centres, canvases.digit_xy, predictions, canvases.labels, radius)
    return {"checkpoint": str(checkpoint), "kind": arch, "split": split, "canvas_seed": canvas_seed, **summary}
