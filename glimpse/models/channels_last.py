"""Conv stacks run channels-last (NHWC), the layout oneDNN and cuDNN convolve fastest.

On this lab's 2-core CPU, forward + backward of a batch of 128 at one thread (``python
benchmarks/speed.py`` measures whole families): ResNet-14 about 1.2-1.3x faster, Show-Attend-Tell's
encoder 1.3x on 60x60 and 1.7x on 100x100, RAM's conv glimpse network 1.5-2x.
"""
from __future__ import annotations

import torch
from torch import nn


class ChannelsLast(nn.Sequential):
    """``nn.Sequential`` over (B, C, H, W) input whose conv weights and input are channels-last.

    Same parameter names and, up to float rounding, the same outputs and gradients as the plain
    ``nn.Sequential`` of the same layers; layers after a ``Flatten`` see the usual (B, C*H*W) order.
    """

    def __init__(self, *layers: nn.Module):
        super().__init__(*layers)
        # in place, not Module.to(memory_format=...): that cannot run on fake tensors
        # (tests/test_fake_cuda.py); Module.to(device) keeps the layout
        for parameter in self.parameters():
            if parameter.dim() == 4:
                parameter.data = parameter.data.contiguous(memory_format=torch.channels_last)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return super().forward(images.contiguous(memory_format=torch.channels_last))
