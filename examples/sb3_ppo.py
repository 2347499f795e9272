"""Train Stable-Baselines3's PPO on the 28x28 glimpse env, with the episode's glimpses stacked.

Run (stable-baselines3 is an optional dependency)::

    pip install -e ".[sb3]"       # Stable-Baselines3, an optional extra (keeps the editable install)
    python examples/sb3_ppo.py --data-dir /path/to/mnist     # 300,000 steps, about 2 minutes
    python examples/sb3_ppo.py                               # the same on the bundled MNIST subset

What makes an off-the-shelf agent learn here (docs/environments.md has the numbers):

- **memory**: :func:`envs.flat_action.make_flat` with ``stack=6`` stacks the episode's flat
  observations (gymnasium's ``FrameStackObservation``), so the MLP policy sees every glimpse and
  location so far, and nothing else. Without it the policy sees one 8x8 glimpse when it must
  name the digit, and stays near chance;
- **a discrete action** (``grid=5``): where to look as a point of a 5x5 grid, and the label as a
  class, both categorical, instead of ten Gaussian class scores.

At the end the policy is scored on the held-out test digits and on the lab's benchmark
(``glimpse.benchmark.score_agent``: the fixed test canvases, through the vector env, the agent
seeing only its observations), so its number sits beside every other model's.
"""
from __future__ import annotations

import argparse
import time

import envs  # noqa: F401 - registers the env ids
import envs.data
from envs.flat_action import grid_points, make_flat

TASK = "mnist28"


class PolicyAgent:
    """An SB3 policy trained on :func:`make_flat` (``grid``, ``stack``), as
    :func:`glimpse.benchmark.score_agent` drives agents: the vector env's observations flattened
    as FlattenObservation does (the glimpse, then the location) and stacked as
    FrameStackObservation does (oldest first, zeros before the first), the grid action decoded as
    GridAction does."""

    def __init__(self, policy, grid: int, stack: int):
        self.policy, self.points, self.stack = policy, grid_points(grid), stack
        self.history = None

    def reset(self, n: int) -> None:
        self.history = None  # a new batch of episodes

    def act(self, observation: dict) -> dict:
        import numpy as np
        import torch

        flat = torch.cat([observation["glimpse"].flatten(1), observation["location"]], 1).cpu().numpy()
        if self.history is None:
            self.history = np.zeros((len(flat), self.stack, flat.shape[1]), np.float32)
        self.history = np.concatenate([self.history[:, 1:], flat[:, None]], 1)
        action, _ = self.policy.predict(self.history, deterministic=True)
        return {"location": torch.from_numpy(self.points[action[:, :2]]),
                "label": torch.from_numpy(action[:, 2].astype(np.int64))}


def main(argv: list[str] | None = None) -> float:
    """Train, evaluate, print the mean reward per test episode and return it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300_000, help="environment steps of training")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default="bundled", help='MNIST root, or "bundled" for the bundled subset')
    parser.add_argument("--grid", type=int, default=5, help="glimpse locations per axis (the discrete action)")
    parser.add_argument("--envs", type=int, default=8, help="environments stepped together")
    parser.add_argument("--eval-episodes", type=int, default=1000)
    parser.add_argument("--benchmark-limit", type=int, default=None,
                        help="score the policy on the first N canvases of the benchmark's test set "
                             "(default: all 10,000; 0: skip)")
    args = parser.parse_args(argv)
    for name in ("steps", "envs", "eval_episodes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.benchmark_limit is not None and args.benchmark_limit < 0:  # checked before minutes of PPO
        parser.error(f"--benchmark-limit must be >= 0 (0: skip), got {args.benchmark_limit}")
    try:
        envs.data.load_mnist(args.data_dir)
    except envs.data.DataError as exc:
        parser.error(str(exc))
    try:
        grid_points(args.grid)
    except ValueError as exc:
        parser.error(f"--{exc}")

    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    torch.set_num_threads(1)  # a small MLP: extra threads only contend
    env_id = next(i for i, task in envs.ENV_IDS.items() if task == TASK)
    stack = envs.GlimpseTask(**envs.ENV_TASKS[env_id]).episode_length  # every glimpse of the episode
    flat = dict(grid=args.grid, stack=stack, data_dir=args.data_dir)
    train_envs = make_vec_env(make_flat, n_envs=args.envs, seed=args.seed, env_kwargs=dict(env_id=env_id, **flat))
    rollout = max(1, min(256, args.steps // args.envs))  # PPO collects at least one rollout per env
    model = PPO("MlpPolicy", train_envs, n_steps=rollout, batch_size=min(256, rollout * args.envs), n_epochs=4,
                learning_rate=1e-3, gamma=1.0, gae_lambda=1.0, ent_coef=0.01,
                policy_kwargs=dict(net_arch=[256, 256]), seed=args.seed, verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=args.steps, progress_bar=False)
    train_s = time.perf_counter() - start

    # held-out digits: the test split, seeded apart from training
    eval_env = Monitor(make_flat(env_id, split="test", **flat))
    eval_env.reset(seed=args.seed + 1)
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=args.eval_episodes, deterministic=True)
    print(f"{env_id}: PPO {args.steps} steps in {train_s:.1f}s; mean reward over {args.eval_episodes} "
          f"test episodes {mean:.3f} (chance 0.1)")
    if args.benchmark_limit != 0:
        from glimpse.benchmark import score_agent

        result = score_agent(PolicyAgent(model, args.grid, stack), TASK, data_dir=args.data_dir,
                             limit=args.benchmark_limit, model="SB3 PPO (examples/sb3_ppo.py)")
        print(f"benchmark: error {100 * result.error:.2f} % on {result.n} fixed test canvases of {TASK} "
              f"(hash {result.set_hash}), {result.glimpses_per_image} glimpses per image")
    return float(mean)


if __name__ == "__main__":
    main()
