"""RAM's location network f_l: a 2-D Gaussian policy over where to look next."""
from __future__ import annotations

import math

import torch
from torch import nn


class LocationPolicy(nn.Module):
    """pi(l | h) = N(mean(h), std^2 I) with mean = tanh(Linear(h)) in [-1, 1]^2 (the paper's mean is
    Linear(h); the tanh keeps it on the canvas) and a fixed std (the paper's; the trainer may
    anneal ``fixed_std`` over a run). Input h (B, hidden); outputs
    mean (B, 2) and std (B, 2)."""

    def __init__(self, hidden_size: int, std: float = 0.15):
        super().__init__()
        self.mean = nn.Linear(hidden_size, 2)
        # a 0-d buffer, not a Python float: a compiled forward reads it as data, so annealing it
        # recompiles nothing (a float is a constant dynamo guards on); not saved: the model config has it
        self.register_buffer("std", torch.tensor(float(std)), persistent=False)

    @property
    def fixed_std(self) -> float:
        return float(self.std)

    @fixed_std.setter
    def fixed_std(self, value: float) -> None:
        self.std.fill_(value)  # on the buffer's device: no host round trip

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = torch.tanh(self.mean(h))
        return mean, self.std.to(mean.dtype).expand_as(mean)

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
