"""Did the attention find the digit? Where a model looked, step by step, against where the digit is.

The canvas generator knows each digit's 28x28 box (``CanvasBatch.digit_xy``, its top-left
pixel), so on the fixed test canvases we can measure what accuracy alone hides: whether a model
errs because it never looked at the digit or because it misread a digit it found. Where a model
looks at step t is the ``centres`` of its family's :class:`glimpse.models.Attention` (RAM: the
centre of glimpse t, following the policy mean as evaluate.py scores it; DRAW: the centre of the
filterbank grid; Show-Attend-Tell: the attention-weighted mean of its cells' receptive-field
centres; the Spatial Transformer: the centre of its crop).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from envs.engine import DIGIT_SIZE
from envs.coords import unit_to_pixels
from envs.data import load_mnist
from glimpse.checkpoint import load_model
from glimpse.evaluation import fixed_set
from glimpse.inference import looks
from glimpse.models import get_family

# A step "found" the digit within this many pixels of its centre: the digit is 28x28, so RAM's
# finest 12x12 scale then holds part of it, and DRAW's read at a typical final stride all of it.
DEFAULT_RADIUS = 10.0


@torch.no_grad()
def attention_centres(kind: str, model: nn.Module, task: dict, images: np.ndarray, batch_size: int = 500,
                      seed: int = 0, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """(N, H, W) uint8 canvases -> (centres (N, T, 2) pixel (x, y) of each step, predictions (N,)).

    The predictions are evaluate.py's (deterministic); ``seed`` places random first glimpses as
    ``evaluate.py --seed`` does. ``progress``: a tqdm bar to advance by each batch."""
    family = get_family(kind)
    if not family.has_attention:
        raise ValueError(f"a {kind} model reads the whole canvas: there is no attention to locate")
    centres, predictions = [], []
    for part, (look,) in looks(family, model, task, images, batch_size, seed=seed):
        centres.append(unit_to_pixels(look.attention.centres.cpu(), task["canvas_size"]).numpy())
        predictions.append(look.logits.argmax(-1).cpu().numpy())
        if progress is not None:
            progress.update(len(images[part]))
    return np.concatenate(centres), np.concatenate(predictions)


def localisation_summary(centres: np.ndarray, digit_xy: np.ndarray, predictions: np.ndarray, labels: np.ndarray,
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


def localise_checkpoint(checkpoint, *, data_dir: str | None = None, split: str = "test",
                        radius: float = DEFAULT_RADIUS, seed: int = 0, batch_size: int = 500) -> dict:
    """:func:`localisation_summary` of a checkpoint on its fixed test (or validation) canvases."""
    if not radius > 0 or batch_size < 1:
        raise ValueError("--radius must be > 0 and --batch-size >= 1")
    model, payload = load_model(checkpoint)
    task, kind = payload["task"], payload["kind"]
    if task.get("n_digits", 1) > 1:
        raise ValueError(f"{checkpoint} reads {task['n_digits']} digits per canvas; localisation measures "
                         "single-digit canvases")
    canvases, _ = fixed_set(task, load_mnist(data_dir).split(split), split)
    centres, predictions = attention_centres(kind, model, task, canvases.images, batch_size, seed)
    summary = localisation_summary(centres, canvases.digit_xy, predictions, canvases.labels, radius)
    return {"checkpoint": str(checkpoint), "kind": kind, "split": split, **summary}
