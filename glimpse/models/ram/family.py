"""RAM as a family of the registry: what the rest of the lab needs to know about hard attention.

RAM learns by REINFORCE through the environment (``mode = "hard"``); it reads a canvas by playing
an episode (:mod:`glimpse.models.ram.rollout`), so evaluation can be random: where a random first
glimpse falls, and the noise of sampled locations (``--samples``), drawn once per evaluation set.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from envs.task import GlimpseTask
from glimpse.models.ram.model import RAMConfig, RecurrentAttentionModel
from glimpse.models.ram.rollout import ram_episodes
from glimpse.models.registry import Attention, Family, Look, register


@register
class RAMFamily(Family):
    name = "ram"
    title = "RAM (hard, REINFORCE)"
    mode = "hard"
    Config = RAMConfig
    Model = RecurrentAttentionModel
    reads_several_digits = True
    options = ("glimpse_size", "n_scales", "n_glimpses", "first_location", "core", "glimpse_net", "hidden_size", "location_std",
               "location_std_final", "random_glimpses", "reinforce_into_core", "reinforce_samples",
               "reinforce_reward", "context_size")
    paper_error = "4.08 (6 glimpses)"
    report_epochs = 20
    report_sweep = True
    converged_recipe = {"core": "lstm", "glimpse_net": "conv", "location_std": 0.25, "location_std_final": 0.1,
                        "reinforce_into_core": 0.1, "reinforce_samples": 4}
    converged_epochs = 80  # 44 epochs still gained 0.44-0.52 points over their last 20 %
    attention_module_text = "the location policy's mean head"
    added_modules = ("context_network",)

    def model_config(self, config) -> dict:
        return RAMConfig(
            glimpse_size=config.glimpse_size, n_scales=config.n_scales, n_glimpses=config.n_glimpses,
            hidden_size=config.hidden_size, core=config.core, glimpse_net=config.glimpse_net,
            # annealed: the checkpoint records the std the policy ends with (what --samples draws with)
            location_std=config.location_std_final or config.location_std,
            reinforce_into_core=config.reinforce_into_core,
            policy="random" if config.random_glimpses else "learned", context_size=config.context_size,
        ).to_dict()

    def run(self, model: nn.Module, images: np.ndarray, task: dict, *, draws: dict | None = None,
            sample: bool = False, record: bool = False) -> Look:
        draws = draws or {}
        rollout = ram_episodes(model, task, images, sample=sample, record_glimpses=record,
                               first_locations=draws.get("first_locations"), location_noise=draws.get("noise"))
        widths = torch.tensor([task["glimpse_size"] * 2**s for s in range(task["n_scales"])], dtype=torch.float32)
        boxes = widths.expand(*rollout.locations.shape[:2], -1)
        attention = Attention(rollout.locations, boxes, glimpses=rollout.glimpses, box_rule="retina")
        return Look(rollout.logits, attention, rollout)

    def evaluation_draws(self, model: nn.Module, task: dict, n: int, seed: int, sample: bool) -> dict | None:
        """Where random first glimpses fall ((n, 2), if the task's first location is random) and the
        standard normal noise of every sampled location ((n, T-1, 2), when sampling or for the
        random-glimpse baseline), all from ``seed``."""
        draws = {}
        if task.get("first_location", "centre") == "random":
            draws["first_locations"] = np.random.default_rng(seed).uniform(-1.0, 1.0, size=(n, 2)).astype(np.float32)
        if sample or model.config.policy == "random":
            steps = GlimpseTask(**task).episode_length
            draws["noise"] = torch.randn((n, steps - 1, 2), generator=torch.Generator().manual_seed(seed))
        return draws or None

    def pixels_read(self, task: dict, model_config: dict) -> dict[str, int]:
        """T * k * g * g glimpse values; canvas pixels under the widest box of each glimpse
        (``g * 2**(k-1)`` wide, an upper bound at the edges: the finer scales lie inside it), times
        T = glimpses per digit x digits. g, k, T come from the task, which defines the episodes. A
        context view of side s adds s * s values and the whole canvas."""
        config = self.config(model_config)
        g, k = int(task["glimpse_size"]), int(task["n_scales"])
        for name, value in (("glimpse_size", g), ("n_scales", k), ("n_glimpses", int(task["n_glimpses"]))):
            if getattr(config, name) != value:
                raise ValueError(f"model_config {name}={getattr(config, name)} but task {name}={value}")
        size = int(task["canvas_size"])
        t = GlimpseTask(**task).episode_length
        widest = min(g * 2 ** (k - 1), size)
        context = config.context_size  # a context view averages every pixel of the canvas once
        return {"sensor_values": t * k * g * g + context * context,
                "canvas_pixels_touched": t * widest * widest + (size * size if context else 0),
                "input_pixels": size * size}

    def attention_module(self, model: nn.Module) -> nn.Module:
        return model.location_policy.mean
