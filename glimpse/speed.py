"""Throughput, measured the way training and evaluation really run: the env batched or under
gymnasium's sync vectorisation, one optimiser step of a learner, batched prediction.

Used by benchmarks/speed.py and the report, so both print numbers of the same code.
"""
from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

import envs  # noqa: F401 - registers the environments
from glimpse.inference import predict_probabilities
from glimpse.training.config import TrainConfig
from glimpse.training.learner import make_learner
from glimpse.training.loop import batch_indices, build_optimizer, step_seed

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


def training_images_per_second(config: TrainConfig, data, steps: int, warmup: int = 2):
    """Images/s of full training steps (canvases or episodes, loss, backward, Adam) at
    ``config.batch_size``, after ``warmup`` steps. Returns (images/s, the learner)."""
    learner = make_learner(config, data)
    optimizer = build_optimizer(config, learner.model)
    n_train = len(data.train)
    for step in range(steps + warmup):
        if step == warmup:
            start = time.perf_counter()
        loss, _ = learner.loss(batch_indices(0, step, n_train, config.batch_size), step_seed(0, step))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return steps * config.batch_size / (time.perf_counter() - start), learner


def eval_images_per_second(kind: str, model, task: dict, images: np.ndarray, batch_size: int = 500) -> float:
    """Images/s of deterministic prediction on (N, H, W) uint8 canvases."""
    predict_probabilities(kind, model, task, images[:batch_size], batch_size)  # warm-up
    start = time.perf_counter()
    predict_probabilities(kind, model, task, images, batch_size)
    return len(images) / (time.perf_counter() - start)
