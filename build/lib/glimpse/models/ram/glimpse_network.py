"""RAM's glimpse network f_g: what the sensor saw and where, combined into one vector."""
from __future__ import annotations

import torch
from torch import nn


class GlimpseNetwork(nn.Module):
    """g_t = ReLU(Linear(h_g) + Linear(h_l)), h_g = ReLU(Linear(glimpse)), h_l = ReLU(Linear(location)).

    Input ``glimpse`` (B, k, g, g) and ``location`` (B, 2); output (B, output_size).
    Sizes in the paper: h_g 128, h_l 128, output 256.
    """

    def __init__(self, n_scales: int, glimpse_size: int, what_size: int = 128, where_size: int = 128,
                 output_size: int = 256):
        super().__init__()
        self.what = nn.Linear(n_scales * glimpse_size * glimpse_size, what_size)
        self.where = nn.Linear(2, where_size)
        self.what_out = nn.Linear(what_size, output_size)
        self.where_out = nn.Linear(where_size, output_size, bias=False)

    def forward(self, glimpse: torch.Tensor, location: torch.Tensor) -> torch.Tensor:
        h_what = torch.relu(self.what(glimpse.flatten(1)))
        h_where = torch.relu(self.where(location))
        return torch.relu(self.what_out(h_what) + self.where_out(h_where))
