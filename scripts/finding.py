"""Did the attention find the digit? Where a checkpoint looked, against where the digit was.

    python scripts/finding.py --checkpoint checkpoints/ram-cluttered100.pt --data-dir DIR
    python scripts/finding.py --checkpoint checkpoints/*-cluttered*.pt --data-dir DIR

On the fixed test canvases (the ones evaluate.py scores), for the checkpoints of every family with
attention (RAM, DRAM, DRAW, Show-Attend-Tell, the Spatial Transformer, the differentiable retina)
(among several, one without attention is skipped with a note): at each step, the median distance
in pixels from where the model looked to the digit's centre and the share of canvases looked at
within --radius of it; then how many canvases had some step within the radius ("found"), and the
test error where the digit was found and where it was not; with several checkpoints, one table row
each. A two-digit checkpoint (multi100) gets, per digit in reading order, whether the steps that
answer it looked at it or only at the other digit and its error where they did, and the canvas
error by the gap between the digits' left edges (its own table, also among several checkpoints).
`--canvas-seed S` measures on fresh canvases drawn from seed S instead. See glimpse/finding.py for
what "where it looked" means for each model.
Exit code 2 for a bad checkpoint or option.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from glimpse.cli import ArgumentParser, check_threads, fail, interruptible
from envs.data import DataError
from glimpse.finding import DEFAULT_RADIUS, NoAttention, localise_checkpoint
from glimpse.checkpoint import CheckpointError
from glimpse.progress import progress
from glimpse.cpu import configure_cpu


def percent(value) -> str:
    return "-" if value is None else f"{100 * value:.2f} %"


def which_canvases(result: dict) -> str:
    """'test canvases', or for --canvas-seed 'fresh test canvases (seed S)'."""
    seed = result.get("canvas_seed")
    return f"{result['split']} canvases" if seed is None else f"fresh {result['split']} canvases (seed {seed})"


def print_steps(result: dict, args) -> None:
    print(f"{Path(result['checkpoint']).name} ({result['kind']}), {result['n']} {which_canvases(result)}, "
          f"error {percent(result['error'])}")
    print("| step | median distance to the digit (px) | within %g px |" % args.radius)
    print("|---|---|---|")
    for step, (median, within) in enumerate(zip(result["median_distance_per_step"],
                                                result["within_radius_per_step"]), 1):
        print(f"| {step} | {median:.1f} | {100 * within:.1f} % |")
    print(f"found (some step within {args.radius:g} px): {percent(result['found'])} of canvases; error where found "
          f"{percent(result['error_when_found'])}, where not {percent(result['error_when_not_found'])}; "
          f"{percent(result['share_of_errors_not_found'])} of the errors are on canvases where it never found "
          "the digit")


def print_reading(result: dict) -> None:
    """A checkpoint that reads several digits per canvas: per digit, then by the digits' gap."""
    print(f"{Path(result['checkpoint']).name} ({result['kind']}), {result['n']} {which_canvases(result)} of "
          f"{result['n_digits']} digits, error {percent(result['error'])} (every digit right)")
    print(f"| digit (reading order) | digit error | its steps looked within {result['radius']:g} px of it | "
          "its error there | looked only at another digit | answered another digit's label |")
    print("|---|---|---|---|---|---|")
    for k in range(result["n_digits"]):
        print(f"| {k + 1} | {percent(result['digit_error'][k])} | {percent(result['found'][k])} | "
              f"{percent(result['error_where_found'][k])} | {percent(result['only_another_digit'][k])} | "
              f"{percent(result['answered_another_digit'][k])} |")
    print("| gap between neighbouring digits' left edges | share of canvases | error |")
    print("|---|---|---|")
    for row in result["error_by_gap"]:
        span = f">= {row['low']} px" if row["high"] is None else f"{row['low']}-{row['high'] - 1} px"
        print(f"| {span} | {percent(row['share'])} | {percent(row['error'])} |")


def print_table(results: list[dict], radius: float) -> None:
    print(f"{results[0]['n']} {which_canvases(results[0])} each")
    print(f"| checkpoint | {results[0]['split']} error | digit found (a step within {radius:g} px) | median distance "
          "at the last step "
          "(px) | error where found | error where not found | errors where never found |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| `{Path(r['checkpoint']).name}` | {percent(r['error'])} | {percent(r['found'])} | "
              f"{r['median_distance_per_step'][-1]:.1f} | {percent(r['error_when_found'])} | "
              f"{percent(r['error_when_not_found'])} | {percent(r['share_of_errors_not_found'])} |")


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, nargs="+",
                        help="checkpoints of attention families (several: a summary table)")
    parser.add_argument("--radius", type=float, default=DEFAULT_RADIUS,
                        help="pixels from the digit's centre that count as looking at it (the digit is 28x28)")
    parser.add_argument("--split", choices=("test", "val"), default="test", help="which fixed canvases")
    parser.add_argument("--seed", type=int, default=0, help="where random first glimpses fall, as evaluate.py --seed")
    parser.add_argument("--canvas-seed", type=int, default=None,
                        help="fresh canvases of the split's digits drawn from this seed, as evaluate.py --canvas-seed")
    parser.add_argument("--limit", type=int, default=None, help="only the first N canvases (a quick look)")
    parser.add_argument("--batch-size", type=int, default=500, help="canvases per forward pass")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--data-dir", default=None, help="MNIST root (as in train.py)")
    parser.add_argument("--json", action="store_true",
                        help="make the last line of stdout JSON: an object (a list of them for several checkpoints)")
    args = parser.parse_args(argv)
    try:
        configure_cpu(check_threads(args.threads))
        if not 0 <= args.seed < 2**32:  # as evaluate.py's --seed
            raise ValueError(f"--seed must be >= 0 and below 2**32, got {args.seed}")
    except ValueError as exc:
        return fail(exc)
    results = []
    for checkpoint in progress(args.checkpoint, desc="find", unit="checkpoints", timed=False,
                               disable=len(args.checkpoint) == 1):
        try:
            bar = (lambda n: progress(total=n, desc="find", unit="canvases")) if len(args.checkpoint) == 1 else None
            results.append(localise_checkpoint(checkpoint, data_dir=args.data_dir, split=args.split,
                                               radius=args.radius, seed=args.seed, batch_size=args.batch_size,
                                               canvas_seed=args.canvas_seed, limit=args.limit, progress=bar))
        except NoAttention as exc:
            if len(args.checkpoint) == 1:
                return fail(exc)
            print(f"skipped {checkpoint}: {exc}", file=sys.stderr)  # a glob such as checkpoints/*.pt
        except (ValueError, DataError, CheckpointError) as exc:
            return fail(exc)
    if not results:
        return fail(ValueError("none of these checkpoints has attention to locate"))
    single = [r for r in results if "n_digits" not in r]
    if len(single) == 1 and len(results) == 1:
        print_steps(single[0], args)
    elif single:
        print_table(single, args.radius)
    for result in results:
        if "n_digits" in result:
            print_reading(result)
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
