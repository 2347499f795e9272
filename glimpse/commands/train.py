"""Train hard (RAM, DRAM; REINFORCE) or soft (DRAW, Show-Attend-Tell, Spatial Transformer, RAM's
differentiable retina; backprop) visual attention, or a full-image baseline or control.

    python train.py                                   # short hard-attention run (RAM), 60x60 cluttered
    python train.py --mode hard --arch dram --preset multi100 --context-size 50
    python train.py --mode soft --arch draw --preset cluttered100 --epochs 50
    python train.py --mode full --arch cnn            # the paper's full-image conv-net baseline
    python train.py --resume runs/ram-cluttered60-seed0-...   # continue an interrupted run
    torchrun --nproc_per_node=4 train.py --batch-size 128      # 4 processes, 32 images each

Ends by printing the test accuracy of the best (validation-selected) checkpoint and where the
TensorBoard logs went. Exit codes: 0 done, 1 training diverged or the machine refused a
checkpoint's write (a full disk), 2 bad input (an option, a file, a run directory in use), 130
interrupted.
"""
from __future__ import annotations

import sys
from dataclasses import fields

from glimpse.cli import INTERRUPTED, fail
from envs.data import DataError
from glimpse.training import distributed
from glimpse.checkpoint import CheckpointError, check_resumable, load_checkpoint
from glimpse.training.config import TrainConfig, build_parser, config_from_args
from glimpse.training.loop import CheckpointWriteError, TrainingDiverged, _last_checkpoint, train

# The budget, where the data is, and how the machine computes (the last two not bit for bit)
RESUMABLE_OVERRIDES = ("epochs", "max_steps", "threads", "data_dir", "device", "compile")


def resumed_config(args) -> TrainConfig:
    """The interrupted run's own configuration; only budget options may change."""
    path = _last_checkpoint(args.resume)
    checkpoint = load_checkpoint(path)
    check_resumable(path, checkpoint)
    values = dict(checkpoint["train_config"])
    changed = [f.name for f in fields(TrainConfig) if getattr(args, f.name) is not None]
    # an option the run already has, restated (--seed 0 for a seed-0 run), changes nothing
    refused = [name for name in changed if name not in RESUMABLE_OVERRIDES and getattr(args, name) != values.get(name)]
    if refused:
        raise ValueError(f"--resume continues a run with its own settings; cannot change "
                         f"{', '.join('--' + n.replace('_', '-') for n in refused)} "
                         f"(allowed: {', '.join('--' + n.replace('_', '-') for n in RESUMABLE_OVERRIDES)})")
    if args.max_steps and args.max_steps <= checkpoint["step"]:
        raise ValueError(f"--max-steps {args.max_steps}: the run in {path} is already at step {checkpoint['step']}; "
                         f"nothing to train (give more steps, or leave --max-steps out)")
    try:
        return TrainConfig.from_dict({**values, **{name: getattr(args, name) for name in changed}})
    except TypeError as exc:  # an option this version does not know
        raise CheckpointError(f"{path}: its train_config does not fit this version's options ({exc})") from exc
    except ValueError as exc:
        if changed and _valid(values):  # the run's own settings are fine: the fault is an option given here
            raise
        raise CheckpointError(f"{path}: {exc}") from exc


def _valid(values: dict) -> bool:
    try:
        TrainConfig.from_dict(values)
        return True
    except (TypeError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    finished = False
    try:
        config = resumed_config(args) if args.resume else config_from_args(args)
        result = train(config, resume=args.resume)
        main_process, finished = distributed.is_main(), True
    except (ValueError, DataError, CheckpointError, FileExistsError) as exc:
        return fail(exc)
    except CheckpointWriteError as exc:  # the machine's, not the input's (a full disk): as report.py says it
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except TrainingDiverged as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return INTERRUPTED
    finally:
        distributed.cleanup(finished)
    if not main_process:  # under torchrun only rank 0 reports
        return 0
    error = 100 * (1 - result.test_accuracy)
    print(f"best validation accuracy {result.best_val_accuracy:.4f}; "
          f"test accuracy {result.test_accuracy:.4f} (error {error:.2f} %) on {result.n_test} test canvases")
    print(f"data: {result.data_source}; {result.steps} steps in {result.train_seconds:.0f} s")
    print(f"checkpoint: {result.best_checkpoint}")
    print(f"TensorBoard logs: {result.run_dir}  (view: tensorboard --logdir {result.run_dir.parent})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
