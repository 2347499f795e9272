"""Gradient routing shared by the models: the forward value unchanged, the backward pass scaled."""
from __future__ import annotations

import torch


def scale_gradient(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``x`` in the forward pass; its gradient times ``scale`` in the backward pass (0: detached)."""
    if scale == 0:
        return x.detach()
    if scale == 1:
        return x
    frozen = x.detach()
    return frozen + scale * (x - frozen)  # value exactly x; d/dx = scale
