"""Test accuracy of a trained checkpoint (hard or soft attention).

    python evaluate.py --checkpoint checkpoints/ram-cluttered60.pt
    python evaluate.py --checkpoint runs/.../best.pt --images my_canvases.npz --json
    python evaluate.py --checkpoint checkpoints/ram-cluttered60.pt --samples 10   # averaged trajectories

Without --images the checkpoint's own task is rebuilt on the test digits with a fixed seed: the
same 10,000 canvases that train.py reports. Hard models follow the policy mean by default;
``--samples M`` averages the class probabilities of M sampled trajectories and says so.
Exit code 2 for a bad checkpoint, file or option.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from glimpse.canvas import fixed_canvas_set
from glimpse.cli import fail
from glimpse.data import DataError, load_mnist
from glimpse.inference import predict_probabilities
from glimpse.training.checkpoint import CheckpointError, load_model
from glimpse.training.loop import TEST_SEED, VAL_SEED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a .pt written by train.py (best.pt) or shipped in checkpoints/")
    parser.add_argument("--images", help="evaluate on this .npz holding 'images' (N, H, W) uint8 and 'labels' (N,) int")
    parser.add_argument("--split", choices=("test", "val"), default="test",
                        help="without --images: the fixed test set, or the validation set used for model selection")
    parser.add_argument("--samples", type=int, default=0,
                        help="hard models: average this many sampled trajectories instead of following the policy mean")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampled trajectories (--samples)")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--data-dir", default=None, help="MNIST root (as in train.py), for the test canvases")
    parser.add_argument("--json", action="store_true", help="make the last line of stdout a JSON object")
    return parser


def load_images(path: str, canvas_size: int) -> tuple[np.ndarray, np.ndarray]:
    try:
        archive = np.load(path, allow_pickle=False)
        arrays = {name: archive[name] for name in archive.files} if hasattr(archive, "files") else None
    except (OSError, EOFError, ValueError) as exc:  # missing file, not a zip, pickled objects
        raise ValueError(f"cannot read {path} as .npz ({exc})") from exc
    if arrays is None or "images" not in arrays or "labels" not in arrays:
        found = sorted(arrays) if arrays is not None else "a bare array"
        raise ValueError(f"{path} must hold arrays 'images' and 'labels', it has {found}")
    images, labels = arrays["images"], arrays["labels"]
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(f"{path}: 'images' must be (N, H, W) uint8, got {images.dtype} {images.shape}")
    if images.shape[1:] != (canvas_size, canvas_size):
        raise ValueError(f"{path}: canvases are {images.shape[1]}x{images.shape[2]} but the checkpoint was trained "
                         f"on {canvas_size}x{canvas_size}")
    if labels.shape != (len(images),) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{path}: 'labels' must be ({len(images)},) integers, got {labels.dtype} {labels.shape}")
    if len(images) == 0:
        raise ValueError(f"{path} holds no images")
    if labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{path}: labels must be in 0..9")
    return images, labels.astype(np.int64)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.samples < 0 or args.batch_size < 1:
            raise ValueError("--samples must be >= 0 and --batch-size >= 1")
        model, checkpoint = load_model(args.checkpoint)
        task, kind = checkpoint["task"], checkpoint["kind"]
        if args.samples and kind != "ram":
            raise ValueError(f"--samples applies to hard attention only; a {kind} model is deterministic")
        if args.images:
            images, labels = load_images(args.images, task["canvas_size"])
            described = f"{args.images}"
        else:
            data = load_mnist(args.data_dir)
            digits = data.split(args.split)
            seed = TEST_SEED if args.split == "test" else VAL_SEED
            canvases = fixed_canvas_set(digits.images, digits.labels, task["canvas_size"], task["n_clutter"],
                                        task["centred_digit"], seed)
            images, labels = canvases.images, canvases.labels
            described = f"{args.split} set: {len(labels)} canvases of {data.source}, seed {seed}"
    except (ValueError, DataError, CheckpointError) as exc:
        return fail(exc)

    start = time.perf_counter()
    with tqdm(total=len(images), desc="evaluate", unit="img", disable=None) as bar:
        probs = predict_probabilities(kind, model, task, images, args.batch_size, args.samples, args.seed, progress=bar)
    seconds = time.perf_counter() - start
    accuracy = float((probs.argmax(-1).numpy() == labels).mean())
    policy = ("deterministic" if kind != "ram" else "deterministic (policy mean)") if not args.samples else \
        f"averaged over {args.samples} sampled trajectories (seed {args.seed})"
    print(f"{Path(args.checkpoint).name} ({kind}) on {described}")
    print(f"accuracy {accuracy:.4f}, error {100 * (1 - accuracy):.2f} %, n={len(labels)}; {policy}; "
          f"{len(labels) / seconds:.0f} images/s")
    if args.json:
        print(json.dumps({"accuracy": accuracy, "error": 1 - accuracy, "n": int(len(labels)), "kind": kind,
                          "checkpoint": str(args.checkpoint), "images": described, "evaluation": policy,
                          "images_per_second": len(labels) / seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
