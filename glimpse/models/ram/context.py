"""The context network of Ba et al.'s (2015) deep recurrent attention model: a coarse view of the
whole canvas sets the core's first state, so the first location the policy picks already knows
where the digits are.

Here the first glimpse still falls where the task says (the centre); the context decides the
state that glimpse is read into, and so every later location. The coarse view comes from the
environment (the task's ``context_size``), as DRAM's down-sampled input image does.

Unlike DRAM's, RAM's context feeds its only core, which also classifies: the classification loss
trains this network, and RAM can read digits from the coarse view itself (a 50x50 view of a 100x100
canvas keeps them legible). DRAM keeps the view from its classifier (r1 never sees r2); so with a
context network, RAM against DRAM is not a contrast of the glimpses alone.
"""
from __future__ import annotations

import torch
from torch import nn

from glimpse.models.channels_last import ChannelsLast


class ContextNetwork(nn.Module):
    """context (B, s, s) in [0, 1] -> the core's first state: ``(h0,)`` (B, hidden) for the ReLU
    RNN core, ``(h0, c0)`` for the LSTM (h0 through tanh).

    Three conv layers (5x5 with 16 channels, then two 3x3 with 32, each stride 2, ReLU) and a
    linear layer to the state. That layer starts at zero: the first state is then the core's rest
    state, so a model warm-started from one without context (``--init-from``) first reads exactly
    as it did, and learns from there what the coarse view adds.
    """

    def __init__(self, context_size: int, hidden_size: int, core: str):
        super().__init__()
        self.context_size, self.core = context_size, core
        self.features = ChannelsLast(
            nn.Conv2d(1, 16, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Flatten(),
        )
        side = context_size
        for _ in range(3):
            side = (side + 1) // 2  # each stride-2 layer with its padding: ceil(side / 2)
        self.to_state = nn.Linear(32 * side * side, hidden_size * (2 if core == "lstm" else 1))
        nn.init.zeros_(self.to_state.weight)
        nn.init.zeros_(self.to_state.bias)

    def forward(self, context: torch.Tensor) -> tuple[torch.Tensor, ...]:
        s = self.context_size
        if context.dim() != 3 or tuple(context.shape[1:]) != (s, s):
            raise ValueError(f"context must be (B, {s}, {s}), got {tuple(context.shape)}")
        state = self.to_state(self.features(context[:, None]))
        if self.core == "lstm":
            h, c = state.chunk(2, dim=1)
            return torch.tanh(h), c  # h as an LSTM's output is bounded; its cell is not
        # no ReLU here: at the zero start its gradient would be zero, and the layer would never learn
        return (state,)
