"""RAM's core network f_h: the recurrent state that accumulates glimpses."""
from __future__ import annotations

import torch
from torch import nn


class ReLURNNCore(nn.Module):
    """h_t = ReLU(Linear(h_{t-1}) + Linear(g_t)), the paper's core. State: (h,), h (B, hidden)."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.input_to_hidden = nn.Linear(input_size, hidden_size)
        self.hidden_to_hidden = nn.Linear(hidden_size, hidden_size, bias=False)

    def initial_state(self, batch: int, device=None) -> tuple[torch.Tensor, ...]:
        return (torch.zeros(batch, self.hidden_size, device=device),)

    def forward(self, g: torch.Tensor, state: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """g (B, input) -> h_t (B, hidden) and the new state."""
        h = torch.relu(self.input_to_hidden(g) + self.hidden_to_hidden(state[0]))
        return h, (h,)


class LSTMCore(nn.Module):
    """LSTM core (the paper's choice for harder tasks). State: (h, c), each (B, hidden)."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.cell = nn.LSTMCell(input_size, hidden_size)

    def initial_state(self, batch: int, device=None) -> tuple[torch.Tensor, ...]:
        zeros = torch.zeros(batch, self.hidden_size, device=device)
        return (zeros, zeros.clone())

    def forward(self, g: torch.Tensor, state: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        h, c = self.cell(g, state)
        return h, (h, c)


CORES = {"rnn": ReLURNNCore, "lstm": LSTMCore}
