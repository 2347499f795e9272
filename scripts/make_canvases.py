"""Write a fresh set of test canvases to an .npz, for ``evaluate.py --images``.

    python scripts/make_canvases.py --preset cluttered60 --seed 20261123 --out fresh60.npz --data-dir DIR
    python evaluate.py --checkpoint checkpoints/stn-cluttered60.pt --images fresh60.npz

Every digit of the split is placed once, by the task's recipe (envs/engine.py), with clutter and
positions drawn from ``--seed``: the same recipe as the fixed test set (seed 2), other canvases.
A seed nobody tuned on gives an independent check of a shipped number. Canvases of the training
digits (``--split train``, ``--limit`` for the first N) show how a model fits what it trained on:
the gap to the test error is what it overfits.

    python scripts/make_canvases.py --preset cluttered60 --split train --limit 10000 --seed 777 --out train60.npz
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from envs.engine import fixed_canvas_set
from envs.data import SPLITS, DataError, load_mnist
from envs.task import TASKS, GlimpseTask
from glimpse.cli import ArgumentParser, fail, interruptible, npz_path, write_npz


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(TASKS), default="cluttered60", help="the task's canvas recipe")
    parser.add_argument("--seed", type=int, required=True, help="seed of clutter and positions")
    parser.add_argument("--split", choices=SPLITS, default="test",
                        help="which digits: train for the fit on what a model trained on")
    parser.add_argument("--limit", type=int, default=None, help="only the split's first N digits")
    parser.add_argument("--out", type=Path, required=True, help="the .npz to write ('images', 'labels')")
    parser.add_argument("--data-dir", default=None, help="MNIST root (as in train.py)")
    args = parser.parse_args(argv)
    try:
        if not 0 <= args.seed < 2**63:  # what the generators take
            raise ValueError(f"--seed must be >= 0 and below 2**63, got {args.seed}")
        npz_path(args.out)
        if args.limit is not None and args.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {args.limit}")
        task = GlimpseTask(**TASKS[args.preset])
        digits = load_mnist(args.data_dir).split(args.split)
        images, labels = digits.images[:args.limit], digits.labels[:args.limit]
        canvases = fixed_canvas_set(images, labels, task.canvas_size, task.n_clutter,
                                    task.centred_digit, args.seed, task.n_digits)
        write_npz(args.out, images=canvases.images, labels=canvases.labels)
    except (ValueError, DataError, OSError) as exc:
        return fail(exc)
    print(f"{len(canvases.labels)} {args.preset} canvases of the {args.split} digits, seed {args.seed}: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
