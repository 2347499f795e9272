"""RAM's learned baseline b_t: the expected reward from the current state, to reduce variance."""
from __future__ import annotations

import torch
from torch import nn


class BaselineNetwork(nn.Module):
    """b_t = Linear(h_t.detach()), (B, hidden) -> (B,).

    The input is detached: the baseline only reduces the variance of REINFORCE and must not
    shape the core's representation through its squared-error loss.
    """

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.linear(h.detach()).squeeze(-1)
