"""DRAM's glimpse network (Ba et al. 2015): "what" and "where" combined by an element-wise product,
or, as an ablation, summed as RAM sums them."""
from __future__ import annotations

import torch
from torch import nn

from glimpse.models.ram.glimpse_network import ConvWhat, GlimpseNetwork

GLIMPSE_COMBINES = ("product", "sum")


class ProductGlimpseNetwork(nn.Module):
    """g_n = ReLU(Linear(conv(glimpse))) * ReLU(Linear(location)): the "what" features gated by
    where they were seen, the paper's product (RAM adds the two pathways instead); the conv
    pathway is the lab's :class:`ConvWhat`, smaller than the paper's.

    Input ``glimpse`` (B, k, g, g) (g divisible by 4: :class:`ConvWhat` pools twice) and
    ``location`` (B, 2); output (B, output_size).
    """

    def __init__(self, n_scales: int, glimpse_size: int, output_size: int):
        super().__init__()
        self.what = ConvWhat(n_scales, glimpse_size, output_size)
        self.where = nn.Linear(2, output_size)

    def forward(self, glimpse: torch.Tensor, location: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.what(glimpse)) * torch.relu(self.where(location))


def make_glimpse_network(combine: str, n_scales: int, glimpse_size: int, output_size: int) -> nn.Module:
    """The paper's product (:class:`ProductGlimpseNetwork`), or ``"sum"``: RAM's conv glimpse network
    (:class:`~glimpse.models.ram.glimpse_network.GlimpseNetwork`, what 128 and where 128 summed after one
    more linear layer each), which asks whether the product's gate is what DRAM loses by."""
    if combine == "product":
        return ProductGlimpseNetwork(n_scales, glimpse_size, output_size)
    if combine == "sum":
        return GlimpseNetwork(n_scales, glimpse_size, output_size=output_size, what="conv")
    raise ValueError(f"glimpse_combine must be one of {GLIMPSE_COMBINES}, got {combine!r}")
