"""Evaluate every checkpoint in checkpoints/ and print the README's results table (markdown).

    python scripts/checkpoint_table.py --data-dir ../shared/datasets

Test error by the same code as evaluate.py (deterministic; for RAM also averaged over --samples
sampled trajectories, as `evaluate.py --samples`), training time as recorded in the checkpoint
(this machine, 2 CPU cores), and the command that trained it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from glimpse.evaluation import evaluate_checkpoint  # noqa: E402
from glimpse.models import get_family  # noqa: E402

REFERENCE = {  # (published, target) test error in %, from shared/reference and the issues
    "ram-mnist28": ("1.12 (RAM, NIPS 2014)", "<= 1.3"),
    "ram-cluttered60": ("4.08 (RAM, NIPS 2014)", "<= 4.5"),
    "ram-cluttered100": ("10.83 (RAM, arXiv)", "<= 9"),
    "draw-cluttered60": ("-", "<= 2.5"),
    "draw-cluttered100": ("3.36 (DRAW)", "<= 3.3"),
    "sat-cluttered60": ("-", "<= 2"),
    "sat-cluttered100": ("-", "<= 3"),
    "ram-multi100": ("-", "-"),
    "sat-multi100": ("-", "-"),  # two digits, both must be right: no published number
    "stn-cluttered60": ("1.7 (ST-CNN, its own cluttered MNIST)", "<= 2"),
}
DEFAULTS = {"run_dir", "run_name", "threads", "device", "data_dir", "log_every", "image_every", "checkpoint_every",
            "val_every", "eval_batch_size", "max_steps"}


def command(config: dict) -> str:
    """The train.py options that apply to the run and differ from the preset's, in the order of the config."""
    from glimpse.training.config import TrainConfig, family_options, resolve_config

    run = TrainConfig.from_dict(config)  # today's option names for a run saved under older ones
    config = run.applicable()  # a Show-Attend-Tell run has no glimpse sensor to state
    chosen = ("mode", "soft_arch", "full_arch", "preset")
    base = resolve_config({k: config[k] for k in chosen if k in config}).to_dict()
    selected = family_options(run.family)
    parts = [f"--{name.replace('_', '-')} {value}" for name, value in selected.items()]
    parts.append(f"--preset {config['preset']}")
    for key, value in config.items():
        if key in DEFAULTS or key in chosen or base.get(key) == value:
            continue
        flag = "--" + key.replace("_", "-")
        parts.append(flag if value is True else f"--no-{flag[2:]}" if value is False else f"{flag} {value}")
    return "python train.py " + " ".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--checkpoints", type=Path, default=ROOT / "checkpoints")
    parser.add_argument("--samples", type=int, default=10,
                        help="also score hard models averaging this many sampled trajectories (0: skip)")
    args = parser.parse_args(argv)
    rows = []
    for path in sorted(args.checkpoints.glob("*.pt")):
        result = evaluate_checkpoint(path, data_dir=args.data_dir, progress=False)
        published, target = REFERENCE.get(path.stem, ("-", "-"))
        minutes = (result["train_seconds"] or 0) / 60
        averaged = "-"
        if get_family(result["kind"]).mode == "hard" and args.samples:
            sampled = evaluate_checkpoint(path, data_dir=args.data_dir, samples=args.samples, progress=False)
            averaged = f"{100 * sampled['error']:.2f}"
        rows.append(f"| `{path.name}` | {100 * result['error']:.2f} | {averaged} | {target} | {published} | "
                    f"{minutes:.0f} min | `{command(result['train_config'])}` |")
    print(f"| checkpoint | test error % (evaluate.py) | RAM, {args.samples} trajectories averaged % | target % | "
          "published % | training time | command |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
