"""Location convention shared by the sensor, the soft-attention models and the drawings.

A location is ``(x, y)`` in ``[-1, 1]^2``: ``x`` runs left to right along columns, ``y``
top to bottom along rows, ``(0, 0)`` is the canvas centre and ``(-1, -1)`` its top-left
corner. In pixels, ``x = -1`` is the left edge (0) and ``x = +1`` the right edge (W).
"""
from __future__ import annotations

import torch


def unit_to_pixels(location: torch.Tensor, size: int) -> torch.Tensor:
    """Map unit coordinates in [-1, 1] to continuous pixel coordinates in [0, size]."""
    return (location + 1.0) * (size / 2.0)


def pixels_to_unit(pixels: torch.Tensor, size: int) -> torch.Tensor:
    """Inverse of :func:`unit_to_pixels`."""
    return pixels * (2.0 / size) - 1.0
