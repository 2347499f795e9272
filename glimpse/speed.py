"""Throughput, measured the way training and evaluation really run: the env batched or under
gymnasium's sync vectorisation, one optimiser step of a learner (and where its time goes),
batched prediction.

Used by benchmarks/speed.py and the report, so both print numbers of the same code.
"""
from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import torch

import envs  # noqa: F401 - registers the environments
from glimpse.inference import predict_probabilities
from glimpse.training.config import TrainConfig
from glimpse.training.loop import batch_indices, make_learner, step_seed

ENV_ID = "glimpse/ClutteredMNIST60-v0"


def env_steps_per_second(mode: str, num_envs: int, episodes: int, data_dir=None) -> float:
    """Env steps/s (one step of one env = one glimpse) with random actions; ``mode`` is
    ``vector_entry_point`` (the batched env) or ``sync`` (gymnasium's SyncVectorEnv)."""
    env = gym.make_vec(ENV_ID, num_envs=num_envs, vectorization_mode=mode, data_dir=data_dir)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    n_glimpses = env.unwrapped.task.n_glimpses if mode == "vector_entry_point" else 6
    steps = 0
    start = time.perf_counter()
    for _ in range(episodes):
        for _ in range(n_glimpses):
            action = {"location": rng.uniform(-1, 1, (num_envs, 2)).astype(np.float32),
                      "label": rng.integers(0, 10, num_envs)}
            env.step(action)
            steps += num_envs
        env.step(action)  # the autoreset step (NEXT_STEP) starts new episodes in both modes
    env.close()
    return steps / (time.perf_counter() - start)


TRAINING_PHASES = ("data + forward", "backward", "optimizer")


def _wait_for(device: torch.device) -> None:
    """GPU work is asynchronous: a phase ends when its kernels have run, not when they are queued."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def training_speed(config: TrainConfig, data, steps: int, warmup: int = 2, device: str | torch.device = "cpu"):
    """Full training steps at ``config.batch_size`` on ``device``, after ``warmup`` steps.

    Returns (images/s, milliseconds per step of each of TRAINING_PHASES, the learner). The
    phases: "data + forward" makes the canvases (or runs the env's episodes) on the CPU and the
    loss; "backward"; "optimizer" is gradient clipping (when --grad-clip > 0) and Adam's step.
    """
    device = torch.device(device)
    learner = make_learner(config, data, device)
    optimizer = torch.optim.Adam(learner.model.parameters(), lr=config.lr)
    n_train = len(data.train)
    spent = dict.fromkeys(TRAINING_PHASES, 0.0)
    for step in range(steps + warmup):
        timed = step >= warmup
        t0 = time.perf_counter()
        loss, _ = learner.loss(batch_indices(0, step, n_train, config.batch_size), step_seed(0, step))
        _wait_for(device)
        t1 = time.perf_counter()
        optimizer.zero_grad()
        loss.backward()
        _wait_for(device)
        t2 = time.perf_counter()
        if config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(learner.model.parameters(), config.grad_clip)
        optimizer.step()
        _wait_for(device)
        if timed:
            for phase, seconds in zip(TRAINING_PHASES, (t1 - t0, t2 - t1, time.perf_counter() - t2)):
                spent[phase] += seconds
    images_per_second = steps * config.batch_size / sum(spent.values())
    return images_per_second, {phase: 1000 * seconds / steps for phase, seconds in spent.items()}, learner


def eval_images_per_second(kind: str, model, task: dict, images: np.ndarray, batch_size: int = 500) -> float:
    """Images/s of deterministic prediction on (N, H, W) uint8 canvases, on the model's device
    (the probabilities come back to the CPU, which waits for them)."""
    predict_probabilities(kind, model, task, images[:batch_size], batch_size)  # warm-up
    start = time.perf_counter()
    predict_probabilities(kind, model, task, images, batch_size)
    return len(images) / (time.perf_counter() - start)
