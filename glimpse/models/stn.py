"""The Spatial Transformer (Jaderberg et al. 2015) as a family: soft attention that crops.

A localisation network looks at the whole canvas (at half resolution) and predicts a
scale-and-translate transform, the "attention" case of the paper's affine transform:
``theta = [[s, 0, x], [0, s, y]]``. A differentiable bilinear sampler (``grid_sample``) reads
the ``crop_size`` x ``crop_size`` crop it describes, centred at (x, y) and ``s`` canvas-widths
wide, and a small CNN classifies the crop. Everything is trained by backpropagation, through the
sampler into the transform. It crops like hard attention (RAM's glimpse is a box too) but learns
like soft attention: the middle row of the contrast.

Components, each with its shapes: :class:`LocalisationNetwork`, :func:`crop`,
:class:`CropClassifier`, assembled by :class:`SpatialTransformerClassifier`; the family
(:class:`STNFamily`) tells the rest of the lab what it needs.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from envs.task import TASKS
from glimpse.models.channels_last import ChannelsLast
from glimpse.models.config_checks import check_fits_task
from glimpse.models.registry import Attention, Family, check_canvas_batch, register


MIN_CANVAS = 32


@dataclass
class STNConfig:
    """canvas_size: side of the square canvas; crop_size: side of the crop the classifier reads;
    localisation_channels / localisation_hidden: widths of the localisation network; channels:
    the classifier's two conv widths; hidden_size: its fully connected layer."""

    canvas_size: int = 60
    crop_size: int = 28
    localisation_channels: int = 20
    localisation_hidden: int = 50
    channels: tuple = (16, 32)
    hidden_size: int = 256
    n_classes: int = 10

    def __post_init__(self):
        self.channels = tuple(self.channels)
        if len(self.channels) != 2:
            raise ValueError(f"channels must be 2 conv widths, got {self.channels}")
        if self.canvas_size < MIN_CANVAS:  # the localisation network's two unpadded 5x5 convs need room
            raise ValueError(f"canvas_size must be >= {MIN_CANVAS} for the Spatial Transformer, got {self.canvas_size}")
        if self.crop_size < 8 or self.crop_size % 4:
            raise ValueError(f"crop_size must be a multiple of 4 and >= 8, got {self.crop_size}")

    def to_dict(self) -> dict:
        out = asdict(self)
        out["channels"] = list(self.channels)
        return out


class LocalisationNetwork(nn.Module):
    """images (B, 1, H, W) -> (centre (B, 2) unit (x, y) in (-1, 1), scale (B,) > 0).

    Half-resolution canvas, two 5x5 conv + 2x2 max-pool layers, a hidden layer, then the three
    numbers of the transform. The last layer starts at zero: the first crop is the whole canvas
    (s = 1, centre 0), and ``tanh`` keeps the centre on the canvas.

    Unpadded convolutions and flooring pools leave the last rows and columns unread: it sees the
    top-left ``field(canvas_size)`` square (56 of 60, 96 of 100). Kept as trained: the shipped
    checkpoints and the converged report's runs are this network. The crop can still reach there."""

    @staticmethod
    def field(canvas_size: int) -> int:
        """Side of the top-left square of the canvas that the output depends on."""
        used = 2 * ((((canvas_size // 2 - 4) // 2) - 4) // 2)  # rows of the last conv map the last pool reads
        return 2 * (2 * (used + 4) + 4)  # back through conv, pool, conv and the half-resolution pool

    def __init__(self, canvas_size: int, channels: int, hidden: int):
        super().__init__()
        self.features = ChannelsLast(
            nn.AvgPool2d(2), nn.Conv2d(1, channels, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(channels, channels, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        )
        side = ((canvas_size // 2 - 4) // 2 - 4) // 2
        self.hidden = nn.Sequential(nn.Linear(channels * side * side, hidden), nn.ReLU())
        self.transform = nn.Linear(hidden, 3)  # (log s, x, y) before squashing
        nn.init.zeros_(self.transform.weight)
        nn.init.zeros_(self.transform.bias)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raw = self.transform(self.hidden(self.features(images)))
        return torch.tanh(raw[:, 1:]), torch.exp(raw[:, 0])


def crop(images: torch.Tensor, centre: torch.Tensor, scale: torch.Tensor, size: int) -> torch.Tensor:
    """Bilinear crop: images (B, 1, H, W), centre (B, 2) unit (x, y), scale (B,) in canvas widths
    -> (B, 1, size, size). Unit coordinates as in envs.coords (-1 is the left/top edge), which is
    ``grid_sample``'s ``align_corners=False``; outside the canvas reads as 0."""
    zeros = torch.zeros_like(scale)
    theta = torch.stack([torch.stack([scale, zeros, centre[:, 0]], -1),
                         torch.stack([zeros, scale, centre[:, 1]], -1)], 1)  # (B, 2, 3)
    grid = F.affine_grid(theta, (len(images), 1, size, size), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


class CropClassifier(nn.Module):
    """crops (B, 1, c, c) -> logits (B, C): two 5x5 conv + 2x2 max-pool layers, a hidden layer."""

    def __init__(self, crop_size: int, channels: tuple, hidden: int, n_classes: int):
        super().__init__()
        c1, c2 = channels
        self.net = ChannelsLast(
            nn.Conv2d(1, c1, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(c2 * (crop_size // 4) ** 2, hidden), nn.ReLU(), nn.Linear(hidden, n_classes),
        )

    def forward(self, crops: torch.Tensor) -> torch.Tensor:
        return self.net(crops)


class SpatialTransformerClassifier(nn.Module):
    """images (B, 1, H, W) in [0, 1] -> dict of ``logits`` (B, C), ``centre`` (B, 2) unit (x, y),
    ``scale`` (B,) crop width in canvas widths, ``crop`` (B, 1, c, c)."""

    def __init__(self, config: STNConfig):
        super().__init__()
        self.config = config
        self.localisation = LocalisationNetwork(config.canvas_size, config.localisation_channels,
                                                config.localisation_hidden)
        self.classifier = CropClassifier(config.crop_size, config.channels, config.hidden_size, config.n_classes)

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        check_canvas_batch(images, self.config.canvas_size)
        centre, scale = self.localisation(images)
        crops = crop(images, centre, scale, self.config.crop_size)
        return {"logits": self.classifier(crops), "centre": centre, "scale": scale, "crop": crops}


@register
class STNFamily(Family):
    name = "stn"
    title = "Spatial Transformer (soft)"
    mode = "soft"
    Config = STNConfig
    Model = SpatialTransformerClassifier
    options = ("hidden_size",)
    task_overrides = {name: dict(n_glimpses=1) for name in TASKS}  # one crop per canvas
    report_epochs = 6
    quick_recipe = {"preset": "translated60", "epochs": 2, "batch_size": 64, "lr": 3e-3}
    # 40 looked level, yet 80 read 1.24 % against 1.59 % (seed 0, McNemar p = 0.002); rerun on
    # another machine, 80 read 1.38 % against the 40-epoch file's 1.92 % (p = 5e-5), and ships
    converged_epochs = 80
    attention_module_text = "the localisation network"

    def model_config(self, config) -> dict:
        return STNConfig(canvas_size=config.canvas_size, hidden_size=config.hidden_size).to_dict()

    def attention(self, outputs: dict, task: dict) -> Attention:
        width = outputs["scale"] * task["canvas_size"]
        return Attention(centres=outputs["centre"][:, None], boxes=width[:, None, None])

    def training_terms(self, look, config):
        return None, {"train/crop_scale": look.outputs["scale"].detach().mean()}

    def pixels_read(self, task: dict, model_config: dict) -> dict[str, int]:
        """The localisation network reads its field once (:meth:`LocalisationNetwork.field`); the
        sampler reads at most 4 canvas pixels per crop pixel (bilinear); the classifier receives the
        c x c crop."""
        config = self.config(model_config)
        check_fits_task(config, task)
        size, c = int(task["canvas_size"]), config.crop_size
        seen = LocalisationNetwork.field(size) ** 2
        return {"sensor_values": c * c, "canvas_pixels_touched": seen + min(size * size, 4 * c * c),
                "input_pixels": size * size}

    def attention_module(self, model: nn.Module) -> nn.Module:
        return model.localisation

    def sensor_and_gradient(self, train_config: dict) -> tuple[str, str]:
        return "crop: a bilinear window of the canvas", "backpropagation"
