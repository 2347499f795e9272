"""RAM's glimpse network f_g: what the sensor saw and where, combined into one vector."""
from __future__ import annotations

import torch
from torch import nn

from glimpse.models.channels_last import ChannelsLast
from glimpse.models.config_checks import check_conv_glimpse_size


class ConvWhat(ChannelsLast):
    """The "what" pathway as a small conv net, the lab's own (DRAM's glimpse network, Ba et al.
    2015, is convolutional too, and deeper): (B, k, g, g) -> (B, what_size).

    Two 3x3 convolutions of 16 and 32 channels, each followed by a 2x2 max-pool and ReLU, then a
    linear layer: its features no longer depend on exactly where in the patch a stroke falls,
    which a glimpse that lands a few pixels off needs. ``g`` must be divisible by 4.
    Pooling before ReLU gives the same values (ReLU is monotone) on a quarter of the elements, and
    the weights and input are channels-last (:class:`ChannelsLast`). Parameter names and shapes
    are those of the plain layout.
    """

    def __init__(self, n_scales: int, glimpse_size: int, what_size: int):
        check_conv_glimpse_size(glimpse_size)
        side = glimpse_size // 4
        super().__init__(
            nn.Conv2d(n_scales, 16, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(),
            nn.Flatten(), nn.Linear(32 * side * side, what_size),
        )


class GlimpseNetwork(nn.Module):
    """g_t = ReLU(Linear(h_g) + Linear(h_l)), h_g = ReLU(what(glimpse)), h_l = ReLU(Linear(location)).

    Input ``glimpse`` (B, k, g, g) and ``location`` (B, 2); output (B, output_size).
    ``what``: "linear", the paper's one linear layer on the flattened glimpse, or "conv"
    (:class:`ConvWhat`). Sizes in the paper: h_g 128, h_l 128, output 256.
    """

    def __init__(self, n_scales: int, glimpse_size: int, what_size: int = 128, where_size: int = 128,
                 output_size: int = 256, what: str = "linear"):
        super().__init__()
        if what == "linear":  # flattened in forward, so checkpoints keep the key what.weight
            self.what = nn.Linear(n_scales * glimpse_size * glimpse_size, what_size)
        elif what == "conv":
            self.what = ConvWhat(n_scales, glimpse_size, what_size)
        else:
            raise ValueError(f"what must be 'linear' or 'conv', got {what!r}")
        self.where = nn.Linear(2, where_size)
        self.what_out = nn.Linear(what_size, output_size)
        self.where_out = nn.Linear(where_size, output_size, bias=False)

    def forward(self, glimpse: torch.Tensor, location: torch.Tensor) -> torch.Tensor:
        h_what = torch.relu(self.what(glimpse.flatten(1) if isinstance(self.what, nn.Linear) else glimpse))
        h_where = torch.relu(self.where(location))
        # what_out(h_what) + where_out(h_where) in one addmm: no separate sum tensor to make and add
        return torch.relu(torch.addmm(self.what_out(h_what), h_where, self.where_out.weight.t()))
