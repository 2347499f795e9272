"""Speed of the lab's parts, measured in one process on the same data, printed as a table.

    python benchmarks/speed.py                 # full measurement (about a minute)
    python benchmarks/speed.py --quick         # fewer repetitions

Rows: env steps/s of ClutteredMNIST60-v0 (3 scales of 12x12) batched (vector_entry_point)
vs gymnasium's sync vectorisation; training images/s of each model at batch 128 on its
60x60 cluttered preset; evaluation images/s. Targets (2 cores): batched env >= 100,000
steps/s and >= 10x sync; RAM training >= 5,000 images/s.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from glimpse.canvas import fixed_canvas_set  # noqa: E402
from glimpse.data import load_mnist  # noqa: E402
from glimpse.speed import env_steps_per_second, eval_images_per_second, training_images_per_second  # noqa: E402
from glimpse.training.config import resolve_config  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    data = load_mnist(args.data_dir)
    reps = 1 if args.quick else 3
    rows = []
    batched = env_steps_per_second("vector_entry_point", 256, 40 * reps, args.data_dir)
    sync = env_steps_per_second("sync", 256, 2 * reps, args.data_dir)
    rows.append(("env steps/s, ClutteredMNIST60, 256 envs, batched", f"{batched:,.0f}"))
    rows.append(("env steps/s, same env, gymnasium sync", f"{sync:,.0f}"))
    rows.append(("batched / sync", f"{batched / sync:.1f}x"))
    canvases = fixed_canvas_set(data.test.images[:2000], data.test.labels[:2000], 60, 4, False, 0).images
    for name, overrides, steps in (("RAM (hard)", {"mode": "hard"}, 30), ("DRAW (soft)", {"mode": "soft", "soft_arch": "draw"}, 10),
                                   ("Show-Attend-Tell (soft)", {"mode": "soft", "soft_arch": "sat"}, 4)):
        config = resolve_config({"preset": "cluttered60", "batch_size": 128, "data_dir": args.data_dir, **overrides})
        train_speed, learner = training_images_per_second(config, data, steps * reps)
        eval_speed = eval_images_per_second(learner.kind, learner.model, learner.task, canvases)
        rows.append((f"training images/s, {name}, batch 128", f"{train_speed:,.0f}"))
        rows.append((f"evaluation images/s, {name}", f"{eval_speed:,.0f}"))
    width = max(len(r[0]) for r in rows)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, data: {data.source}")
    print(f"| {'measure':<{width}} | value |\n|{'-' * (width + 2)}|-------|")
    for label, value in rows:
        print(f"| {label:<{width}} | {value} |")


if __name__ == "__main__":
    main()
