"""Recurrent Attention Model: glimpse network, core, location policy, baseline, classifier."""
from glimpse.models.ram.model import RAMConfig, RAMStep, RecurrentAttentionModel

__all__ = ["RAMConfig", "RAMStep", "RecurrentAttentionModel"]
