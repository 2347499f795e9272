"""DRAW's Gaussian filterbank read (Gregor et al. 2015, section 3.2), batched.

An N x N grid of isotropic 2-D Gaussian filters, placed by its centre (gX, gY) and stride
delta, with variance sigma^2, reads ``gamma * F_Y x F_X^T``: an N x N patch, differentiable in
every attention parameter.

Pixel convention (envs/coords.py): pixel ``a`` (0-indexed) covers [a, a + 1] and filters are
evaluated at its centre a + 0.5; unit coordinate -1 is the left/top edge (0), +1 the right/bottom
edge (W or H). See :func:`attention_params` for how this adapts the paper's 1-indexed mapping.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from envs.coords import unit_to_pixels

# Z underflows to 0 when a filter lies far off the canvas; public DRAW code divides by it and gets
# NaN. Rows of filters centred more than about 6 sigma beyond an edge fade to 0 instead (nearer
# ones, as in the paper, sum to 1 and weigh the edge pixels).
NORMALISER_EPS = 1e-8
# Floor on sigma^2 (pixels^2) inside the filters: sigma^2 -> 0 would make the exponent's gradient
# inf * 0 = NaN. Filters this narrow fall between pixel centres; those centred on the canvas are
# normalised stably (a softmax), so they read the nearest pixel rather than nothing.
SIGMA2_MIN = 1e-4


class FilterbankParams(NamedTuple):
    """Batch B: ``centre`` (B, 2) unit (x, y) as in coords.py; ``centre_px`` (B, 2) pixels (x, y);
    ``stride`` (B,) pixels between neighbouring filters; ``sigma2`` (B,) filter variance in
    pixels^2; ``gamma`` (B,) read intensity."""

    centre: torch.Tensor
    centre_px: torch.Tensor
    stride: torch.Tensor
    sigma2: torch.Tensor
    gamma: torch.Tensor




def attention_params(raw: torch.Tensor, height: int, width: int, read_size: int,
                     min_sigma_strides: float = 0.0) -> FilterbankParams:
    """raw (B, 5) = (g~X, g~Y, log sigma^2, log delta~, log gamma), e.g. a linear map of a state.

    sigma^2 = exp(raw) in pixels^2, as in the paper, plus a floor:
    ``min_sigma_strides`` is a floor that follows the zoom: sigma^2 also gets (k * delta)^2, so
    the filters never get narrower than k strides. Below about half a stride the grid point-samples
    the image and misses what lies between its filters (aliasing): a thin stroke can slip between
    them as the centre moves by a pixel, and the read becomes a rough function of the centre.

    As in the paper, delta = (max(A, B) - 1) / (N - 1) * delta~ (A = width, B = height), so
    delta~ = 1 spreads the N filter centres from the first pixel centre to the last.

    Centre: the paper's gX = (A + 1) / 2 (g~X + 1) on 1-indexed pixels maps g~ = -1..1 to
    0..A + 1, i.e. half a pixel beyond each canvas edge, with g~ = 0 at the centre (A + 1) / 2.
    Here g~ *is* the unit coordinate of coords.py: gX = A / 2 (g~X + 1) in 0-indexed continuous
    pixels, so g~ = 0 is still the canvas centre and g~ = +-1 are exactly the edges (the scale
    differs from the paper's by A / (A + 1)). The filterbank, the hard glimpse sensor and the
    drawings then share one coordinate system. Same for gY with B.
    """
    if raw.dim() != 2 or raw.shape[-1] != 5:
        raise ValueError(f"raw attention parameters must be (B, 5), got {tuple(raw.shape)}")
    if not 0 <= min_sigma_strides < math.inf:
        raise ValueError(f"min_sigma_strides must be a finite number of strides >= 0, got {min_sigma_strides}")
    gx, gy, log_sigma2, log_delta, log_gamma = raw.unbind(-1)
    centre = torch.stack([gx, gy], -1)
    centre_px = torch.stack([unit_to_pixels(gx, width), unit_to_pixels(gy, height)], -1)
    stride = (max(height, width) - 1) / max(read_size - 1, 1) * torch.exp(log_delta)
    sigma2 = torch.exp(log_sigma2) + (min_sigma_strides * stride) ** 2
    return FilterbankParams(centre, centre_px, stride, sigma2, torch.exp(log_gamma))


def filter_axis(centre: torch.Tensor, stride: torch.Tensor, sigma2: torch.Tensor, length: int,
                read_size: int) -> torch.Tensor:
    """centre (B,) in pixels, stride (B,), sigma2 (B,) along one axis -> (B, N, length) filters.

    mu_i = centre + (i - (N - 1) / 2) * stride for i = 0..N-1: the paper's (i - N/2 - 0.5) with
    i = 1..N. F[i, a] = exp(-(a + 0.5 - mu_i)^2 / (2 sigma^2)) / Z_i, Z_i = sum_a exp(...): rows sum
    to 1 wherever the filter's centre lies on the canvas (a filter narrower than a pixel too). Off
    the canvas they sum to 1 until every exp underflows, and then to 0 (not NaN): many sigma beyond
    the edge, or at once beyond it for a filter narrower than about 0.08 px.
    """
    offsets = torch.arange(read_size, dtype=centre.dtype, device=centre.device) - (read_size - 1) / 2
    mu = centre[:, None] + offsets[None, :] * stride[:, None]  # (B, N)
    pixels = torch.arange(length, dtype=centre.dtype, device=centre.device) + 0.5  # pixel centres
    sigma2 = sigma2.clamp_min(SIGMA2_MIN)
    logits = -((pixels[None, None, :] - mu[:, :, None]) ** 2) / (2 * sigma2[:, None, None])
    filters = torch.exp(logits)
    normaliser = filters.sum(-1, keepdim=True)
    faded = filters / normaliser.clamp_min(NORMALISER_EPS)
    # Z < eps with the centre on the canvas: not off the canvas but narrower than the gap to the
    # nearest pixel centre (sigma below about 0.08 px), where every exp underflows
    narrow = (normaliser < NORMALISER_EPS) & ((mu >= 0) & (mu <= length))[:, :, None]
    return torch.where(narrow, torch.softmax(logits, -1), faded)


def filterbank_matrices(params: FilterbankParams, height: int, width: int,
                        read_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """-> F_X (B, N, W) and F_Y (B, N, H); both axes share stride and sigma^2."""
    f_x = filter_axis(params.centre_px[:, 0], params.stride, params.sigma2, width, read_size)
    f_y = filter_axis(params.centre_px[:, 1], params.stride, params.sigma2, height, read_size)
    return f_x, f_y


def read(images: torch.Tensor, f_x: torch.Tensor, f_y: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """images (B, H, W), F_X (B, N, W), F_Y (B, N, H), gamma (B,) -> (B, N, N) = gamma F_Y x F_X^T.

    Patch row i, column j is the image weighted by the filter at (mu^Y_i, mu^X_j).
    """
    return gamma[:, None, None] * (f_y @ images @ f_x.transpose(1, 2))
