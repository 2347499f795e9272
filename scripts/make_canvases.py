"""Write a fresh set of test canvases to an .npz, for ``evaluate.py --images``.

    python scripts/make_canvases.py --preset cluttered60 --seed 20261123 --out fresh60.npz --data-dir ../shared/datasets
    python evaluate.py --checkpoint checkpoints/stn-cluttered60.pt --images fresh60.npz

Every digit of the split is placed once, by the task's recipe (envs/engine.py), with clutter and
positions drawn from ``--seed``: the same recipe as the fixed test set (seed 2), other canvases.
A seed nobody tuned on gives an independent check of a shipped number.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from envs.engine import fixed_canvas_set
from envs.data import DataError, load_mnist
from envs.task import TASKS, GlimpseTask
from glimpse.cli import fail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(TASKS), default="cluttered60", help="the task's canvas recipe")
    parser.add_argument("--seed", type=int, required=True, help="seed of clutter and positions")
    parser.add_argument("--split", choices=("test", "val"), default="test", help="which digits")
    parser.add_argument("--out", type=Path, required=True, help="the .npz to write ('images', 'labels')")
    parser.add_argument("--data-dir", default=None, help="MNIST root (as in train.py)")
    args = parser.parse_args(argv)
    try:
        if args.seed < 0:
            raise ValueError(f"--seed must be >= 0, got {args.seed}")
        task = GlimpseTask(**TASKS[args.preset])
        digits = load_mnist(args.data_dir).split(args.split)
        canvases = fixed_canvas_set(digits.images, digits.labels, task.canvas_size, task.n_clutter,
                                    task.centred_digit, args.seed, task.n_digits)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(args.out, images=canvases.images, labels=canvases.labels)
    except (ValueError, DataError, OSError) as exc:
        return fail(exc)
    print(f"{len(canvases.labels)} {args.preset} canvases of the {args.split} digits, seed {args.seed}: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
