"""What every hard-attention family shares: it reads a canvas by playing an episode through the
vector env with a retina, learns where to look by REINFORCE, and may be evaluated at random.

A hard family subclasses :class:`HardFamily` and says what differs. The REINFORCE learner
(glimpse/training/hard.py), evaluation and the measurements call these methods and never import
a family's module:

- :meth:`HardFamily.episodes`: a batch of episodes through a vector env (a :class:`Rollout`:
  logits, reward, labels, log-probabilities, baselines, locations, glimpses);
- :meth:`HardFamily.play`: one episode per given canvas (evaluation, pictures, costs);
- :meth:`HardFamily.evaluation_draws`: the randomness of a (sampled) evaluation, drawn once per set;
- :meth:`HardFamily.set_policy_std`: the schedule's hook on the location policy's std;
- :meth:`Family.attention_module`: the parameters REINFORCE's gradient-variance study measures.

By default a hard family's model follows the step protocol of :mod:`glimpse.models.episodes`
and has a ``location_policy`` (:class:`glimpse.models.ram.location.LocationPolicy`).
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from torch import nn

from envs.retina import retina_pixels_read
from envs.task import GlimpseTask
from glimpse.models.config_checks import check_fits_task
from glimpse.models.episodes import Rollout, play_canvases, run_episodes
from glimpse.models.registry import Attention, Family, Look, Option, single_step_episode
from glimpse.models.schedules import annealed

__all__ = ["HardFamily", "Rollout"]


class HardFamily(Family):
    """Base class of the families that learn by REINFORCE through the environment."""

    mode: ClassVar[str] = "hard"
    samples_trajectories = True
    reads_several_digits = True
    attention_module_text = "the location policy's mean head"
    own_options = {
        "location_std": Option(0.15, "std of the Gaussian location policy (fixed, or the start of its annealing)",
                               low=0, low_open=True),
        "location_std_final": Option(0.0, "anneal the fixed policy std from --location-std to this over the run, on "
                                     "the learning rate's cosine: wide search early, training paths close to the "
                                     "deterministic ones late (0: no annealing)", low=0),
        "reinforce_into_core": Option(0.0, "share of the REINFORCE gradient that goes on from the location network "
                                      "into the core and glimpse network (DRAM: from its upper layer into the lower "
                                      "one): 0 stops it there, 1 is the paper; 0.1 lets the policy shape the "
                                      "features (see docs/gradients.md)", low=0, high=1),
        "reinforce_samples": Option(1, "sampled trajectories per image, sharing its canvas: 1 uses the learned "
                                    "baseline; K > 1 uses the mean reward of the image's other K - 1 samples as the "
                                    "baseline (leave-one-out, Kool et al. 2019); K times the episodes per step",
                                    low=1, high=64),
        "reinforce_reward": Option("sequence", "several digits: what REINFORCE credits each location with: "
                                   "sequence, the env's reward (1 when every digit is right); digits, 1 / D for each "
                                   "digit it could still affect that came out right (reward-to-go over D digits, "
                                   "glimpse/losses.py: digit_returns). The same for one digit",
                                   ("sequence", "digits")),
    }

    def leaves_parameters_unused(self, config) -> bool:
        return single_step_episode(config)

    # ------------------------------------------------------------------ episodes
    def episodes(self, model: nn.Module, env, *, sample: bool, generator: torch.Generator | None = None,
                 seed: int | None = None, options: dict | None = None, record_glimpses: bool = False,
                 noise=None, forward=None, samples: int = 1) -> Rollout:
        """One episode in each of ``env``'s slots (:func:`glimpse.models.episodes.run_episodes`
        documents every argument); the REINFORCE learner and the measurements call this."""
        return run_episodes(model, env, sample=sample, generator=generator, seed=seed, options=options,
                            record_glimpses=record_glimpses, noise=noise, forward=forward, samples=samples)

    def play(self, model: nn.Module, task: dict, images, labels=None, *, sample: bool = False,
             generator: torch.Generator | None = None, record_glimpses: bool = False, first_locations=None,
             location_noise: torch.Tensor | None = None) -> Rollout:
        """One episode per canvas of (N, H, W) uint8 ``images`` on the model's device
        (:func:`glimpse.models.episodes.play_canvases`)."""
        return play_canvases(model, task, images, labels, sample=sample, generator=generator,
                             record_glimpses=record_glimpses, first_locations=first_locations,
                             location_noise=location_noise)

    def run(self, model: nn.Module, images: np.ndarray, task: dict, *, draws: dict | None = None,
            sample: bool = False, record: bool = False) -> Look:
        draws = draws or {}
        rollout = self.play(model, task, images, sample=sample, record_glimpses=record,
                            first_locations=draws.get("first_locations"), location_noise=draws.get("noise"))
        widths = torch.tensor([task["glimpse_size"] * 2**s for s in range(task["n_scales"])], dtype=torch.float32)
        boxes = widths.expand(*rollout.locations.shape[:2], -1)
        attention = Attention(rollout.locations, boxes, glimpses=rollout.glimpses, snap_to_retina=True)
        return Look(rollout.logits, attention, rollout)

    def evaluation_draws(self, model: nn.Module, task: dict, n: int, seed: int, sample: bool) -> dict | None:
        """Where random first glimpses fall ((n, 2), if the task's first location is random) and the
        standard normal noise of every sampled location ((n, T-1, 2), when sampling or for a
        random-glimpse policy), all from ``seed``."""
        draws = {}
        if task.get("first_location", "centre") == "random":
            draws["first_locations"] = np.random.default_rng(seed).uniform(-1.0, 1.0, size=(n, 2)).astype(np.float32)
        if sample or getattr(model.config, "policy", "learned") == "random":
            steps = GlimpseTask(**task).episode_length
            draws["noise"] = torch.randn((n, steps - 1, 2), generator=torch.Generator().manual_seed(seed))
        return draws or None

    def evaluation_text(self, model: nn.Module, task: dict, samples: int, seed: int) -> str:
        """How an evaluation of ``samples`` trajectories (0: the policy mean) chose its locations."""
        random = getattr(model.config, "policy", "learned") == "random"
        if samples:
            kind = "random-glimpse" if random else "sampled"
            text = f"averaged over {samples} {kind} trajectories (seed {seed})"
        elif random:
            text = f"glimpses after the first uniformly at random (seed {seed})"
        else:
            text = "deterministic (policy mean)"
        if task.get("first_location") == "random":
            seeds = f"seeds {seed}..{seed + samples - 1}, one per trajectory" if samples > 1 else f"seed {seed}"
            text += f", first glimpses at random ({seeds})"
        return text

    # ------------------------------------------------------------------ training
    def schedule(self, model: nn.Module, config, progress: float) -> dict[str, float]:
        return anneal_policy_std(self, model, config, progress)

    def set_policy_std(self, model: nn.Module, std: float) -> None:
        """Set the fixed std of the location policy (the trainer anneals it: --location-std-final)."""
        model.location_policy.fixed_std = std

    # ------------------------------------------------------------------ costs
    def pixels_read(self, task: dict, model_config: dict) -> dict[str, int]:
        """:func:`retina_pixels_read` of the task, with the model's context view; the model's
        sensor must be the task's."""
        config = self.config(model_config)
        check_fits_task(config, task, ("glimpse_size", "n_scales", "n_glimpses"))
        return retina_pixels_read(task, config.context_size)

    def attention_module(self, model: nn.Module) -> nn.Module:
        return model.location_policy.mean

    def sensor_and_gradient(self, train_config: dict) -> tuple[str, str]:
        if train_config.get("random_glimpses"):
            return "retina: a few glimpses", "nowhere: uniformly random glimpses"
        return "retina: a few glimpses", "REINFORCE"


def anneal_policy_std(family, model: nn.Module, config, progress: float) -> dict[str, float]:
    """Anneal the fixed std of ``model``'s location policy from --location-std to
    --location-std-final on the learning rate's cosine (nothing when the final std is 0)."""
    if not config.location_std_final:
        return {}
    std = annealed(config.location_std, config.location_std_final, progress)
    family.set_policy_std(model, std)
    return {"train/location_std": std}
