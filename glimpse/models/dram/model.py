"""The deep recurrent attention model (DRAM; Ba, Mnih and Kavukcuoglu, ICLR 2015), assembled
from its components.

Parts: a glimpse network ("what" times "where", glimpse_network.py; ``glimpse_combine="sum"`` sums
them as RAM does, an ablation), two stacked LSTM layers, a context network (``context_size`` > 0;
with 0, the paper's ablation without one, r2 starts from rest: the 60x60 recipe), an emission
network, a classifier, and REINFORCE's learned baseline, read from r2. The lower layer r1 reads the glimpses and
classifies; the upper layer r2 reads r1 and emits the next location; the context network reads a
coarse view of the whole canvas and sets r2's first state. So the classification loss trains the
glimpse network, r1 and the classifier only (locations are actions: no gradient path), and
REINFORCE trains the emission network, r2 and the context network, and, scaled by
``reinforce_into_core``, r1 and the glimpse network below it.

Differences from the paper. The networks are smaller: the "what" pathway is the lab's two 3x3
conv layers with pooling (glimpse/models/ram/glimpse_network.py's ConvWhat), not the paper's
deeper conv stack, and the classifier is one linear layer on r1. And, kept so that every hard
family plays the same episodes, the first glimpse falls where the task says (the centre, or at random), not where r2's first state would
send it; the context still decides the state that glimpse is read into, and so every later
location. On 100x100 (12-pixel glimpses, 4 scales) the first glimpse's widest scale (96 pixels)
sees nearly the whole canvas; on 60x60 (3 scales) it sees the middle 48.

The model is a per-step function (the step protocol of glimpse/models/episodes.py); it holds no
training logic.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from glimpse.models.config_checks import (check_conv_glimpse_size, check_count, check_one_of, check_positive,
                                           check_share)
from glimpse.models.dram.glimpse_network import GLIMPSE_COMBINES, make_glimpse_network
from glimpse.models.gradients import scale_gradient
from glimpse.models.ram.baseline import BaselineNetwork
from glimpse.models.ram.classifier import Classifier
from glimpse.models.ram.context import ContextNetwork
from glimpse.models.ram.core import REST, LSTMCore
from glimpse.models.ram.location import LocationPolicy
from glimpse.models.ram.model import RAMStep


@dataclass
class DRAMConfig:
    """Sizes of the sensor and networks, the emission policy's std, and where REINFORCE's gradient goes."""

    glimpse_size: int = 12
    n_scales: int = 4
    n_glimpses: int = 6
    hidden_size: int = 256  # the glimpse vector and both LSTM layers
    location_std: float = 0.15
    # share of the REINFORCE gradient that goes on from the upper layer into the lower layer and the
    # glimpse network (1: the paper; 0: only the emission network, r2 and the context network learn from it)
    reinforce_into_core: float = 1.0
    # side of the coarse view of the whole canvas that sets r2's first state; 0: none (r2 starts from rest)
    context_size: int = 0
    n_classes: int = 10
    glimpse_combine: str = "product"  # how "what" and "where" meet: the paper's product, or RAM's sum
    policy: str = "learned"  # DRAM always learns where to look (the episode protocol asks)

    def __post_init__(self):
        check_conv_glimpse_size(self.glimpse_size)  # DRAM's glimpse network is convolutional
        check_share("reinforce_into_core", self.reinforce_into_core)
        check_count("context_size", self.context_size)
        check_positive("location_std", self.location_std)
        check_one_of("glimpse_combine", self.glimpse_combine, GLIMPSE_COMBINES)
        if self.policy != "learned":
            raise ValueError(f"DRAM's policy is always 'learned', got {self.policy!r}")

    def to_dict(self) -> dict:
        return asdict(self)


class DeepRecurrentAttentionModel(nn.Module):
    """glimpse (B, k, g, g) + location (B, 2) + state -> :class:`~glimpse.models.ram.model.RAMStep`:
    ``logits`` (B, C) from r1, the emission policy's ``mean``/``std`` (B, 2) and the ``baseline``
    (B,) from r2, and ``state`` = (r1's (h, c), r2's (h, c)), each (B, hidden). The first step
    (``state`` is rest, ``()``) also takes the coarse view ``context`` (B, s, s) when the model
    has a context network (``context_size`` s > 0).
    """

    def __init__(self, config: DRAMConfig):
        super().__init__()
        self.config = c = config
        self.glimpse_network = make_glimpse_network(c.glimpse_combine, c.n_scales, c.glimpse_size, c.hidden_size)
        self.lower = LSTMCore(c.hidden_size, c.hidden_size)  # r1: classification
        self.upper = LSTMCore(c.hidden_size, c.hidden_size)  # r2: where to look next
        self.location_policy = LocationPolicy(c.hidden_size, c.location_std)  # the emission network
        self.baseline = BaselineNetwork(c.hidden_size)
        self.classifier = Classifier(c.hidden_size, c.n_classes)
        self.context_network = ContextNetwork(c.context_size, c.hidden_size, "lstm") if c.context_size else None

    def initial_state(self) -> tuple:
        """Both layers at rest (``()``), whatever the batch or device."""
        return REST

    def forward(self, glimpse: torch.Tensor, location: torch.Tensor, state: tuple,
                context: torch.Tensor | None = None) -> RAMStep:
        expected = (self.config.n_scales, self.config.glimpse_size, self.config.glimpse_size)
        if glimpse.dim() != 4 or tuple(glimpse.shape[1:]) != expected:
            raise ValueError(f"glimpse must be (B, {expected[0]}, {expected[1]}, {expected[2]}), got {tuple(glimpse.shape)}")
        if state:
            if context is not None:
                raise ValueError("context is read by the first step of a model with a context network only")
            lower, upper = state
        else:  # the first step: r1 from rest, r2 from the context (or rest)
            if self.context_network is not None and context is None:
                raise ValueError(f"this model's first step reads a context view (B, {self.config.context_size}, "
                                 f"{self.config.context_size}): make the env with context_size="
                                 f"{self.config.context_size}")
            if self.context_network is None and context is not None:
                raise ValueError("context is read by the first step of a model with a context network only")
            lower, upper = REST, (REST if context is None else self.context_network(context))
        g = self.glimpse_network(glimpse, location.detach())  # a location is an action: no gradient path
        r1, lower = self.lower(g, lower)
        r2, upper = self.upper(scale_gradient(r1, self.config.reinforce_into_core), upper)
        mean, std = self.location_policy(r2)
        return RAMStep(self.classifier(r1), mean, std, self.baseline(r2), (lower, upper))
