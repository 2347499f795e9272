"""DRAW's "differentiable RAM" classifier (Gregor et al. 2015, cluttered MNIST experiment).

An LSTM that at each of T steps chooses a filterbank read from its previous state, reads an
N x N patch from the whole canvas through it, and updates its state; the class comes from the
final state. Attention is soft: every parameter of the read gets an exact gradient.
No training logic here: the trainer applies the loss to ``logits``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from glimpse.models.filterbank import SIGMA_UNITS, attention_params, filterbank_matrices, read
from glimpse.models.gradients import scale_gradient


@dataclass
class DRAWConfig:
    """canvas_size: side of the square canvas; read_size: side N of the N x N read; n_glimpses: steps T;
    sigma_units: "pixels" (the paper) or "stride"; min_sigma: a smooth floor on sigma in pixels, 0 in
    the paper; min_sigma_strides: a floor in strides, which follows the zoom, 0 in the paper (see
    filterbank.attention_params); attention_into_core: the share of the attention parameters'
    gradient let back into the LSTM state, 1 in the paper (see DRAWClassifier)."""

    canvas_size: int = 60
    read_size: int = 12
    n_glimpses: int = 8
    hidden_size: int = 256
    n_classes: int = 10
    sigma_units: str = "pixels"
    min_sigma: float = 0.0
    min_sigma_strides: float = 0.0
    attention_into_core: float = 1.0

    def __post_init__(self):
        if self.sigma_units not in SIGMA_UNITS:
            raise ValueError(f"sigma_units must be one of {SIGMA_UNITS}, got {self.sigma_units!r}")
        if not 0 <= self.attention_into_core <= 1:
            raise ValueError(f"attention_into_core must be in [0, 1], got {self.attention_into_core}")
        if not 0 <= self.min_sigma_strides < 0.5:
            raise ValueError(f"min_sigma_strides must be in [0, 0.5) strides, got {self.min_sigma_strides}")
        # the first read's filters are half a stride wide: the floors must leave room below that
        stride = (self.canvas_size - 1) / max(self.read_size - 1, 1)
        room = ((stride / 2) ** 2 - (self.min_sigma_strides * stride) ** 2) ** 0.5
        if not 0 <= self.min_sigma < room:
            raise ValueError(f"min_sigma must be in [0, {room:.2f}) pixels (half the first read's stride, "
                             f"less the stride floor), got {self.min_sigma}")

    def to_dict(self) -> dict:
        return asdict(self)


class DRAWClassifier(nn.Module):
    """images (B, 1, H, W) in [0, 1] -> dict of ``logits`` (B, C), ``centre`` (B, T, 2) unit (x, y),
    ``stride`` (B, T) pixels, ``sigma2`` (B, T), ``gamma`` (B, T), ``reads`` (B, T, N, N).

    Where to read next is a function of the state, and the read feeds the state: the gradient
    goes round that loop once per step, through the filters' derivative in their centre (in
    pixels per unit coordinate, half the canvas side: 50 on 100x100), and can grow by a factor
    per step. ``attention_into_core`` scales it where it leaves the attention parameters for
    the LSTM state: 1 is the paper (full backpropagation); below 1 the attention head itself
    still gets its exact gradient, and the state still learns from every read through the
    LSTM. The forward pass is the same for every setting (like RAM's ``reinforce_into_core``).
    """

    def __init__(self, config: DRAWConfig):
        super().__init__()
        self.config = config
        n, size = config.read_size, config.canvas_size
        self.cell = nn.LSTMCell(n * n, config.hidden_size)
        self.attention = nn.Linear(config.hidden_size, 5)
        self.classifier = nn.Linear(config.hidden_size, config.n_classes)
        # Step 1 (h = 0) reads the bias alone: centred (g~ = 0), grid over the whole canvas
        # (delta~ = 1), sigma = half the stride so neighbouring filters overlap without blurring
        # the whole canvas, gamma = 1. Small weights keep the first moves near that read.
        stride = (size - 1) / max(n - 1, 1)
        floor2 = config.min_sigma ** 2 + (config.min_sigma_strides * stride) ** 2
        initial_sigma2 = (stride / 2) ** 2 - floor2  # the part above the floors
        if config.sigma_units == "stride":
            initial_sigma2 /= stride ** 2
        with torch.no_grad():
            self.attention.weight.mul_(0.1)
            self.attention.bias.copy_(torch.tensor([0.0, 0.0, math.log(initial_sigma2), 0.0, 0.0]))

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        """images (B, 1, H, W) with H = W = canvas_size -> dict (see the class docstring)."""
        size = self.config.canvas_size
        if images.dim() != 4 or tuple(images.shape[1:]) != (1, size, size):
            raise ValueError(f"images must be (B, 1, {size}, {size}), got {tuple(images.shape)}")
        canvas = images[:, 0]
        batch = canvas.shape[0]
        h = canvas.new_zeros(batch, self.config.hidden_size)
        c = canvas.new_zeros(batch, self.config.hidden_size)
        records = {"centre": [], "stride": [], "sigma2": [], "gamma": [], "reads": []}
        for _ in range(self.config.n_glimpses):
            raw = self.attention(scale_gradient(h, self.config.attention_into_core))
            params = attention_params(raw, size, size, self.config.read_size, self.config.sigma_units,
                                      self.config.min_sigma, self.config.min_sigma_strides)
            f_x, f_y = filterbank_matrices(params, size, size, self.config.read_size)
            patch = read(canvas, f_x, f_y, params.gamma)
            h, c = self.cell(patch.flatten(1), (h, c))  # input: the patch; recurrence: h_{t-1}
            for key, value in (("centre", params.centre), ("stride", params.stride), ("sigma2", params.sigma2),
                               ("gamma", params.gamma), ("reads", patch)):
                records[key].append(value)
        out = {key: torch.stack(values, 1) for key, values in records.items()}
        out["logits"] = self.classifier(h)
        return out
