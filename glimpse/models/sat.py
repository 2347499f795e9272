"""Show, Attend and Tell (Xu et al. 2015) as a digit classifier: CNN features, soft attention."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from glimpse.models.attention_decoder import AttentionDecoder
from glimpse.models.sat_encoder import ConvEncoder


@dataclass
class SATConfig:
    canvas_size: int = 60
    n_glimpses: int = 4  # decoder steps, each one attention map
    channels: tuple = (16, 32, 64)
    attention_size: int = 128
    hidden_size: int = 256
    n_classes: int = 10

    def __post_init__(self):
        self.channels = tuple(self.channels)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["channels"] = list(self.channels)
        return out


class SATClassifier(nn.Module):
    """images (B, 1, H, W) in [0, 1] -> dict of ``logits`` (B, C), ``alpha`` (B, T, gh, gw), ``beta`` (B, T)."""

    def __init__(self, config: SATConfig):
        super().__init__()
        self.config = config
        self.encoder = ConvEncoder(config.channels)
        self.decoder = AttentionDecoder(self.encoder.feature_size, config.hidden_size, config.attention_size,
                                        config.n_glimpses)
        self.classifier = nn.Linear(config.hidden_size, config.n_classes)

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        size = self.config.canvas_size
        if images.dim() != 4 or tuple(images.shape[1:]) != (1, size, size):
            raise ValueError(f"images must be (B, 1, {size}, {size}), got {tuple(images.shape)}")
        features, (gh, gw) = self.encoder(images)
        h, alpha, beta = self.decoder(features)
        return {"logits": self.classifier(h), "alpha": alpha.unflatten(2, (gh, gw)), "beta": beta}


def doubly_stochastic_penalty(alpha: torch.Tensor) -> torch.Tensor:
    """Xu et al.'s regulariser sum_i (1 - sum_t alpha_ti)^2, averaged over the batch.

    alpha (B, T, gh, gw). The trainer weights it (--attention-weight); with fewer steps than
    cells it pushes attention to spread, so it is off by default for classification.
    """
    coverage = alpha.sum(1)  # (B, gh, gw): attention each cell got over all steps
    return ((1.0 - coverage) ** 2).flatten(1).sum(1).mean()
