"""Hard attention: a family of ``mode = "hard"`` (RAM, DRAM) plays episodes through the vector env
(``HardFamily.episodes``) and learns with the hybrid REINFORCE loss (glimpse/losses.py)."""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from envs import ClutteredMNISTVectorEnv
from envs.data import Digits, MNISTSplits
from envs.engine import first_locations
from glimpse.gradient_noise import baseline_name, reinforce_gradient_fn
from glimpse.losses import credited_reward, hybrid_loss
from glimpse.inference import read_right
from glimpse.models.episodes import episode_env
from glimpse.training.config import TrainConfig
from glimpse.training.learner import LearnerSetup, training_canvases


class HardAttentionLearner(LearnerSetup):
    def __init__(self, config: TrainConfig, data: MNISTSplits, device: torch.device | str = "cpu",
                 rank: int = 0, world_size: int = 1):
        super().__init__(config, data, device, rank, world_size)
        # the training env: one slot per trajectory (--reinforce-samples per image) of this process's share
        self.samples = config.reinforce_samples
        # the trainer's actions are valid by construction: validate=False keeps episodes on the device
        # (it plays the canvases given to it, drawn from the training digits: it loads no digits itself)
        self.env = episode_env(self.task, self.local_batch * self.samples, self.device, validate=False)

    def loss(self, indices: np.ndarray, step_seed: int):
        """``indices`` is the global minibatch; this process plays episodes on its contiguous slice.

        The randomness is that of the whole global batch, drawn on the device from the step's
        seed (first locations, then canvases, then the location noise of every episode), and
        sliced: so N processes take the same steps as one process with the same --batch-size.
        With K = --reinforce-samples > 1 each image is played K times, next to each other, on the
        same canvas from the same first location; only the sampled locations differ.
        """
        generator = self.generator.manual_seed(step_seed)
        lo, hi = self.rank * self.local_batch, (self.rank + 1) * self.local_batch
        first = first_locations(generator, len(indices), self.task["first_location"])
        batch = training_canvases(self.train_digits, generator, indices, self.task)
        k = self.samples

        def noise(mean: torch.Tensor) -> torch.Tensor:
            draws = torch.randn((len(indices) * k, *mean.shape[1:]), generator=generator, device=self.device,
                                dtype=mean.dtype)
            return draws[lo * k:hi * k]

        def per_trajectory(rows: torch.Tensor) -> torch.Tensor:
            return rows[lo:hi].repeat_interleave(k, dim=0)

        rollout = self.family.episodes(self.model, self.env, sample=True, noise=noise, forward=self.forward, samples=k,
                               options={"images": per_trajectory(batch.images), "labels": per_trajectory(batch.labels),
                                        "first_location": per_trajectory(first)})
        predictions = rollout.logits.argmax(-1)
        reward = credited_reward(rollout.reward, rollout.logits, rollout.labels, self.task["n_glimpses"],
                                 rollout.log_probs.shape[1], self.config.reinforce_reward)
        parts = hybrid_loss(rollout.logits, rollout.labels, reward, rollout.log_probs, rollout.baselines,
                            samples=k)
        metrics = {
            "losses/total": parts.total.detach(),
            "losses/classification": parts.classification.detach(),
            "losses/reinforce": parts.reinforce.detach(),
            "losses/baseline": parts.baseline.detach(),
            "train/accuracy": read_right(predictions, rollout.labels).float().mean(),
            "train/reward": rollout.reward.mean(),
            "train/advantage_variance": parts.advantage.var(),
            "train/baseline_mean": rollout.baselines.detach().mean(),
        }
        if rollout.labels.dim() == 2:
            metrics["train/digit_accuracy"] = (predictions == rollout.labels).float().mean()
        return parts.total, metrics

    @staticmethod
    def attention_gradient(arch: str, model: torch.nn.Module, train_config: dict, task: dict, digits: Digits,
                           batch_size: int, seed: int, data_dir: str | None
                           ) -> tuple[Callable[[int], torch.Tensor], str]:
        """The gradient this learner moves the attention by, for glimpse.gradient_noise's
        ``gradient_estimates``: ``i ->`` one minibatch's REINFORCE estimate (d,) of the location
        policy's gradient, the minibatch's episodes played through the env from ``seed + i``, with
        the run's baseline (``train_config``'s reinforce_samples K: the learned baseline, or K
        trajectories of each of the ``batch_size`` training images and the leave-one-out baseline)
        and its credited reward (``reinforce_reward``); and the estimator's name. The env loads its
        own training digits from ``data_dir`` (``digits`` is unused: REINFORCE reads the canvas only
        through the env)."""
        samples = train_config.get("reinforce_samples", 1)
        env = ClutteredMNISTVectorEnv(batch_size * samples, **{**task, "split": "train", "data_dir": data_dir})
        reward = train_config.get("reinforce_reward", "sequence")
        grad_fn = reinforce_gradient_fn(arch, model, env, seed, samples, reward)
        return grad_fn, f"REINFORCE + {baseline_name(samples)}"
