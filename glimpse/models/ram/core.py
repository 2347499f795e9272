"""RAM's core network f_h: the recurrent state that accumulates glimpses.

A core starts from rest, the empty state ``()`` (:data:`REST`): the same as all-zero states, but
the first step skips the recurrent matrix product and its gradient, which would only multiply
zeros. Rest needs no batch size or device, so every core shares it.
"""
from __future__ import annotations

import torch
from torch import nn

REST: tuple[torch.Tensor, ...] = ()  # every core's state before the first glimpse


class ReLURNNCore(nn.Module):
    """h_t = ReLU(Linear(h_{t-1}) + Linear(g_t)), the paper's core. State: (h,), h (B, hidden),
    or ``()`` at rest (h_0 = 0)."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.input_to_hidden = nn.Linear(input_size, hidden_size)
        self.hidden_to_hidden = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, g: torch.Tensor, state: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """g (B, input) -> h_t (B, hidden) and the new state."""
        drive = self.input_to_hidden(g)
        if state:  # the recurrent term added inside the product: one addmm, no separate sum
            drive = torch.addmm(drive, state[0], self.hidden_to_hidden.weight.t())
        h = torch.relu(drive)
        return h, (h,)


class LSTMCore(nn.Module):
    """LSTM core (the paper's for its dynamic game; its classifiers use the ReLU RNN). State: (h, c), each (B, hidden), or
    ``()`` at rest (h_0 = c_0 = 0)."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.cell = nn.LSTMCell(input_size, hidden_size)

    def forward(self, g: torch.Tensor, state: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """g (B, input) -> h_t (B, hidden) and the new state (h_t, c_t)."""
        if state:
            h, c = self.cell(g, state)
            return h, (h, c)
        # from rest, LSTMCell's gates with h_0 = c_0 = 0: the forget gate has nothing to forget
        cell = self.cell
        gates = torch.addmm(cell.bias_ih + cell.bias_hh, g, cell.weight_ih.t())
        in_gate, _, candidate, out_gate = gates.chunk(4, dim=1)  # LSTMCell's order: i, f, g, o
        c = torch.sigmoid(in_gate) * torch.tanh(candidate)
        h = torch.sigmoid(out_gate) * torch.tanh(c)
        return h, (h, c)


CORES = {"rnn": ReLURNNCore, "lstm": LSTMCore}
