"""Did the attention find the digit? Where a checkpoint looked, against where the digit was.

    python scripts/localisation.py --checkpoint checkpoints/ram-cluttered100.pt --data-dir ../shared/datasets

On the fixed test canvases (the ones evaluate.py scores), for RAM, DRAW and Show-Attend-Tell
checkpoints: at each step, the median distance in pixels from where the model looked to the
digit's centre and the share of canvases looked at within --radius of it; then how many canvases
had some step within the radius ("found"), and the test error where the digit was found and where
it was not. See glimpse/localisation.py for what "where it looked" means for each model.
Exit code 2 for a bad checkpoint or option.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from glimpse.cli import fail  # noqa: E402
from glimpse.data import DataError  # noqa: E402
from glimpse.localisation import localise_checkpoint  # noqa: E402
from glimpse.training.checkpoint import CheckpointError  # noqa: E402


def percent(value) -> str:
    return "-" if value is None else f"{100 * value:.2f} %"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a RAM, DRAW or Show-Attend-Tell checkpoint")
    parser.add_argument("--radius", type=float, default=10.0,
                        help="pixels from the digit's centre that count as looking at it (the digit is 28x28)")
    parser.add_argument("--split", choices=("test", "val"), default="test")
    parser.add_argument("--seed", type=int, default=0, help="where random first glimpses fall, as evaluate.py --seed")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--data-dir", default=None, help="MNIST root (as in train.py)")
    parser.add_argument("--json", action="store_true", help="make the last line of stdout a JSON object")
    args = parser.parse_args(argv)
    try:
        result = localise_checkpoint(args.checkpoint, data_dir=args.data_dir, split=args.split, radius=args.radius,
                                     seed=args.seed, batch_size=args.batch_size)
    except (ValueError, DataError, CheckpointError) as exc:
        return fail(exc)
    print(f"{Path(args.checkpoint).name} ({result['kind']}), {result['n']} {args.split} canvases, "
          f"error {percent(result['error'])}")
    print("| step | median distance to the digit (px) | within %g px |" % args.radius)
    print("|---|---|---|")
    for step, (median, within) in enumerate(zip(result["median_distance_per_step"],
                                                result["within_radius_per_step"]), 1):
        print(f"| {step} | {median:.1f} | {100 * within:.1f} % |")
    print(f"found (some step within {args.radius:g} px): {percent(result['found'])} of canvases; error where found "
          f"{percent(result['error_when_found'])}, where not {percent(result['error_when_not_found'])}; "
          f"{percent(result['share_of_errors_not_found'])} of the errors are on canvases where it never found the digit")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
