"""The glimpse sensor (RAM's retina), batched and exact, in O(k g^2) per glimpse, on any device.

A glimpse at location l is k square patches centred on l, patch s being ``g * 2**s`` pixels
wide and average-pooled to g x g (so every scale is twice as wide as the previous). Parts
outside the canvas read as black.

Each pooled cell is a box sum, read from the canvas's integral image with four lookups, so
the cost does not depend on the canvas size or the scale: this is what makes hard attention
O(1) in the input size. Integral images hold raw 0..255 sums in float32, which is exact while
every sum stays below 2**24 (canvases up to 256x256; larger ones switch to float64).
"""
from __future__ import annotations

import torch

from envs.coords import unit_to_pixels


EXACT_FLOAT32_LIMIT = 2**24


def integral_images(canvases: torch.Tensor) -> torch.Tensor:
    """(B, H, W) uint8 canvases -> (B, H+1, W+1) float with ii[b, y, x] = sum(canvas[b, :y, :x]).

    float32 cumsum is ~10x faster than int32 on CPU and exact for these integer sums.
    """
    if canvases.dim() != 3 or canvases.dtype != torch.uint8:
        raise ValueError(f"canvases must be (B, H, W) uint8, got {tuple(canvases.shape)} {canvases.dtype}")
    batch, height, width = canvases.shape
    dtype = torch.float32 if 255 * height * width < EXACT_FLOAT32_LIMIT else torch.float64
    ii = torch.zeros(batch, height + 1, width + 1, dtype=dtype, device=canvases.device)
    ii[:, 1:, 1:] = canvases.to(dtype).cumsum(1).cumsum(2)
    return ii


def patch_origin(centre_px: torch.Tensor, width: torch.Tensor | int) -> torch.Tensor:
    """Top-left pixel of a ``width``-wide patch centred at continuous pixel ``centre_px``.

    round-half-up of ``centre - width / 2``; the drawings use the same rule so boxes and reads agree.
    """
    return torch.floor(centre_px - width / 2 + 0.5).long()


def extract_glimpses(ii: torch.Tensor, locations: torch.Tensor, glimpse_size: int, n_scales: int) -> torch.Tensor:
    """Read glimpses from integral images.

    Args:
        ii: (B, H+1, W+1) integral images (see :func:`integral_images`).
        locations: (B, 2) float (x, y) in [-1, 1] (see envs.coords).
        glimpse_size: g, side of each scale's output.
        n_scales: k.
    Returns:
        (B, k, g, g) float32 in [0, 1]; scale 0 is the finest.
    """
    batch, height, width = ii.shape[0], ii.shape[1] - 1, ii.shape[2] - 1
    if locations.shape != (batch, 2):
        raise ValueError(f"locations must have shape ({batch}, 2), got {tuple(locations.shape)}")
    cell = 2 ** torch.arange(n_scales, device=ii.device)  # (k,) pooling factor of each scale
    steps = torch.arange(glimpse_size + 1, device=ii.device)  # cell edges 0..g
    loc = locations.to(torch.float32)
    # (B, k, g+1) edge coordinates of every cell of every scale, clamped: outside reads as 0
    x_edges = patch_origin(unit_to_pixels(loc[:, :1], width), cell * glimpse_size)[:, :, None] + cell[None, :, None] * steps
    y_edges = patch_origin(unit_to_pixels(loc[:, 1:], height), cell * glimpse_size)[:, :, None] + cell[None, :, None] * steps
    x_edges = x_edges.clamp_(0, width)
    y_edges = y_edges.clamp_(0, height)
    flat_index = (y_edges[:, :, :, None] * (width + 1) + x_edges[:, :, None, :]).view(batch, -1)
    corners = ii.view(batch, -1).gather(1, flat_index).view(batch, n_scales, glimpse_size + 1, glimpse_size + 1)
    box_sums = corners[..., 1:, 1:] - corners[..., :-1, 1:] - corners[..., 1:, :-1] + corners[..., :-1, :-1]
    scale_norm = (cell.to(box_sums.dtype) ** 2 * 255.0)[None, :, None, None]
    return (box_sums / scale_norm).to(torch.float32)
