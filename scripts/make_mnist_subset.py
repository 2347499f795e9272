"""Build envs/assets/mnist_subset.npz, the small real-MNIST fallback shipped in the repo.

Deterministic, no randomness: the first PER_CLASS_TRAIN training digits and the first
PER_CLASS_TEST test digits of each class, in file order, from the official MNIST files.

    python scripts/make_mnist_subset.py --data-dir DIR
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

from envs.data import BUNDLED_SUBSET, DataError, _read_torchvision
from glimpse.cli import ArgumentParser, fail, interruptible, npz_path, write_npz

PER_CLASS_TRAIN = 1000
PER_CLASS_TEST = 200


def first_per_class(labels: np.ndarray, per_class: int) -> np.ndarray:
    picks = [np.flatnonzero(labels == c)[:per_class] for c in range(10)]
    return np.sort(np.concatenate(picks))


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="directory holding MNIST/raw in torchvision's layout")
    parser.add_argument("--out", type=Path, default=BUNDLED_SUBSET, help="the .npz to write (default: the shipped one)")
    args = parser.parse_args(argv)
    try:
        out = npz_path(args.out)
        train_x, train_y, test_x, test_y = _read_torchvision(Path(args.data_dir))
        tr, te = first_per_class(train_y, PER_CLASS_TRAIN), first_per_class(test_y, PER_CLASS_TEST)
        write_npz(out, train_images=train_x[tr], train_labels=train_y[tr].astype(np.uint8),
                  test_images=test_x[te], test_labels=test_y[te].astype(np.uint8),
                  train_indices=tr.astype(np.int32), test_indices=te.astype(np.int32))
    except (ValueError, DataError, OSError) as exc:
        return fail(exc)
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB, {len(tr)} train + {len(te)} test digits), sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
