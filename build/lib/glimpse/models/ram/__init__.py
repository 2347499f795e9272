"""Recurrent Attention Model: glimpse network, core, location policy, baseline, classifier; its
episodes through the environment (rollout.py) and its entry in the registry (family.py)."""
from glimpse.models.ram.family import RAMFamily
from glimpse.models.ram.model import RAMConfig, RAMStep, RecurrentAttentionModel

__all__ = ["RAMConfig", "RAMFamily", "RAMStep", "RecurrentAttentionModel"]
