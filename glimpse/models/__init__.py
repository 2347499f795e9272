"""The attention families, each registered by importing its module (one name per family on the import line below).

``get_family(kind)`` answers everything about a model kind; ``build_model(kind, model_config)``
rebuilds a model from what a checkpoint stores. See :mod:`glimpse.models.registry`.
"""
from glimpse.models import ram, dram, draw, sat, stn, ram_diff, baselines, sat_pooled, resnet  # noqa: F401 - registers them; tables list them in this order
from glimpse.models.registry import Attention, Family, Look, build_model, default_family, find_family, get_family, list_families

__all__ = ["Attention", "Family", "Look", "build_model", "default_family", "get_family", "list_families"]
