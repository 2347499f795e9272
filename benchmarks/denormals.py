"""What flushing denormal floats to zero buys: training and evaluation images/s of trained
checkpoints with denormals kept (torch's default) and flushed (what train.py, evaluate.py and
report.py set, glimpse.cpu.configure_cpu), back to back in one process.

    python benchmarks/denormals.py --threads 1 --data-dir DIR            # the shipped 60x60 checkpoints
    python benchmarks/denormals.py --threads 1 --checkpoints checkpoints/draw-cluttered60.pt

Denormals (below 1.2e-38 in float32) cost some x86 CPUs microcode on every multiply; where a
model makes many of them (a DRAW filter's tail), its matrix products slow down. This times
trained models, whose filters are the narrow ones; benchmarks/speed.py times fresh weights, and
flushes as training does. Each training step continues from the checkpoint's weights (the
optimiser starts afresh). Latest measurements:
docs/speed.md. Exit code 2 for a bad option or checkpoint.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from envs.data import DataError, load_mnist
from envs.engine import fixed_canvas_set
from glimpse.checkpoint import CheckpointError, load_checkpoint
from glimpse.cli import ArgumentParser, check_threads, fail, interruptible, markdown_table
from glimpse.cpu import configure_cpu
from glimpse.models import get_family
from glimpse.progress import progress
from glimpse.speed import eval_images_per_second, training_speed
from glimpse.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_60 = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "checkpoints").glob("*-cluttered60.pt"))


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoints", nargs="+", default=SHIPPED_60, help="checkpoints to time (default: the "
                        "shipped 60x60 ones)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per setting (default 20)")
    parser.add_argument("--data-dir", default=None,
                        help="MNIST root (as in train.py: default $GLIMPSE_DATA, ./data, ~/.cache/glimpse)")
    return parser


def speeds(payload: dict, data, canvases, steps: int, flush: bool) -> tuple[float, float]:
    """(training images/s at batch 128, evaluation images/s) of the checkpoint's model, denormals
    flushed to zero or kept."""
    torch.set_flush_denormal(flush)
    config = TrainConfig.from_dict({**payload["train_config"], "batch_size": 128, "data_dir": None})
    train, _, learner = training_speed(config, data, steps, warmup=2, weights=payload["model_state"])
    learner.model.load_state_dict(payload["model_state"])  # evaluation reads the checkpoint's own weights
    learner.model.eval()
    return train, eval_images_per_second(payload["kind"], learner.model, payload["task"], canvases)


@interruptible
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        configure_cpu(check_threads(args.threads))
        if args.steps < 1:
            raise ValueError(f"--steps must be >= 1, got {args.steps}")
        # the defaults are named from the clone's root, and found there from any working directory
        payloads = {path: load_checkpoint(ROOT / path if args.checkpoints is SHIPPED_60 else path)
                    for path in args.checkpoints}
        data = load_mnist(args.data_dir)
    except (ValueError, DataError, CheckpointError, OSError) as exc:
        return fail(exc)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, data: {data.source}")
    rows = []
    for path, payload in progress(payloads.items(), desc="checkpoints", unit="file"):
        task = payload["task"]
        canvases = fixed_canvas_set(data.test.images[:1000], data.test.labels[:1000], task["canvas_size"],
                                    task["n_clutter"], task["centred_digit"], 0).images
        kept, flushed = (speeds(payload, data, canvases, args.steps, flush) for flush in (False, True))
        rows.append((get_family(payload["kind"]).title, Path(path).name, f"{kept[0]:,.0f}", f"{flushed[0]:,.0f}",
                     f"{flushed[0] / kept[0]:.2f}", f"{kept[1]:,.0f}", f"{flushed[1]:,.0f}", f"{flushed[1] / kept[1]:.2f}"))
    torch.set_flush_denormal(True)
    print(markdown_table(("model", "checkpoint", "training images/s, kept", "flushed", "x", "evaluation images/s, kept",
                          "flushed", "x"), rows, pad=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
