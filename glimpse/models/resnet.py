"""A standard small residual CNN over the whole canvas: the no-attention control a reviewer asks
for first (is attention needed at all?), as strong as a modern CNN, unlike the RAM paper's 2014
baselines (glimpse/models/baselines.py). Two registered depths, the same total stride 16 (a 60x60
canvas ends as 4x4 cells, a 100x100 one as 7x7):

- ``resnet``, ResNet-14 (He et al. 2016's basic blocks): a coarse stem, a 5x5 stride-2 conv and a
  2x2 max-pool (stride 4, as ResNet's stem), then three stages of two basic blocks each (3x3
  convs, batch norm, ReLU, identity or 1x1 projection shortcuts) at widths 32, 64 and 128, the
  second and third stages starting with stride 2, global average pooling and a linear classifier:
  1 + 12 + 1 = 14 weighted layers and 0.70 M parameters.
- ``resnet-fine``, ResNet-18 with a fine stem: a 3x3 stride-2 conv and no pooling, so the first
  stage sees a 28-pixel digit as 14x14 cells instead of 7x7, then four stages at widths 16, 32, 64
  and 128: 1 + 16 + 1 = 18 weighted layers, 0.70 M parameters, 1.26 times ResNet-14's FLOPs.
  The fine stem is the published full-image baseline's lever on 100x100 (0.92 % fine against
  1.69 % coarse, ../shared/reference/published-results.md).

tests/test_controls.py counts the layers and parameters, whatever the canvas size.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from glimpse.models.channels_last import ChannelsLast
from glimpse.models.registry import Family, check_canvas_batch, register


@dataclass
class ResNetConfig:
    canvas_size: int = 60
    widths: tuple = (32, 64, 128)  # each stage's channels; every stage after the first halves the resolution
    blocks_per_stage: int = 2
    stem_stride: int = 4  # 4: 5x5 stride-2 conv + 2x2 max-pool (coarse); 2: 3x3 stride-2 conv (fine)
    n_classes: int = 10

    def __post_init__(self):
        self.widths = tuple(self.widths)
        if len(self.widths) < 1 or min(self.widths) < 1:
            raise ValueError(f"widths must be positive channel counts, got {self.widths}")
        if self.stem_stride not in (2, 4):
            raise ValueError(f"stem_stride must be 2 (fine) or 4 (coarse), got {self.stem_stride}")
        if self.canvas_size < self.total_stride:
            raise ValueError(f"canvas_size must be >= {self.total_stride} (the total stride), got {self.canvas_size}")

    @property
    def total_stride(self) -> int:
        return self.stem_stride * 2 ** (len(self.widths) - 1)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["widths"] = list(self.widths)
        return out


class BasicBlock(nn.Module):
    """x (B, C_in, H, W) -> ReLU(BN(conv(ReLU(BN(conv(x))))) + shortcut(x)), (B, C_out, H / s, W / s)."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Identity() if stride == 1 and c_in == c_out else nn.Sequential(
            nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNetClassifier(nn.Module):
    """images (B, 1, H, W) in [0, 1] -> {"logits": (B, C)}."""

    def __init__(self, config: ResNetConfig):
        super().__init__()
        self.config = config
        w1 = config.widths[0]
        if config.stem_stride == 4:
            self.stem = ChannelsLast(nn.Conv2d(1, w1, 5, 2, 2, bias=False), nn.BatchNorm2d(w1), nn.ReLU(),
                                     nn.MaxPool2d(2))
        else:
            self.stem = ChannelsLast(nn.Conv2d(1, w1, 3, 2, 1, bias=False), nn.BatchNorm2d(w1), nn.ReLU())
        stages, c_in = [], w1
        for index, width in enumerate(config.widths):
            for block in range(config.blocks_per_stage):
                stride = 2 if index > 0 and block == 0 else 1
                stages.append(BasicBlock(c_in, width, stride))
                c_in = width
        self.stages = ChannelsLast(*stages)
        self.classifier = nn.Linear(config.widths[-1], config.n_classes)

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        check_canvas_batch(images, self.config.canvas_size)
        features = self.stages(self.stem(images))  # (B, widths[-1], H / total_stride, W / total_stride)
        return {"logits": self.classifier(features.mean((2, 3)))}


@register
class ResNetFamily(Family):
    name = "resnet"
    title = "ResNet-14 (full image)"
    mode = "full"
    Config = ResNetConfig
    Model = ResNetClassifier
    report_epochs = 10
    quick_recipe = {"preset": "mnist28", "epochs": 2, "batch_size": 64, "lr": 3e-3}
    converged_epochs = 30  # +0.12 point over its last 20 % (the noise rule); 60 epochs: 1.20 against 1.36 %, p = 0.13

    architecture: dict = {}  # ResNetConfig fields other than its defaults

    def model_config(self, config) -> dict:
        return ResNetConfig(canvas_size=config.canvas_size, **self.architecture).to_dict()


@register
class FineResNetFamily(ResNetFamily):
    name = "resnet-fine"
    title = "ResNet-18, fine stem (full image)"
    architecture = {"widths": (16, 32, 64, 128), "stem_stride": 2}
    converged_epochs = 30  # +0.04 point over its last 20 % (98.84 to 98.88 %): converged by the noise rule
