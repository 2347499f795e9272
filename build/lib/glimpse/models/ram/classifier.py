"""RAM's action network f_a for classification: logits from the core state."""
from __future__ import annotations

import torch
from torch import nn


class Classifier(nn.Module):
    """logits = Linear(h_T), (B, hidden) -> (B, n_classes)."""

    def __init__(self, hidden_size: int, n_classes: int = 10):
        super().__init__()
        self.linear = nn.Linear(hidden_size, n_classes)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.linear(h)
