"""Backpropagation: a soft-attention family (DRAW, Show-Attend-Tell, the Spatial Transformer) or
a full-image baseline, trained on canvases the engine draws on the model's device (the recipe the
hard model's env uses). The loss is
cross-entropy plus whatever terms the family adds (``Family.training_terms``)."""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from envs.data import Digits
from glimpse.gradient_noise import soft_gradient_fn
from glimpse.inference import read_right
from glimpse.models import Look, get_family
from glimpse.models.registry import canvases_to_tensor
from glimpse.training.learner import LearnerSetup, training_canvases


class BackpropLearner(LearnerSetup):
    """Cross-entropy (one term per digit) plus the family's own terms, backpropagated through the model."""

    def loss(self, indices: np.ndarray, step_seed: int):
        """The canvases of the whole global minibatch ``indices`` from the step's seed; this
        process trains on its contiguous slice (so N processes match one with the same batch)."""
        config = self.config
        batch = training_canvases(self.train_digits, self.generator.manual_seed(step_seed), indices, self.task)
        lo, hi = self.rank * self.local_batch, (self.rank + 1) * self.local_batch
        labels = batch.labels[lo:hi]  # (B,) or (B, K) digits in reading order
        outputs = self.family.training_forward(self.forward, canvases_to_tensor(batch.images[lo:hi], self.device),
                                               self.generator, slice(lo, hi), len(indices))
        look = Look(outputs["logits"], None, outputs)
        logits = look.logits  # (B, C) or (B, K, C): each digit its own cross-entropy term
        classification = F.cross_entropy(logits.flatten(0, -2), labels.flatten())
        extra, metrics = self.family.training_terms(look, config)
        total = classification if extra is None else classification + extra
        predictions = logits.argmax(-1)
        metrics.update({"losses/classification": classification.detach(), "losses/total": total.detach(),
                        "train/accuracy": read_right(predictions, labels).float().mean()})
        if labels.dim() == 2:
            metrics["train/digit_accuracy"] = (predictions == labels).float().mean()
        return total, metrics

    @staticmethod
    def attention_gradient(arch: str, model: torch.nn.Module, train_config: dict, task: dict, digits: Digits,
                           batch_size: int, seed: int, data_dir: str | None
                           ) -> tuple[Callable[[int], torch.Tensor], str]:
        """The gradient this learner moves the attention by, for glimpse.gradient_noise's
        ``gradient_estimates``: ``i ->`` one minibatch's backpropagated gradient (d,) of cross-entropy
        w.r.t. the attention parameters, through the family's training forward (so sampled
        locations, where it samples, are those it trained with), on ``batch_size`` canvases of
        ``digits`` drawn from ``seed + i``; and its name (the family's, e.g. the reparameterised
        gradient, else "backpropagation"). ``data_dir`` is unused: the canvases come from ``digits``."""
        words = get_family(arch).sensor_and_gradient(train_config)
        return soft_gradient_fn(model, arch, task, digits, batch_size, seed), words[1] if words else "backpropagation"
