"""Bring your own model: train a small CNN built from torchvision's blocks for about a minute, then
score it on the lab's benchmark with ``glimpse.benchmark.score``.

    python examples/score_a_cnn.py                                  # bundled MNIST subset, 60 s
    python examples/score_a_cnn.py --data-dir DIR --seconds 300 --save benchmarks/results/small-cnn.json
    python examples/score_a_cnn.py --data-dir DIR --steps 1000 --save benchmarks/results/small-cnn-1000-steps.json
                                                                    # the leaderboard's row (any machine)

The model is any ``torch.nn.Module`` from canvases (B, 1, H, W) in [0, 1] to logits (B, 10): the
benchmark hands it the task's fixed test canvases (the ones every lab model is scored on) and
returns the error with its 95 % interval and the protocol. ``--save`` writes the result as JSON
for the leaderboard (``python scripts/leaderboard.py --write``). Training canvases come from the
lab's own recipe (``envs.engine.make_canvases``) on the training digits.
"""
from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torchvision.ops import Conv2dNormActivation

from envs.data import DataError, load_mnist
from envs.engine import DigitBank, make_canvases
from envs.task import TASKS
from glimpse.benchmark import score


def small_cnn() -> nn.Module:
    """Four conv-batchnorm-ReLU blocks (torchvision.ops), each halving the canvas, then global
    average pooling and a linear layer: (B, 1, H, W) -> (B, 10)."""
    return nn.Sequential(
        Conv2dNormActivation(1, 32, stride=2), Conv2dNormActivation(32, 64, stride=2),
        Conv2dNormActivation(64, 96, stride=2), Conv2dNormActivation(96, 128, stride=2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))


def main(argv: list[str] | None = None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="cluttered60", choices=sorted(TASKS))
    parser.add_argument("--seconds", type=float, default=60.0, help="training time")
    parser.add_argument("--steps", type=int, default=None, help="train exactly this many steps instead (repeatable)")
    parser.add_argument("--data-dir", default="bundled", help='MNIST root, or "bundled" for the bundled subset')
    parser.add_argument("--limit", type=int, default=None, help="score only the first N test canvases")
    parser.add_argument("--save", default=None, help="write the benchmark result here (JSON)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name, least in (("limit", 1), ("steps", 1), ("seconds", 0)):  # checked before a minute of training
        if getattr(args, name) is not None and getattr(args, name) < least:
            parser.error(f"--{name} must be >= {least}, got {getattr(args, name)}")
    try:
        digits = load_mnist(args.data_dir)
    except DataError as exc:
        parser.error(str(exc))

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    task = TASKS[args.preset]
    bank = DigitBank.of(digits.train)
    model, generator = small_cnn(), torch.Generator().manual_seed(args.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    start, steps = time.perf_counter(), 0
    model.train()
    while (steps < args.steps) if args.steps is not None else (time.perf_counter() - start < args.seconds):
        batch = make_canvases(generator, bank, torch.randint(0, len(bank), (64,), generator=generator),
                              task["canvas_size"], task["n_clutter"], task.get("centred_digit", False))
        loss = nn.functional.cross_entropy(model(batch.images[:, None].float() / 255), batch.labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
    model.eval()
    result = score(lambda canvases: model(canvases), args.preset, data_dir=args.data_dir, limit=args.limit,
                   model=f"small torchvision CNN, {steps} steps (examples/score_a_cnn.py)")
    low, high = result.error_interval
    print(f"trained {steps} steps of 64 canvases in {time.perf_counter() - start:.0f} s; "
          f"{result.task}: error {100 * result.error:.2f} % (95 % interval {100 * low:.2f}-{100 * high:.2f}) "
          f"on {result.n} {result.split} canvases (hash {result.set_hash})"
          + ("; the bundled subset's digits: not comparable with the leaderboard" if result.mnist_subset else ""))
    if args.save:
        result.save(args.save)
        print(f"saved {args.save}")
    return result


if __name__ == "__main__":
    main()
