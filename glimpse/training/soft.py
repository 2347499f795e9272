"""Soft attention: DRAW's filterbank classifier or Show-Attend-Tell, trained by backpropagation
on the same canvases the hard model's env draws; the full-image baselines (fc, cnn) train the
same way, minus the attention."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from glimpse.canvas import make_canvases
from glimpse.data import MNISTSplits
from glimpse.inference import canvases_to_tensor, read_right
from glimpse.models import build_model
from glimpse.training.config import TrainConfig
from glimpse.training.learner import local_batch_size, task_of
from glimpse.viz import draw_filterbank_path, grid, overlay_attention, stack_rows


def soft_model_config(config: TrainConfig) -> dict:
    if config.mode == "full":
        return dict(canvas_size=config.canvas_size, hidden_size=config.hidden_size)
    if config.soft_arch == "draw":
        return dict(canvas_size=config.canvas_size, read_size=config.read_size, n_glimpses=config.n_glimpses,
                    hidden_size=config.hidden_size, sigma_units=config.draw_sigma,
                    min_sigma=config.draw_min_sigma, min_sigma_strides=config.draw_min_sigma_strides,
                    attention_into_core=config.attention_into_core)
    return dict(canvas_size=config.canvas_size, n_glimpses=config.n_glimpses, hidden_size=config.hidden_size,
                n_digits=config.n_digits)


class SoftAttentionLearner:
    def __init__(self, config: TrainConfig, data: MNISTSplits, device: torch.device | str = "cpu",
                 rank: int = 0, world_size: int = 1):
        self.config, self.device, self.rank, self.world_size = config, torch.device(device), rank, world_size
        self.local_batch = local_batch_size(config, world_size)
        self.kind = config.model_kind
        self.task = task_of(config)
        self.train_digits = data.train
        self.model_config = soft_model_config(config)
        self.model = build_model(self.kind, self.model_config).to(self.device)
        self.forward = self.model  # the loop may swap in a DistributedDataParallel wrapper

    def schedule(self, progress: float) -> dict[str, float]:
        return {}  # nothing but the learning rate changes over a soft run

    def loss(self, indices: np.ndarray, step_seed: int):
        """The canvases of the whole global minibatch ``indices`` from the step's seed; this
        process trains on its contiguous slice (so N processes match one with the same batch)."""
        batch = make_canvases(np.random.default_rng(step_seed), self.train_digits.images, self.train_digits.labels,
                              indices, self.config.canvas_size, self.config.n_clutter, self.config.centred_digit,
                              self.config.n_digits)
        lo, hi = self.rank * self.local_batch, (self.rank + 1) * self.local_batch
        labels = torch.from_numpy(batch.labels[lo:hi]).to(self.device)  # (B,) or (B, K) digits in reading order
        out = self.forward(canvases_to_tensor(batch.images[lo:hi]).to(self.device))
        logits = out["logits"]  # (B, C) or (B, K, C): each digit its own cross-entropy term
        classification = F.cross_entropy(logits.flatten(0, -2), labels.flatten())
        total = classification
        predictions = logits.argmax(-1)
        metrics = {"losses/classification": classification.detach(),
                   "charts/accuracy": read_right(predictions, labels).float().mean()}
        if labels.dim() == 2:
            metrics["charts/digit_accuracy"] = (predictions == labels).float().mean()
        if self.kind == "sat":
            from glimpse.models.sat import doubly_stochastic_penalty

            penalty = doubly_stochastic_penalty(out["alpha"])
            total = total + self.config.attention_weight * penalty
            metrics["losses/attention_regulariser"] = penalty.detach()
        elif self.kind == "draw":
            metrics["charts/filterbank_stride"] = out["stride"].detach().mean()
        metrics["losses/total"] = total.detach()
        return total, metrics

    @torch.no_grad()
    def pictures(self, images: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
        if self.kind not in ("draw", "sat"):
            return {}  # a full-image baseline looks everywhere: nothing to show
        self.model.eval()
        out = {k: v.cpu() for k, v in self.model(canvases_to_tensor(images).to(self.device)).items()
               if isinstance(v, torch.Tensor)}
        self.model.train()
        if self.kind == "draw":
            extents = out["stride"] * self.config.read_size
            paths = [draw_filterbank_path(canvas, centre.numpy(), extent.numpy())
                     for canvas, centre, extent in zip(images, out["centre"], extents)]
            return {"attention/filterbank_paths": grid(paths)}
        rows = [overlay_attention(canvas, alpha.numpy()) for canvas, alpha in zip(images, out["alpha"])]
        return {"attention/maps": stack_rows(rows[:len(rows) // 2])}
