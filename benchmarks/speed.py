"""Speed of the lab's parts, measured in one process on the same data, printed as a table.

    python benchmarks/speed.py                 # full measurement (about a minute)
    python benchmarks/speed.py --quick         # fewer repetitions

Rows: env steps/s of ClutteredMNIST60-v0 (3 scales of 12x12) batched (vector_entry_point)
vs gymnasium's sync vectorisation; training images/s of each model at batch 128 on its
60x60 cluttered preset; evaluation images/s. Targets (2 cores): batched env >= 100,000
steps/s and >= 10x sync; RAM training >= 5,000 images/s.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import envs  # noqa: E402,F401
from glimpse.data import load_mnist  # noqa: E402
from glimpse.inference import predict_probabilities  # noqa: E402
from glimpse.training.config import resolve_config  # noqa: E402
from glimpse.training.learner import make_learner  # noqa: E402
from glimpse.training.loop import batch_indices, build_optimizer, step_seed  # noqa: E402

ENV_ID = "glimpse/ClutteredMNIST60-v0"


def env_steps_per_second(mode: str, num_envs: int, episodes: int, data_dir) -> float:
    env = gym.make_vec(ENV_ID, num_envs=num_envs, vectorization_mode=mode, data_dir=data_dir)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    steps = 0
    start = time.perf_counter()
    for _ in range(episodes):
        for _ in range(env.unwrapped.task.n_glimpses if mode == "vector_entry_point" else 6):
            action = {"location": rng.uniform(-1, 1, (num_envs, 2)).astype(np.float32),
                      "label": rng.integers(0, 10, num_envs)}
            env.step(action)
            steps += num_envs
        env.step(action)  # the autoreset step (NEXT_STEP) starts new episodes in both modes
    return steps / (time.perf_counter() - start)


def training_images_per_second(overrides: dict, steps: int, data) -> float:
    config = resolve_config({"preset": "cluttered60", "batch_size": 128, **overrides})
    learner = make_learner(config, data)
    optimizer = build_optimizer(config, learner.model)
    n_train = len(data.train)
    for step in range(steps + 2):  # two warm-up steps
        if step == 2:
            start = time.perf_counter()
        loss, _ = learner.loss(batch_indices(0, step, n_train, 128), step_seed(0, step))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - start
    return steps * 128 / seconds, learner


def eval_images_per_second(learner, n: int, data) -> float:
    from glimpse.canvas import fixed_canvas_set

    canvases = fixed_canvas_set(data.test.images[:n], data.test.labels[:n], 60, 4, False, 0)
    start = time.perf_counter()
    predict_probabilities(learner.kind, learner.model, learner.task, canvases.images, 500)
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    data = load_mnist(args.data_dir)
    reps = 1 if args.quick else 3
    rows = []
    batched = env_steps_per_second("vector_entry_point", 256, 40 * reps, args.data_dir)
    sync = env_steps_per_second("sync", 256, 2 * reps, args.data_dir)
    rows.append(("env steps/s, ClutteredMNIST60, 256 envs, batched", f"{batched:,.0f}"))
    rows.append(("env steps/s, same env, gymnasium sync", f"{sync:,.0f}"))
    rows.append(("batched / sync", f"{batched / sync:.1f}x"))
    for name, overrides, steps in (("RAM (hard)", {"mode": "hard"}, 30), ("DRAW (soft)", {"mode": "soft", "soft_arch": "draw"}, 10),
                                   ("Show-Attend-Tell (soft)", {"mode": "soft", "soft_arch": "sat"}, 4)):
        train_speed, learner = training_images_per_second(overrides, steps * reps, data)
        rows.append((f"training images/s, {name}, batch 128", f"{train_speed:,.0f}"))
        rows.append((f"evaluation images/s, {name}", f"{eval_images_per_second(learner, 2000, data):,.0f}"))
    width = max(len(r[0]) for r in rows)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, data: {data.source}")
    print(f"| {'measure':<{width}} | value |\n|{'-' * (width + 2)}|-------|")
    for label, value in rows:
        print(f"| {label:<{width}} | {value} |")


if __name__ == "__main__":
    main()
