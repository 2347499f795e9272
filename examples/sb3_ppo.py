"""Train Stable-Baselines3's PPO on the 28x28 glimpse env through the flat wrappers.

Run (stable-baselines3 is an optional dependency)::

    pip install -e ".[sb3]"       # Stable-Baselines3, an optional extra (keeps the editable install)
    python examples/sb3_ppo.py                       # 4096 steps, bundled MNIST subset
    python examples/sb3_ppo.py --steps 100000 --data-dir /path/to/mnist

What it shows: an off-the-shelf agent can drive the env once :func:`envs.flat_action.make_flat`
turns the ``Dict`` action into a flat ``Box`` (location + 10 class scores) and the ``Dict``
observation into a vector (glimpse + location). What to expect: PPO's MLP policy has no memory
(it sees one 8x8 glimpse at a time) and is rewarded only on the last of 6 steps, so the default
4096 steps (about 10 s on one CPU thread) give a mean reward only a little above chance (0.1):
0.15 with seed 0 on the bundled subset. The recurrent attention models of ``train.py`` are the
ones that solve the task. At the end the trained policy is scored on the lab's benchmark
(``glimpse.benchmark.score_agent``: the fixed test canvases, through the vector env, seeing only
its observations), so its number sits beside every other model's.
"""
from __future__ import annotations

import argparse
import time

import envs  # noqa: F401 - registers the env ids
from envs.flat_action import make_flat


class PolicyAgent:
    """An SB3 policy trained on the flat single env, as :func:`glimpse.benchmark.score_agent` drives
    agents: the vector env's observations flattened as FlattenObservation does (its Dict's keys in
    order: the glimpse, then the location), the flat action split as FlatAction does."""

    def __init__(self, policy):
        self.policy = policy

    def act(self, observation: dict) -> dict:
        import numpy as np
        import torch

        flat = torch.cat([observation["glimpse"].flatten(1), observation["location"]], 1).cpu().numpy()
        action, _ = self.policy.predict(flat, deterministic=True)
        action = np.clip(action, -1.0, 1.0)
        return {"location": torch.from_numpy(action[:, :2].copy()),
                "label": torch.from_numpy(action[:, 2:12].argmax(1).astype(np.int64))}


def main(argv: list[str] | None = None) -> float:
    """Train, evaluate, print the mean reward per episode and return it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4096, help="environment steps of training")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default="bundled", help='MNIST root, or "bundled" for the bundled subset')
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--benchmark-limit", type=int, default=2000,
                        help="score the policy on the first N canvases of the benchmark's test set (0: skip)")
    args = parser.parse_args(argv)

    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    torch.set_num_threads(1)  # a tiny MLP: extra threads only contend (20x slower on a busy 2-core box)
    env_id = next(i for i, task in envs.ENV_IDS.items() if task == "mnist28")
    env = Monitor(make_flat(env_id, data_dir=args.data_dir))  # obs (66,), action (12,)
    n_steps = min(512, args.steps)  # PPO collects at least one rollout of n_steps
    model = PPO("MlpPolicy", env, n_steps=n_steps, batch_size=min(64, n_steps), seed=args.seed, verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=args.steps)
    train_s = time.perf_counter() - start

    # held-out digits: the test split, seeded apart from training
    eval_env = Monitor(make_flat(env_id, data_dir=args.data_dir, split="test"))
    eval_env.reset(seed=args.seed + 1)
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=args.eval_episodes, deterministic=True)
    print(f"{env_id}: PPO {args.steps} steps in {train_s:.1f}s; mean reward over {args.eval_episodes} "
          f"test episodes {mean:.3f} +- {std:.3f} (chance 0.1)")
    if args.benchmark_limit:
        from glimpse.benchmark import score_agent

        result = score_agent(PolicyAgent(model), "mnist28", data_dir=args.data_dir, limit=args.benchmark_limit,
                             model="SB3 PPO (examples/sb3_ppo.py)")
        print(f"benchmark: error {100 * result.error:.2f} % on {result.n} fixed test canvases of mnist28 "
              f"(hash {result.set_hash}), {result.glimpses_per_image} glimpses per image")
    return float(mean)


if __name__ == "__main__":
    main()
