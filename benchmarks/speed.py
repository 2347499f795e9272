"""Speed of the lab's parts, measured in one process on the same data, printed as a table.

    python benchmarks/speed.py                 # full measurement (about a minute)
    python benchmarks/speed.py --quick         # fewer repetitions
    python benchmarks/speed.py --device cuda --preset cluttered100   # the models on a GPU, 100x100

Rows: env steps/s of ClutteredMNIST60-v0 (3 scales of 12x12) batched (vector_entry_point)
vs gymnasium's sync vectorisation (numpy, on the CPU); training images/s of each model at
batch 128 on a cluttered preset (--preset, 60x60 by default), for every attention family of the
registry; evaluation images/s; then the
milliseconds of a training step spent making the data and the loss, in backward, and in the
optimizer. Targets (2 cores): batched env >= 100,000 steps/s and >= 10x sync; RAM training
>= 5,000 images/s. Exit code 2 for a bad option.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from envs.canvas import fixed_canvas_set  # noqa: E402
from glimpse.cli import fail, markdown_table  # noqa: E402
from envs.data import DataError, load_mnist  # noqa: E402
from glimpse.speed import TRAINING_PHASES, env_steps_per_second, eval_images_per_second, training_speed  # noqa: E402
from glimpse.training import distributed  # noqa: E402
from glimpse.models import list_families  # noqa: E402
from glimpse.training.config import family_options, resolve_config  # noqa: E402

# every registered attention family, with how many training steps to time (RAM's are the cheapest)
MODELS = tuple((f.title, family_options(f), 30 if f.mode == "hard" else 10)
               for f in list_families() if f.has_attention)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"),
                        help="where the models train and predict (the envs and canvases are numpy, on the CPU)")
    parser.add_argument("--preset", default="cluttered60", choices=("cluttered60", "cluttered100"),
                        help="the task and model sizes the models are timed on")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    try:
        if args.threads < 0:
            raise ValueError(f"--threads must be >= 0, got {args.threads}")
        device = distributed.resolve_device(args.device)
        data = load_mnist(args.data_dir)
    except (ValueError, DataError) as exc:
        return fail(exc)
    if args.threads:
        torch.set_num_threads(args.threads)
    reps = 1 if args.quick else 3
    rows = []
    batched = env_steps_per_second("vector_entry_point", 256, 40 * reps, args.data_dir)
    sync = env_steps_per_second("sync", 256, 2 * reps, args.data_dir)
    rows.append(("env steps/s, ClutteredMNIST60, 256 envs, batched", f"{batched:,.0f}"))
    rows.append(("env steps/s, same env, gymnasium sync", f"{sync:,.0f}"))
    rows.append(("batched / sync", f"{batched / sync:.1f}x"))
    phase_rows = []
    for name, overrides, steps in MODELS:
        config = resolve_config({"preset": args.preset, "batch_size": 128, "data_dir": args.data_dir, **overrides})
        canvases = fixed_canvas_set(data.test.images[:2000], data.test.labels[:2000], config.canvas_size,
                                    config.n_clutter, False, 0).images
        train_speed, phases, learner = training_speed(config, data, steps * reps, device=device)
        eval_speed = eval_images_per_second(learner.family.name, learner.model, learner.task, canvases)
        rows.append((f"training images/s, {name}, batch 128", f"{train_speed:,.0f}"))
        rows.append((f"evaluation images/s, {name}", f"{eval_speed:,.0f}"))
        phase_rows.append((name, *(f"{phases[p]:.1f}" for p in TRAINING_PHASES), f"{sum(phases.values()):.1f}"))
    gpu = f", {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, models on {device}{gpu}, "
          f"preset {args.preset}, data: {data.source}")
    print(markdown_table(("measure", "value"), rows, pad=True))
    print("\nmilliseconds per training step (batch 128):")
    print(markdown_table(("model", *TRAINING_PHASES, "total"), phase_rows, pad=True))
    return 0

if __name__ == "__main__":
    sys.exit(main())
