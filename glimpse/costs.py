"""What a model costs per image, by definition and by count: the pixels it reads and the FLOPs of
its forward pass (the report's "cost per image" and the bigger-canvas table).

An ``arch`` is a registered family's name (:mod:`glimpse.models`); each family says how it reads
(``pixels_read``). ``task`` is the dict stored in checkpoints; ``model_config`` the kwargs of the
family's Config dataclass.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from glimpse.models import get_family

__all__ = ["flop_breakdown", "flops_per_image", "pixels_read"]


# ---------------------------------------------------------------------------------------------
# pixels read
# ---------------------------------------------------------------------------------------------

def pixels_read(arch: str, task: dict, model_config: dict) -> dict[str, int]:
    """What one image costs in reading, by definition rather than by measurement: the family's
    :meth:`glimpse.models.Family.pixels_read` (a dict of ints per image: ``sensor_values``,
    ``canvas_pixels_touched``, ``input_pixels``; each family's docstring says how it counts).

    Not counted: the retina's implementation builds an integral image of the canvas (one pass
    over all H * W pixels, a cumulative sum, no learned part) so that each box costs four
    lookups. That preprocessing is O(H W) per image but fixed; what the model *chooses* to look
    at is what ``canvas_pixels_touched`` counts.
    """
    return get_family(arch).pixels_read(task, model_config)


# ---------------------------------------------------------------------------------------------
# FLOPs
# ---------------------------------------------------------------------------------------------

def _random_canvases(task: dict, batch: int, seed: int) -> np.ndarray:
    """(batch, H, W) uint8 uniform noise: FLOPs of these models do not depend on the pixel values."""
    size = int(task["canvas_size"])
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (batch, size, size), generator=generator, dtype=torch.uint8).numpy()


def flop_breakdown(arch: str, model: nn.Module, task: dict, batch: int = 8, seed: int = 0) -> dict[str, float]:
    """FLOPs per image of one forward pass, by aten op (e.g. ``{"addmm": ..., "bmm": ...}``).

    Counted with :class:`torch.utils.flop_counter.FlopCounterMode` on a batch of ``batch``
    random uint8 canvases (H = W = task canvas_size), divided by ``batch``.

    What FlopCounterMode counts: only matrix-multiply-like aten ops (mm, addmm, bmm, baddbmm,
    convolution, scaled-dot-product attention, ...), at 2 FLOPs per multiply-add. Composite
    modules are seen after decomposition: an ``nn.Linear`` is one addmm/mm (2 * in * out per
    row; the bias add is *not* counted), an ``nn.LSTMCell`` is two addmm (2 * in * 4h + 2 * h * 4h
    per row; gates' nonlinearities and the cell update are not counted), a conv is 2 * C_in * kh *
    kw * C_out per output position. What it does not count: elementwise ops (activations, adds,
    exp, softmax, the filterbank's Gaussians), reductions, cumsum, gather/indexing, pooling.

    Consequences per family:

    The forward pass is the family's :meth:`glimpse.models.Family.run`, as evaluation runs it.

    * ``ram``: T steps of ``model(glimpse, location, state)`` (each step also computes the
      classifier and baseline heads) through the env, whose sensor runs inside the counter.
      The sensor is cumsum, gather and elementwise arithmetic, so it counts as **0**
      (by hand: ~2 H W adds for the integral image plus ~4 k g^2 ops per glimpse).
      The first location follows ``task["first_location"]`` (random ones from ``seed``), the
      next ones the policy mean.
    * ``draw``: ``model(images)``; the read ``F_Y @ image @ F_X^T`` is two bmm (2 N H W + 2 N N W
      per step) and is counted; building the filters (exp) is not.
    * ``sat``: ``model(images)``; convolutions, the attention's Linear layers and the context bmm
      are counted; ReLU, max-pool, tanh and softmax are not.
    * ``stn``: the localisation network's convolutions and Linear layers and the crop
      classifier's; the bilinear sampler (``grid_sample``) is not counted, ``affine_grid`` is a
      small bmm.
    * ``fc``, ``cnn``: ``model(images)``; the Linear layers and the convolution.
    """
    family = get_family(arch)
    canvases = _random_canvases(task, batch, seed)
    draws = family.evaluation_draws(model, task, batch, seed, False)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        family.run(model, canvases, task, draws=draws)
    by_op = counter.get_flop_counts().get("Global", {})
    return {str(op).split(".")[-1]: count / batch for op, count in by_op.items()}


def flops_per_image(arch: str, model: nn.Module, task: dict, batch: int = 8, seed: int = 0) -> float:
    """Total FLOPs per image of one forward pass; the sum of :func:`flop_breakdown` (see there
    for exactly what is and is not counted)."""
    return float(sum(flop_breakdown(arch, model, task, batch, seed).values()))
