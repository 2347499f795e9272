"""RAM's location network f_l: a 2-D Gaussian policy over where to look next."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class LocationPolicy(nn.Module):
    """pi(l | h) = N(mean(h), std^2 I), mean = tanh(Linear(h)) in [-1, 1]^2 (the paper), or with
    ``mean_hidden`` > 0 tanh(Linear(ReLU(Linear(h)))) through that many hidden units.

    ``std`` is fixed (the paper) or, with ``learn_std``, softplus(Linear(h)) clamped to
    [min_std, max_std]. Input h (B, hidden); outputs mean (B, 2) and std (B, 2).
    """

    def __init__(self, hidden_size: int, std: float = 0.15, learn_std: bool = False,
                 min_std: float = 0.01, max_std: float = 1.0, mean_hidden: int = 0):
        super().__init__()
        if mean_hidden > 0:
            self.mean = nn.Sequential(nn.Linear(hidden_size, mean_hidden), nn.ReLU(), nn.Linear(mean_hidden, 2))
        else:
            self.mean = nn.Linear(hidden_size, 2)
        self.fixed_std, self.min_std, self.max_std = std, min_std, max_std
        self.log_std_head = nn.Linear(hidden_size, 2) if learn_std else None
        if self.log_std_head is not None:  # start at the fixed std
            nn.init.zeros_(self.log_std_head.weight)
            nn.init.constant_(self.log_std_head.bias, math.log(math.expm1(std)))

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = torch.tanh(self.mean(h))
        if self.log_std_head is None:
            std = torch.full_like(mean, self.fixed_std)
        else:
            std = F.softplus(self.log_std_head(h)).clamp(self.min_std, self.max_std)
        return mean, std

    @staticmethod
    def sample(mean: torch.Tensor, std: torch.Tensor, generator: torch.Generator | None = None,
               noise: torch.Tensor | None = None) -> torch.Tensor:
        """A location drawn from the policy, *detached*: an action, not a differentiable path.
        ``noise``: standard normal draws of ``mean``'s shape to use instead of drawing them here."""
        if noise is None:
            device = generator.device if generator is not None else mean.device  # a CPU generator may drive a GPU model
            noise = torch.randn(mean.shape, generator=generator, device=device, dtype=mean.dtype).to(mean.device)
        return (mean + std * noise).detach()

    @staticmethod
    def log_prob(mean: torch.Tensor, std: torch.Tensor, location: torch.Tensor) -> torch.Tensor:
        """(B,) log-density of ``location`` (B, 2); the REINFORCE gradient flows through mean and std only."""
        z = (location.detach() - mean) / std
        return (-0.5 * z.pow(2) - torch.log(std) - 0.5 * math.log(2 * math.pi)).sum(-1)
