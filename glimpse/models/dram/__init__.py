"""Deep recurrent attention model (Ba et al. 2015): product glimpse network, two stacked LSTM
layers, context network; its entry in the registry (family.py). Its episodes are
glimpse/models/episodes.py's, as RAM's are."""
from glimpse.models.dram.family import DRAMFamily
from glimpse.models.dram.model import DeepRecurrentAttentionModel, DRAMConfig

__all__ = ["DRAMConfig", "DRAMFamily", "DeepRecurrentAttentionModel"]
