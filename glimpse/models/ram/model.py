"""The Recurrent Attention Model (Mnih et al. 2014), assembled from its components.

The model is a per-step function; the episode loop that feeds it glimpses from the environment
is glimpse/models/episodes.py, and the trainer (glimpse/training/hard.py) holds the training logic.
"""
from __future__ import annotations

from dataclasses import InitVar, asdict, dataclass
from typing import NamedTuple

import torch
from torch import nn

from glimpse.models.config_checks import (check_conv_glimpse_size, check_count, check_one_of, check_positive,
                                           check_share)
from glimpse.models.gradients import scale_gradient
from glimpse.models.ram.baseline import BaselineNetwork
from glimpse.models.ram.classifier import Classifier
from glimpse.models.ram.context import ContextNetwork
from glimpse.models.ram.core import CORES, REST
from glimpse.models.ram.glimpse_network import GlimpseNetwork
from glimpse.models.ram.location import LocationPolicy


@dataclass
class RAMConfig:
    """Sizes of the sensor and networks, the policy's std, and where its gradient goes.
    ``REMOVED``: options of earlier versions, and the value at which an old checkpoint still loads."""

    REMOVED = {"learn_std": False, "location_hidden": 0}
    glimpse_size: int = 12
    n_scales: int = 3
    n_glimpses: int = 6
    what_size: int = 128
    glimpse_net: str = "linear"  # the "what" pathway: the paper's linear layer, or "conv" (glimpse_network.py)
    where_size: int = 128
    hidden_size: int = 256
    core: str = "rnn"
    location_std: float = 0.15
    # share of the REINFORCE gradient that reaches the core and glimpse network (1: the paper; 0: it
    # stops at the location network). Old checkpoints say detach_policy_input=True/False instead.
    reinforce_into_core: float = 1.0
    detach_policy_input: InitVar[bool | None] = None
    policy: str = "learned"  # "random": look at uniformly random locations (the paper's baseline)
    # side of the coarse view of the whole canvas that sets the core's first state (Ba et al.'s
    # context network, context.py); 0: none, the core starts from rest
    context_size: int = 0
    n_classes: int = 10

    def __post_init__(self, detach_policy_input: bool | None = None):
        if detach_policy_input is not None:
            self.reinforce_into_core = 0.0 if detach_policy_input else 1.0
        check_share("reinforce_into_core", self.reinforce_into_core)
        check_one_of("core", self.core, CORES)
        check_one_of("policy", self.policy, ("learned", "random"))
        check_one_of("glimpse_net", self.glimpse_net, ("linear", "conv"))
        if self.glimpse_net == "conv":
            check_conv_glimpse_size(self.glimpse_size)
        check_count("context_size", self.context_size)
        check_positive("location_std", self.location_std)

    def to_dict(self) -> dict:
        return asdict(self)


class RAMStep(NamedTuple):
    """Outputs of one step for a batch B: ``logits`` (B, C); policy ``mean``/``std`` (B, 2) of
    the next location; ``baseline`` (B,); ``state``: the core state to pass to the next step."""

    logits: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    baseline: torch.Tensor
    state: tuple[torch.Tensor, ...]


class RecurrentAttentionModel(nn.Module):
    """glimpse (B, k, g, g) + location (B, 2) + state -> :class:`RAMStep`; with a context network
    (``context_size`` s > 0) the first step also takes the coarse view ``context`` (B, s, s),
    which sets the state the first glimpse is read into.

    ``reinforce_into_core`` scales the REINFORCE gradient where it leaves the location network
    for the core and glimpse network: 1 (RAMConfig's default) is the paper, 0 (train.py's
    default) stops it at the location network (a common stabiliser), and in between the policy
    still shapes the features (so they come to encode where the digit is) without its noise
    swamping the cross-entropy gradient.
    The forward values are the same for every setting.
    """

    def __init__(self, config: RAMConfig):
        super().__init__()
        self.config = config
        c = config
        self.glimpse_network = GlimpseNetwork(c.n_scales, c.glimpse_size, c.what_size, c.where_size, c.hidden_size,
                                             what=c.glimpse_net)
        self.core = CORES[c.core](c.hidden_size, c.hidden_size)
        self.location_policy = LocationPolicy(c.hidden_size, c.location_std)
        self.baseline = BaselineNetwork(c.hidden_size)
        self.classifier = Classifier(c.hidden_size, c.n_classes)
        self.context_network = ContextNetwork(c.context_size, c.hidden_size, c.core) if c.context_size else None

    def initial_state(self) -> tuple[torch.Tensor, ...]:
        """The core's state before the first glimpse: rest (``()``), whatever the batch or device."""
        return REST

    def forward(self, glimpse: torch.Tensor, location: torch.Tensor, state: tuple[torch.Tensor, ...],
                context: torch.Tensor | None = None) -> RAMStep:
        expected = (self.config.n_scales, self.config.glimpse_size, self.config.glimpse_size)
        if glimpse.dim() != 4 or tuple(glimpse.shape[1:]) != expected:
            raise ValueError(f"glimpse must be (B, {expected[0]}, {expected[1]}, {expected[2]}), got {tuple(glimpse.shape)}")
        if self.context_network is not None and not state:  # the first step, from rest
            if context is None:
                raise ValueError(f"this model's first step reads a context view (B, {self.config.context_size}, "
                                 f"{self.config.context_size}): make the env with context_size="
                                 f"{self.config.context_size}")
            state = self.context_network(context)
        elif context is not None:
            raise ValueError("context is read by the first step of a model with a context network only")
        g = self.glimpse_network(glimpse, location.detach())  # a location is an action: no gradient path
        h, state = self.core(g, state)
        policy_input = scale_gradient(h, self.config.reinforce_into_core)
        mean, std = self.location_policy(policy_input)
        return RAMStep(self.classifier(h), mean, std, self.baseline(h), state)

