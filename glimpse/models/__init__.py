"""Model registry: a checkpoint stores ``kind`` and ``model_config``; this rebuilds the model.

kinds: ``ram`` (hard attention), ``draw`` and ``sat`` (soft attention), and the comparison
baselines of the lab.
"""
from __future__ import annotations

from torch import nn

HARD_KINDS = ("ram",)
SOFT_KINDS = ("draw", "sat")
BASELINE_KINDS = ("fc", "cnn")  # full-image networks, no attention


def model_classes(kind: str):
    """(config class, model class) of a kind; imported lazily so each model stays independent."""
    if kind == "ram":
        from glimpse.models.ram import RAMConfig, RecurrentAttentionModel

        return RAMConfig, RecurrentAttentionModel
    if kind == "draw":
        from glimpse.models.draw import DRAWClassifier, DRAWConfig

        return DRAWConfig, DRAWClassifier
    if kind == "sat":
        from glimpse.models.sat import SATClassifier, SATConfig

        return SATConfig, SATClassifier
    if kind in BASELINE_KINDS:
        from glimpse.models.baselines import ConvConfig, ConvNet, FCConfig, FullyConnectedNet

        return (FCConfig, FullyConnectedNet) if kind == "fc" else (ConvConfig, ConvNet)
    raise ValueError(f"unknown model kind {kind!r}; expected one of {HARD_KINDS + SOFT_KINDS + BASELINE_KINDS}")


def build_model(kind: str, model_config: dict) -> nn.Module:
    config_class, model_class = model_classes(kind)
    try:
        config = config_class(**model_config)
    except TypeError as exc:
        raise ValueError(f"model config does not fit {config_class.__name__}: {exc}") from exc
    return model_class(config)
