"""Speed of the lab's parts, measured in one process on the same data, printed as tables.

    python benchmarks/speed.py --threads 1               # the CPU rows (a few minutes)
    python benchmarks/speed.py --threads 1 --processes 2 --no-families   # RAM 28x28 on 2 cores, as torchrun
    python benchmarks/speed.py --quick                   # fewer repetitions
    python benchmarks/speed.py --device cuda --episodes 4096,65536 --batch-sizes 128,1024
    python benchmarks/speed.py --device cuda --compile reduce-overhead    # training compiled (CUDA graphs)

Rows:
- the batched env (ClutteredMNIST60-v1, 3 scales of 12x12) in glimpse-steps/s on --device, for
  each --episodes count, with the checks a user gets (validate) and as the trainer runs it
  (trusted actions, no host sync); and gymnasium's sync vectorisation of the single env;
- RAM training on the 28x28 preset (Mnih et al.'s sensor) at batch 128: images/s, FLOPs per image
  (forward and backward, counted by torch.utils.flop_counter) and the fraction of the machine's
  matrix-multiply rate (measured here, at the same thread count) that the step reaches; on the
  CPU also the same training by --processes single-threaded processes together (as torchrun);
- training images/s of each --families family on --preset at each --batch-sizes, evaluation
  images/s, and where a training step's time goes.

Targets and the latest measurements live in docs/speed.md, older ones in docs/notebook/speed-log.md.
Exit code 2 for a bad option.
"""
from __future__ import annotations

import argparse
import sys

import torch

from envs import TASKS
from envs.data import DataError, load_mnist
from envs.engine import fixed_canvas_set
from glimpse.cli import ArgumentParser, check_threads, fail, int_list, interruptible, markdown_table
from glimpse.models import list_families
from glimpse.speed import (TRAINING_PHASES, env_steps_per_second, eval_images_per_second, matmul_gflops,
                           parallel_training_speed, training_flops_per_image, training_speed)
from glimpse.training import distributed
from glimpse.training.config import family_options, resolve_config
from glimpse.cpu import configure_cpu


def timed_families(text: str) -> tuple:
    """--families: "attention" (every attention family), "all" (the controls too) or family names,
    each with how many training steps to time (REINFORCE learners' are the cheapest)."""
    known = {f.name: f for f in list_families()}
    if text in ("attention", "all"):
        chosen = [f for f in known.values() if text == "all" or f.has_attention]
    else:
        names = [name.strip() for name in text.split(",") if name.strip()]
        unknown = [name for name in names if name not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"unknown family {', '.join(unknown) or text!r}: choose attention, all "
                                             f"or names from {', '.join(known)}")
        chosen = [known[name] for name in names]
    return tuple((f.title, family_options(f), 30 if f.learns_by_reinforce else 10) for f in chosen)


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one repetition instead of three")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"),
                        help="where the env, the canvases and the models run")
    parser.add_argument("--episodes", type=int_list, default=(256,), help="batched env sizes to time")
    parser.add_argument("--batch-sizes", type=int_list, default=(128,), help="training batch sizes to time")
    parser.add_argument("--preset", default="cluttered60", choices=("cluttered60", "cluttered100"),
                        help="the task the families are timed on")
    parser.add_argument("--processes", type=int, default=2,
                        help="also time RAM 28x28 training with this many single-threaded CPU processes "
                             "together (as torchrun --nproc_per_node; 0 or 1: skip)")
    parser.add_argument("--families", type=timed_families, default="attention",
                        help="which families' training to time: attention (default), all (with the no-attention "
                             "controls) or comma-separated names")
    parser.add_argument("--no-families", action="store_true", help="only the env and the RAM 28x28 rows")
    parser.add_argument("--data-dir", default=None, help="MNIST root (as in train.py)")
    parser.add_argument("--compile", default="off", choices=("off", "default", "reduce-overhead", "max-autotune"),
                        help="time training compiled in this torch.compile mode (train.py --compile); "
                             "compiling happens in untimed warm-up steps")
    args = parser.parse_args(argv)
    try:
        check_threads(args.threads, zero_means_default=True)
        if args.processes < 0 or 128 % max(1, args.processes):
            raise ValueError(f"--processes must divide the batch of 128, got {args.processes}")
        device = distributed.resolve_device(args.device)
        data = load_mnist(args.data_dir)
    except (ValueError, DataError) as exc:
        return fail(exc)
    configure_cpu(args.threads)
    reps = 1 if args.quick else 3
    gpu = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {device}{gpu}, data: {data.source}")

    env_rows = []
    for n in args.episodes:
        repeats = max(2, min(40, 2_000_000 // (n * 7))) * reps
        for validate in (True, False):
            speed = env_steps_per_second(n, repeats, device, validate, args.data_dir)
            env_rows.append((f"batched, {n:,} episodes, {'validated' if validate else 'trusted'} actions",
                             f"{speed:,.0f}"))
    sync = env_steps_per_second(64, 2 * reps, "cpu", True, args.data_dir, sync=True)
    env_rows.append(("gymnasium SyncVectorEnv of the single env, 64 episodes, CPU", f"{sync:,.0f}"))
    print("\nbatched env, ClutteredMNIST60-v1 (3 scales of 12x12), glimpse-steps/s:")
    print(markdown_table(("env", "glimpse-steps/s"), env_rows, pad=True))

    compiled = {"compile": args.compile}
    warmup = 2 if args.compile == "off" else 6  # CUDA graphs are recorded after a few calls
    config = resolve_config({"preset": "mnist28", "mode": "hard", "batch_size": 128, "data_dir": args.data_dir,
                             **compiled})
    speed, _, learner = training_speed(config, data, 50 * reps, warmup, device=device)
    flops = training_flops_per_image(learner, config.batch_size)
    peak = matmul_gflops(device)
    ram_rows = [("images/s", f"{speed:,.0f}"),
                ("FLOPs per image, forward + backward", f"{flops / 1e6:.2f} M"),
                ("achieved GFLOP/s", f"{speed * flops / 1e9:.1f}"),
                (f"matrix-multiply GFLOP/s here ({torch.get_num_threads()} threads, 128x256 @ 256x256)", f"{peak:.1f}"),
                ("ceiling at that rate, images/s", f"{peak * 1e9 / flops:,.0f}"),
                ("fraction of the ceiling", f"{speed * flops / (peak * 1e9):.0%}")]
    if args.processes > 1 and device.type == "cpu":
        together = parallel_training_speed(config, args.data_dir, 50 * reps, args.processes)
        ram_rows.append((f"images/s, {args.processes} processes of 1 thread (torchrun)", f"{together:,.0f}"))
    print(f"\nRAM training, mnist28 preset, batch 128, on {device}, compile {args.compile}:")
    print(markdown_table(("measure", "value"), ram_rows, pad=True))
    if args.no_families:
        return 0

    rows, phase_rows = [], []
    canvases = fixed_canvas_set(data.test.images[:2000], data.test.labels[:2000], TASKS[args.preset]["canvas_size"],
                                TASKS[args.preset]["n_clutter"], False, 0).images
    for name, overrides, steps in args.families:
        for batch_size in args.batch_sizes:
            config = resolve_config({"preset": args.preset, "batch_size": batch_size, "data_dir": args.data_dir,
                                     **overrides, **compiled})
            train_speed, phases, learner = training_speed(config, data, steps * reps, warmup, device=device)
            rows.append((name, f"{batch_size:,}", f"{train_speed:,.0f}"))
            if batch_size == args.batch_sizes[0]:
                eval_speed = eval_images_per_second(learner.family.name, learner.model, learner.task, canvases)
                rows[-1] += (f"{eval_speed:,.0f}",)
                phase_rows.append((name, *(f"{phases[p]:.1f}" for p in TRAINING_PHASES),
                                   f"{sum(phases.values()):.1f}"))
            else:
                rows[-1] += ("",)
    print(f"\nfamilies, preset {args.preset}, on {device}, compile {args.compile}:")
    print(markdown_table(("model", "batch", "training images/s", "evaluation images/s"), rows, pad=True))
    print(f"\nmilliseconds per training step (batch {args.batch_sizes[0]}):")
    print(markdown_table(("model", *TRAINING_PHASES, "total"), phase_rows, pad=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
