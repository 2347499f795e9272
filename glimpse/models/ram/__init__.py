"""Recurrent Attention Model: glimpse network, core, location policy, baseline, classifier, and
its entry in the registry (family.py); its episodes are glimpse/models/episodes.py's."""
from glimpse.models.ram.family import RAMFamily
from glimpse.models.ram.model import RAMConfig, RAMStep, RecurrentAttentionModel

__all__ = ["RAMConfig", "RAMFamily", "RAMStep", "RecurrentAttentionModel"]
