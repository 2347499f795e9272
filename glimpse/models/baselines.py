"""The full-image baselines RAM is compared against (Mnih et al. 2014, Sec. 4.1): networks
that read every pixel of the canvas, with no attention at all."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from glimpse.models.registry import Family, check_canvas_batch, register


@dataclass
class FCConfig:
    canvas_size: int = 60
    hidden_size: int = 256
    n_layers: int = 2
    n_classes: int = 10

    def to_dict(self) -> dict:
        return asdict(self)


class FullyConnectedNet(nn.Module):
    """images (B, 1, H, W) in [0, 1] -> {"logits": (B, C)}: ``n_layers`` ReLU layers of
    ``hidden_size`` on the flattened canvas (the paper's "FC, 2 layers of 256")."""

    def __init__(self, config: FCConfig):
        super().__init__()
        self.config = config
        layers, width = [nn.Flatten()], config.canvas_size ** 2
        for _ in range(config.n_layers):
            layers += [nn.Linear(width, config.hidden_size), nn.ReLU()]
            width = config.hidden_size
        layers.append(nn.Linear(width, config.n_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        check_canvas_batch(images, self.config.canvas_size)
        return {"logits": self.net(images)}


@dataclass
class ConvConfig:
    canvas_size: int = 60
    n_filters: int = 8
    filter_size: int = 10
    stride: int = 5
    hidden_size: int = 256
    n_classes: int = 10

    def to_dict(self) -> dict:
        return asdict(self)


class ConvNet(nn.Module):
    """images (B, 1, H, W) in [0, 1] -> {"logits": (B, C)}: the paper's convolutional baseline,
    one layer of 8 10x10 filters with stride 5 (ReLU), then a fully connected ReLU layer of 256,
    then the classifier. Feature map: (B, 8, (H - 10) // 5 + 1, same)."""

    def __init__(self, config: ConvConfig):
        super().__init__()
        self.config = config
        side = (config.canvas_size - config.filter_size) // config.stride + 1
        if side < 1:
            raise ValueError(f"canvas_size {config.canvas_size} is smaller than the {config.filter_size}px filters")
        self.net = nn.Sequential(
            nn.Conv2d(1, config.n_filters, config.filter_size, config.stride), nn.ReLU(), nn.Flatten(),
            nn.Linear(config.n_filters * side * side, config.hidden_size), nn.ReLU(),
            nn.Linear(config.hidden_size, config.n_classes),
        )

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        # (H - 10) // 5 + 1 is 11 for every canvas from 60 to 64 px: without the check a 60x60 net reads them all
        check_canvas_batch(images, self.config.canvas_size)
        return {"logits": self.net(images)}


class FullImageFamily(Family):
    """What the two full-image baselines share: no attention, built from the canvas size and
    --hidden-size."""

    mode = "full"
    options = ("hidden_size",)

    def model_config(self, config) -> dict:
        return self.Config(canvas_size=config.canvas_size, hidden_size=config.hidden_size).to_dict()


@register
class FCFamily(FullImageFamily):
    name = "fc"
    title = "RAM paper's FC baseline (full image)"
    Config = FCConfig
    Model = FullyConnectedNet
    paper_error = "11.96"
    report_epochs = 30


@register
class ConvFamily(FullImageFamily):
    name = "cnn"
    title = "RAM paper's conv baseline (full image)"
    default_for_mode = True
    Config = ConvConfig
    Model = ConvNet
    paper_error = "8.09"
    report_epochs = 20
