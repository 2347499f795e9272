"""How noisy each REINFORCE estimator of a hard model's location-policy gradient is, per second of compute.

    python scripts/reinforce_estimators.py --checkpoint runs/NAME/best.pt --data-dir DIR
    python scripts/reinforce_estimators.py --checkpoint checkpoints/ram-cluttered60.pt --samples 1,4 --batches 50

At the checkpoint's weights, for the learned baseline (K = 1) and the leave-one-out baseline with
K sampled trajectories of each image (``train.py --reinforce-samples K``): the total variance of
one minibatch's gradient over --batches minibatches of --batch-size training images (with a 90 %
bootstrap interval), the milliseconds one minibatch's gradient takes here, and variance x time
relative to K = 1: below 1, that estimator gives more signal per second of training. Every
estimator is unbiased for the same gradient, so their noise compares directly.
Exit code 2 for a bad option or checkpoint.
"""
from __future__ import annotations

import argparse
import sys

import torch

from envs.data import DataError
from glimpse.checkpoint import CheckpointError, load_model
from glimpse.cli import ArgumentParser, check_threads, fail, int_list, interruptible, markdown_table
from glimpse.gradient_noise import reinforce_estimator_noise
from glimpse.models import get_family
from glimpse.cpu import configure_cpu


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a checkpoint of a hard-attention family (REINFORCE)")
    parser.add_argument("--samples", type=int_list, default=(1, 2, 4, 8), help="comma-separated K (1: the learned baseline)")
    parser.add_argument("--batches", type=int, default=100, help="minibatches per estimator")
    parser.add_argument("--batch-size", type=int, default=128, help="images per minibatch")
    parser.add_argument("--seed", type=int, default=20_000, help="minibatch i is drawn from seed + i")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--data-dir", default=None, help="MNIST root (as in train.py)")
    args = parser.parse_args(argv)
    try:
        counts = args.samples
        if not counts or min(counts) < 1 or args.batches < 2 or args.batch_size < 1 or args.seed < 0:
            raise ValueError("--samples must be >= 1, --batches >= 2, --batch-size >= 1 and --seed >= 0")
        if max(counts) > 1000:  # as evaluate.py's --samples: each is a batch of that many episodes per image
            raise ValueError(f"--samples must be at most 1000 trajectories per image, got {max(counts)}")
        configure_cpu(check_threads(args.threads))
        model, payload = load_model(args.checkpoint)
        if not get_family(payload["kind"]).learns_by_reinforce:
            raise ValueError(f"{args.checkpoint} is a {payload['kind']} checkpoint; REINFORCE estimators need hard attention")
        results = [reinforce_estimator_noise(payload["kind"], model, payload["task"], k, args.batches, args.batch_size, args.data_dir,
                                             args.seed, show_progress=True,
                                             reward=payload["train_config"].get("reinforce_reward", "sequence"))
                   for k in counts]
    except (ValueError, DataError, CheckpointError) as exc:
        return fail(exc)
    reference = results[0]["trace"] * results[0]["seconds_per_batch"]
    rows = [("learned baseline" if r["samples"] == 1 else f"leave-one-out, K = {r['samples']}", f"{r['trace']:.4g}",
             f"{r['trace_interval'][0]:.4g} to {r['trace_interval'][1]:.4g}", f"{1000 * r['seconds_per_batch']:.1f}",
             f"{r['trace'] * r['seconds_per_batch'] / reference:.2f}" if reference > 0 else "-") for r in results]
    print(f"{args.checkpoint}: {args.batches} minibatches of {args.batch_size} images, {torch.get_num_threads()} threads")
    if reference == 0:  # every sampled reward alike (a trained model on a few images): nothing to compare
        print(f"K = {counts[0]} shows no variance on these minibatches: no ratio (more --batches or --batch-size)")
    print(markdown_table(("baseline", "total variance per minibatch", "90 % bootstrap interval", "ms per minibatch",
                          f"variance x time, relative to K = {counts[0]}"), rows, pad=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
