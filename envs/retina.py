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

import functools

import torch

from envs.task import GlimpseTask



EXACT_FLOAT32_LIMIT = 2**24


def integral_images(canvases: torch.Tensor) -> torch.Tensor:
    """(B, H, W) uint8 canvases -> (B, H+1, W+1) float with ii[b, y, x] = sum(canvas[b, :y, :x]).

    float32 cumsum is ~10x faster than int32 on CPU and exact for these integer sums.
    """
    if canvases.dim() != 3 or canvases.dtype != torch.uint8:
        raise ValueError(f"canvases must be (B, H, W) uint8, got {tuple(canvases.shape)} {canvases.dtype}")
    batch, height, width = canvases.shape
    dtype = torch.float32 if 255 * height * width < EXACT_FLOAT32_LIMIT else torch.float64
    ii = torch.empty((batch, height + 1, width + 1), dtype=dtype, device=canvases.device)
    ii[:, 0].zero_()
    ii[:, 1:, 0].zero_()
    ii[:, 1:, 1:].copy_(canvases).cumsum_(2)
    if ii.device.type == "cpu":  # torch's CPU cumsum across rows is slow: adding row after row is ~2x faster
        rows = ii.unbind(1)
        for y in range(1, height + 1):
            rows[y].add_(rows[y - 1])
    else:  # one kernel, not H launches
        ii.cumsum_(1)
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
    half_width, edges, norm, size = _sensor(glimpse_size, n_scales, width, height, ii.device, ii.dtype)
    # (B, 2, k, g+1) x and y edges of every cell of every scale, clamped: outside reads as 0
    centre_px = (locations.to(torch.float32) + 1.0) * (size / 2.0)  # (B, 2) pixels, as envs.coords.unit_to_pixels
    origin = torch.floor(centre_px[:, :, None] - half_width + 0.5).long()  # as patch_origin, every scale at once
    xy_edges = torch.minimum((origin[..., None] + edges).clamp_(min=0), size[None, :, None, None])
    flat_index = (xy_edges[:, 1, :, :, None] * (width + 1) + xy_edges[:, 0, :, None, :]).view(batch, -1)
    corners = ii.view(batch, -1).gather(1, flat_index).view(batch, n_scales, glimpse_size + 1, glimpse_size + 1)
    box_sums = corners.diff(dim=-1).diff(dim=-2)  # = c11 - c01 - c10 + c00, exact on integer sums, 2 ops not 3
    return (box_sums / norm).to(torch.float32)


@functools.lru_cache(maxsize=32)
def _sensor(glimpse_size: int, n_scales: int, width: int, height: int, device: torch.device, dtype: torch.dtype):
    """Per scale s (cells 2**s pixels wide): half the patch width (k,), the cell edges from the
    patch's origin (k, g+1), what a cell's sum is divided by to give its mean in [0, 1] (1, k, 1, 1),
    and the canvas size (width, height) (2,). Made once per sensor and device: building a tensor
    from Python numbers on a GPU is a blocking copy, which must not happen at every glimpse."""
    cell = 2 ** torch.arange(n_scales, device=device)
    edges = cell[:, None] * torch.arange(glimpse_size + 1, device=device)
    norm = (cell.to(dtype) ** 2 * 255.0)[None, :, None, None]
    size = torch.tensor([width, height], device=device)
    return cell * glimpse_size / 2, edges, norm, size


def retina_pixels_read(task: dict, context_size: int, snapped: bool = True) -> dict[str, int]:
    """What a retina's episodes read per image: T * k * g * g glimpse values; canvas pixels under
    the widest box of each glimpse (``g * 2**(k-1)`` wide, an upper bound at the edges: the finer
    scales lie inside it), times T = glimpses per digit x digits. A context view of side s adds
    s * s values and the whole canvas. ``snapped=False``: box origins fall between pixels (the
    differentiable retina), so a box of width w overlaps w + 1 pixels a side."""
    g, k, size = int(task["glimpse_size"]), int(task["n_scales"]), int(task["canvas_size"])
    t = GlimpseTask(**task).episode_length
    widest = min(g * 2 ** (k - 1) + (0 if snapped else 1), size)
    return {"sensor_values": t * k * g * g + context_size * context_size,
            "canvas_pixels_touched": t * widest * widest + (size * size if context_size else 0),
            "input_pixels": size * size}
