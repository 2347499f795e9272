"""DRAW's Gaussian filterbank read (Gregor et al. 2015, section 3.2), batched.

An N x N grid of isotropic 2-D Gaussian filters, placed by its centre (gX, gY) and stride
delta, with variance sigma^2, reads ``gamma * F_Y x F_X^T``: an N x N patch, differentiable in
every attention parameter.

One adaptation: the paper maps g~ in [-1, 1] to (A+1)/2 (g~+1) on a 1-indexed pixel grid.
Here g~ is exactly the unit coordinate of glimpse/coords.py (g~ = 0 is the canvas centre,
+-1 its edges) and filters are evaluated at pixel centres a + 0.5, so the filterbank, the hard
glimpse sensor and the drawings share one coordinate system.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from glimpse.coords import unit_to_pixels

NORMALISER_EPS = 1e-8  # Z can underflow to 0 when the grid lies off the canvas: never divide by 0


class FilterbankParams(NamedTuple):
    """Batch B: ``centre`` (B, 2) unit (x, y); ``centre_px`` (B, 2) pixels; ``stride`` (B,) pixels
    between filters; ``sigma2`` (B,) filter variance in pixels^2; ``gamma`` (B,) read intensity."""

    centre: torch.Tensor
    centre_px: torch.Tensor
    stride: torch.Tensor
    sigma2: torch.Tensor
    gamma: torch.Tensor


def attention_params(raw: torch.Tensor, height: int, width: int, read_size: int) -> FilterbankParams:
    """raw (B, 5) = (g~X, g~Y, log sigma^2, log delta~, log gamma), e.g. a linear map of a state.

    delta = (max(A, B) - 1) / (N - 1) * delta~, so delta~ = 1 spreads the grid over the canvas.
    """
    gx, gy, log_sigma2, log_delta, log_gamma = raw.unbind(-1)
    centre = torch.stack([gx, gy], -1)
    centre_px = torch.stack([unit_to_pixels(gx, width), unit_to_pixels(gy, height)], -1)
    stride = (max(height, width) - 1) / max(read_size - 1, 1) * torch.exp(log_delta)
    return FilterbankParams(centre, centre_px, stride, torch.exp(log_sigma2), torch.exp(log_gamma))


def filter_axis(centre: torch.Tensor, stride: torch.Tensor, sigma2: torch.Tensor, length: int,
                read_size: int) -> torch.Tensor:
    """(B,) centre, stride, sigma2 along one axis -> (B, N, length) normalised filters.

    mu_i = centre + (i - (N - 1) / 2) * stride for i = 0..N-1 (the paper's i - N/2 - 0.5, 1-indexed).
    """
    offsets = torch.arange(read_size, dtype=centre.dtype, device=centre.device) - (read_size - 1) / 2
    mu = centre[:, None] + offsets[None, :] * stride[:, None]  # (B, N)
    pixels = torch.arange(length, dtype=centre.dtype, device=centre.device) + 0.5  # pixel centres
    filters = torch.exp(-((pixels[None, None, :] - mu[:, :, None]) ** 2) / (2 * sigma2[:, None, None]))
    return filters / filters.sum(-1, keepdim=True).clamp_min(NORMALISER_EPS)


def filterbank_matrices(params: FilterbankParams, height: int, width: int, read_size: int):
    """-> F_X (B, N, W) and F_Y (B, N, H)."""
    f_x = filter_axis(params.centre_px[:, 0], params.stride, params.sigma2, width, read_size)
    f_y = filter_axis(params.centre_px[:, 1], params.stride, params.sigma2, height, read_size)
    return f_x, f_y


def read(images: torch.Tensor, f_x: torch.Tensor, f_y: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """images (B, H, W), F_X (B, N, W), F_Y (B, N, H), gamma (B,) -> (B, N, N) = gamma F_Y x F_X^T."""
    return gamma[:, None, None] * (f_y @ images @ f_x.transpose(1, 2))
