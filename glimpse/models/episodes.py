"""A hard-attention episode through the (vector) environment, shared by every hard family: the
agent acts with ``step``, the env returns glimpses, the reward and, at the end, the label.

A hard family's model is a *per-step function* (the protocol below); this module plays it. The
families say which of these they use (``HardFamily.episodes``), and the rest of the lab (the
REINFORCE learner, evaluation, measurements) calls the family; :func:`episode_env` is the one env
every hard family's episodes run in (the learner's training env, and :func:`play_canvases`'s).

The step protocol (RAM, glimpse/models/ram/; DRAM, glimpse/models/dram/):

- ``model.initial_state()`` -> the state before the first glimpse (``()``, rest, for both);
- ``model(glimpse (B, k, g, g), location (B, 2), state[, context=(B, s, s)])`` -> a step with
  ``logits`` (B, C), the location policy's ``mean`` and ``std`` (B, 2), ``baseline`` (B,) and
  the next ``state`` (a tuple of tensors, or of such tuples); ``context`` only on the first step
  of a model whose ``config.context_size`` > 0;
- ``model.config.policy``: "learned", or "random" for the random-glimpse baseline.

With K digits per canvas the episode is K blocks of the task's ``n_glimpses`` glimpses, and
the classifier's output at the end of block k is the k-th digit (the state runs on across
blocks): the model reads the digits as a sequence, like the deep recurrent attention model of Ba
et al. 2015, with the reward, as the env gives it, 1 only when every digit is right."""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch
from torch import nn

from envs import ClutteredMNISTVectorEnv
from envs.engine import as_tensor
from glimpse.models.ram.location import LocationPolicy


class Rollout(NamedTuple):
    """For B episodes of T glimpses: ``logits`` (B, C) after the last glimpse, or (B, K, C), one
    per digit, at the end of each block; ``reward`` (B,) and ``labels`` (B,) or (B, K) from the
    env; ``log_probs`` and ``baselines`` (B, T-1) for the T-1 chosen locations; ``locations``
    (B, T, 2) where each glimpse was taken; ``glimpses`` (B, T, k, g, g) if recorded, else None."""

    logits: torch.Tensor
    reward: torch.Tensor
    labels: torch.Tensor
    log_probs: torch.Tensor
    baselines: torch.Tensor
    locations: torch.Tensor
    glimpses: torch.Tensor | None


def run_episodes(model: nn.Module, env, *, sample: bool, generator: torch.Generator | None = None,
                 seed: int | None = None, options: dict | None = None, record_glimpses: bool = False,
                 noise: Callable[[torch.Tensor], torch.Tensor] | None = None, forward=None,
                 samples: int = 1) -> Rollout:
    """Play one episode in each of the env's ``num_envs`` slots.

    ``sample=True`` draws locations from the Gaussian policy (training); ``False`` follows its
    mean (deterministic evaluation). ``noise(mean)``, if given, supplies the standard normal
    noise of each sampled location (default: ``randn`` from ``generator``): distributed
    training draws the whole global batch's noise and keeps its own slice. ``forward`` is what
    is called for each step (default ``model``; a DistributedDataParallel wrapper of it in
    training). The env (:class:`envs.ClutteredMNISTVectorEnv`) speaks torch; on the model's
    device the episode never leaves it: nothing here reads a tensor value on the host.

    ``samples`` = K > 1 says that the slots hold K trajectories of each canvas next to each
    other, all from the same first location (the trainer's --reinforce-samples): their first
    glimpses are then the same, so the model reads each once and the K share its output (and,
    through ``repeat_interleave``, sum their gradients into it). Only the sampled locations
    differ. Nothing checks that the K rows agree: that is the caller's promise.

    A model whose config has ``policy="random"`` (the random-glimpse baseline) ignores its
    policy: each next location is uniform on [-1, 1]^2, made from the same standard normal
    noise (``2 Phi(z) - 1``), so it is seeded like sampling; with ``sample=False`` and no
    generator the noise comes from ``seed``, so evaluation is deterministic. Its log-probs are
    zeros: there is nothing for REINFORCE to train.
    """
    if env.num_envs % samples:
        raise ValueError(f"{env.num_envs} episodes cannot hold {samples} trajectories of every canvas")
    observation, _ = env.reset(seed=seed, options=options)
    task = env.unwrapped.task
    forward = model if forward is None else forward
    device = next(model.parameters()).device
    context = _context_view(model, observation, device)
    random_policy = getattr(model.config, "policy", "learned") == "random"
    if random_policy and generator is None and noise is None:
        generator = torch.Generator().manual_seed(seed or 0)
    choose = _LocationChooser(sample, random_policy, noise, generator, device)
    state = model.initial_state()
    log_probs, baselines, locations, glimpses, digit_logits = [], [], [], [], []
    unjudged_label = torch.zeros((env.num_envs, task.n_digits) if task.n_digits > 1 else (env.num_envs,),
                                 dtype=torch.int64, device=device)  # only the final step's label is judged
    for t in range(task.episode_length):
        glimpse, location = observation["glimpse"].to(device), observation["location"].to(device)
        locations.append(location)
        if record_glimpses:
            glimpses.append(glimpse)
        out = _read(forward, glimpse, location, state, samples, context, first_step=t == 0)
        state = out.state
        if (t + 1) % task.n_glimpses == 0:  # the end of a digit's block: its answer
            digit_logits.append(out.logits)
        if t < task.episode_length - 1:
            next_location, log_prob = choose(out)
            log_probs.append(log_prob)
            baselines.append(out.baseline)
            label = unjudged_label
        else:  # the final step's location is never looked at
            next_location = out.mean.detach()
            logits = digit_logits[0] if task.n_digits == 1 else torch.stack(digit_logits, 1)
            label = logits.argmax(-1)
        observation, reward, _, _, info = env.step({"location": next_location.clamp(-1.0, 1.0), "label": label})
    if "label" not in info:
        raise RuntimeError("the environment must end every episode after its episode_length steps")
    empty = out.logits.new_zeros(env.num_envs, 0)
    return Rollout(
        logits=logits,
        reward=reward.to(device, torch.float32),
        labels=info["label"].to(device),
        log_probs=torch.stack(log_probs, 1) if log_probs else empty,
        baselines=torch.stack(baselines, 1) if baselines else empty,
        locations=torch.stack(locations, 1),
        glimpses=torch.stack(glimpses, 1) if record_glimpses else None,
    )


def _context_view(model: nn.Module, observation: dict, device: torch.device) -> torch.Tensor | None:
    """The episode's coarse view (B, s, s) for a model with a context network, else None."""
    if not getattr(model.config, "context_size", 0):
        return None
    if "context" not in observation:
        raise ValueError(f"the model reads a context view: make the env with context_size={model.config.context_size}")
    return observation["context"].to(device)


def _read(forward, glimpse: torch.Tensor, location: torch.Tensor, state, samples: int,
          context: torch.Tensor | None, first_step: bool):
    """One step of the model. The first step also reads ``context`` (if any); there, with
    ``samples`` = K > 1 trajectories per canvas, each canvas is read once and its output shared by
    its K rows."""
    if not first_step:
        return forward(glimpse, location, state)
    first = {} if context is None else {"context": context}
    if samples > 1:  # the K rows of a canvas see the same first glimpse
        first = {name: value[::samples] for name, value in first.items()}
        return _repeat_each(forward(glimpse[::samples], location[::samples], state, **first), samples)
    return forward(glimpse, location, state, **first)


class _LocationChooser:
    """Where to look next and its log-probability under the policy, from a step's output: the
    policy mean (``sample=False``), a draw from the Gaussian policy (noise from ``noise(mean)`` or
    ``generator``), or for a random-glimpse policy a uniform location from the same standard
    normal noise (``2 Phi(z) - 1``) with log-probability 0."""

    def __init__(self, sample: bool, random_policy: bool, noise, generator, device: torch.device):
        self.sample, self.random_policy, self.noise, self.generator, self.device = \
            sample, random_policy, noise, generator, device

    def standard_normal(self, mean: torch.Tensor) -> torch.Tensor:
        if self.noise is not None:
            return self.noise(mean)
        generator = self.generator  # a CPU generator may drive a model on the GPU
        device = generator.device if generator is not None else mean.device
        return torch.randn(mean.shape, generator=generator, device=device, dtype=mean.dtype).to(self.device)

    def __call__(self, out) -> tuple[torch.Tensor, torch.Tensor]:
        if self.random_policy:
            z = self.standard_normal(out.mean)
            return torch.erf(z / math.sqrt(2.0)), out.mean.new_zeros(len(z))  # uniform on [-1, 1]
        if not self.sample:
            location = out.mean.detach()
        else:
            location = LocationPolicy.sample(out.mean, out.std, noise=self.standard_normal(out.mean))
        return location, LocationPolicy.log_prob(out.mean, out.std, location)


def _repeat_each(step, times: int):
    """Every tensor of a model step's output (a NamedTuple of tensors and a state tuple), each row
    repeated ``times`` times in place."""
    def repeat(value):
        if isinstance(value, tuple):
            return type(value)(repeat(item) for item in value)
        return value.repeat_interleave(times, dim=0)
    return step._make(repeat(value) for value in step)


def episode_env(task: dict, num_envs: int, device: torch.device | str = "cpu",
                validate: bool = True) -> ClutteredMNISTVectorEnv:
    """A vector env of ``task`` with ``num_envs`` slots on ``device`` (no digits are loaded until
    it draws canvases itself). ``validate=False``: actions and reset inputs are trusted (no host sync)."""
    return ClutteredMNISTVectorEnv(num_envs, device=device, validate=validate, **task)


def play_canvases(model: nn.Module, task: dict, images, labels=None, *,
                 sample: bool = False, generator: torch.Generator | None = None, record_glimpses: bool = False,
                 first_locations=None, location_noise: torch.Tensor | None = None) -> Rollout:
    """One episode per canvas of (N, H, W) uint8 ``images`` (array or tensor), through the env
    on the model's device (``labels`` only matter for the reward).

    ``first_locations`` (N, 2) overrides where the first glimpses fall; by default the task's
    rule applies ("random" ones drawn from seed 0). ``location_noise`` (N, T-1, 2), if given, is
    the standard normal noise of each sampled location, step by step, instead of ``generator``."""
    device = next(model.parameters()).device
    env = episode_env(task, len(images), device, validate=False)
    images = as_tensor(images, device)
    labels = torch.zeros((len(images),) + ((env.task.n_digits,) if env.task.n_digits > 1 else ()), dtype=torch.int64,
                         device=device) if labels is None else as_tensor(labels, device, torch.int64)
    options = {"images": images, "labels": labels}
    if first_locations is not None:
        options["first_location"] = as_tensor(first_locations, device, torch.float32)
    noise = None
    if location_noise is not None:
        steps = iter(location_noise.to(device).unbind(1))  # one copy to the device, not one per step

        def noise(mean: torch.Tensor) -> torch.Tensor:  # called once per sampled step, in order
            return next(steps).to(mean.dtype)
    return run_episodes(model, env, sample=sample, generator=generator, seed=0, options=options,
                        record_glimpses=record_glimpses, noise=noise)
