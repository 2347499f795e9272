"""Show-Attend-Tell's encoder: a small CNN that turns the canvas into a grid of feature vectors."""
from __future__ import annotations

import torch
from torch import nn

from glimpse.models.channels_last import ChannelsLast


class ConvEncoder(nn.Module):
    """images (B, 1, H, W) -> features (B, L, D) with L = gh * gw cells, and the grid (gh, gw).

    A 5x5 stride-2 conv, then two 3x3 conv + 2x2 max-pool stages: an S x S canvas gives
    floor(ceil(S / 2) / 4) cells a side (28 -> 3, 60 -> 7, 100 -> 12), each a D = channels[-1]
    vector with a 23 x 23 px receptive field (about a digit). Total stride 8: the grid
    grows with the canvas rather than being pooled to a fixed size.
    """

    STRIDE = 8  # canvas pixels between neighbouring cells

    def __init__(self, channels: tuple[int, int, int] = (16, 32, 64)):
        super().__init__()
        c1, c2, c3 = channels
        self.layers = ChannelsLast(
            nn.Conv2d(1, c1, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c2, c3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.feature_size = c3

    @classmethod
    def cell_centres(cls, cells: int, like: torch.Tensor | None = None) -> torch.Tensor:
        """(cells,) continuous pixel coordinate of each cell's receptive-field centre along a side:
        8 i + 3.5, made on ``like``'s device and dtype (float32 on the CPU without it). The
        stride-2 conv centres its output j on pixel 2j (continuous 2j + 0.5), the first 2x2 pool
        output k between 4k + 0.5 and 4k + 2.5, the second output i between 8i + 1.5 and 8i + 5.5."""
        where = {} if like is None else {"device": like.device, "dtype": like.dtype}
        return torch.arange(cells, **({"dtype": torch.float32} | where)) * cls.STRIDE + (cls.STRIDE - 1) / 2

    @staticmethod
    def grid_size(size: int) -> int:
        """Cells along a side of the feature grid for a side of ``size`` pixels."""
        return ((size + 1) // 2) // 4

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int]]:
        maps = self.layers(images)  # (B, D, gh, gw)
        return maps.flatten(2).transpose(1, 2), (maps.shape[2], maps.shape[3])
