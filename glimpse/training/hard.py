"""Hard attention: RAM through the vector env, trained with the hybrid REINFORCE loss."""
from __future__ import annotations

import gymnasium
import numpy as np
import torch

import envs  # noqa: F401 - registers the environments
from glimpse.data import MNISTSplits
from glimpse.inference import ram_episodes
from glimpse.losses import hybrid_loss
from glimpse.models.ram import RAMConfig, RecurrentAttentionModel
from glimpse.rollout import run_episodes
from glimpse.training.config import TrainConfig
from glimpse.training.learner import task_of
from glimpse.viz import draw_glimpse_path, glimpse_strip, grid, side_by_side, stack_rows


class HardAttentionLearner:
    kind = "ram"

    def __init__(self, config: TrainConfig, data: MNISTSplits):
        self.config = config
        self.task = task_of(config)
        self.model_config = RAMConfig(
            glimpse_size=config.glimpse_size, n_scales=config.n_scales, n_glimpses=config.n_glimpses,
            hidden_size=config.hidden_size, core=config.core, location_std=config.location_std,
            learn_std=config.learn_std, detach_policy_input=config.detach_policy_input,
        ).to_dict()
        self.model = RecurrentAttentionModel(RAMConfig(**self.model_config))
        # the training env: one slot per image of the minibatch, the training split's digits
        self.env = gymnasium.make_vec("glimpse/ClutteredMNIST60-v0", num_envs=config.batch_size,
                                      vectorization_mode="vector_entry_point", split="train",
                                      data_dir=config.data_dir, **self.task)
        self.generator = torch.Generator()

    def loss(self, indices: np.ndarray, step_seed: int):
        self.generator.manual_seed(step_seed)
        rollout = run_episodes(self.model, self.env, sample=True, generator=self.generator, seed=step_seed,
                               options={"indices": indices})
        parts = hybrid_loss(rollout.logits, rollout.labels, rollout.reward, rollout.log_probs, rollout.baselines,
                            self.config.reinforce_weight, self.config.baseline_weight)
        metrics = {
            "losses/total": parts.total.detach(),
            "losses/classification": parts.classification.detach(),
            "losses/reinforce": parts.reinforce.detach(),
            "losses/baseline": parts.baseline.detach(),
            "charts/accuracy": (rollout.logits.argmax(-1) == rollout.labels).float().mean(),
            "charts/reward": rollout.reward.mean(),
            "charts/advantage_variance": parts.advantage.var(),
            "charts/baseline_mean": rollout.baselines.detach().mean(),
        }
        return parts.total, metrics

    @torch.no_grad()
    def pictures(self, images: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
        rollout = ram_episodes(self.model, self.task, images, labels, record_glimpses=True)
        g, k = self.task["glimpse_size"], self.task["n_scales"]
        paths = [draw_glimpse_path(canvas, path.numpy(), g, k) for canvas, path in zip(images, rollout.locations)]
        # the glimpse contents of the first half, each row beside its path, as in RAM's Figure 3
        contents = [side_by_side([path, glimpse_strip(glimpses.numpy(), height=path.shape[1] // 2)])
                    for path, glimpses in zip(paths[:len(paths) // 2], rollout.glimpses)]
        return {"attention/glimpse_paths": grid(paths), "attention/glimpse_contents": stack_rows(contents)}
