"""Score every checkpoint in checkpoints/ and print the README's results table (markdown).

    python scripts/checkpoint_table.py --data-dir DIR           # print the table
    python scripts/checkpoint_table.py --data-dir DIR --write   # checkpoints/scores.json, README, docs/results.md
    python scripts/checkpoint_table.py --commands-only --write  # rebuild the commands only

Test error by the same code as evaluate.py (deterministic; for RAM also averaged over --samples
sampled trajectories, as `evaluate.py --samples`), training time as recorded in the checkpoint,
and the command that trained it (in docs/results.md); with --write also the paired tests of
docs/results.md and the leaderboard's lab rows. The scoring is glimpse/scores.py's; this is its command line.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from envs.data import DataError
from envs.task import BENCHMARK_VERSION
from glimpse import leaderboard, scores
from glimpse.checkpoint import CheckpointError, load_checkpoint, training_stages
from glimpse.cli import ArgumentParser, check_threads, fail, interruptible, write_text
from glimpse.progress import progress
from glimpse.training.config import staged_recipe_command
from glimpse.cpu import configure_cpu


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=None, help="MNIST root (as in train.py)")
    parser.add_argument("--checkpoints", type=Path, default=scores.ROOT / "checkpoints",
                        help="the folder of checkpoints to score (its *.pt)")
    parser.add_argument("--samples", type=int, default=None,
                        help="also score hard models averaging this many sampled trajectories (0: skip; default 10, "
                             "or with --only and --paired-only the scores file's own count)")
    parser.add_argument("--write", action="store_true", help="write the scores to checkpoints/scores.json "
                                                             "and the table into README.md")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--only", nargs="+", default=None,
                        help="score only these checkpoints (file names) again; the other rows come from the scores file")
    parser.add_argument("--paired-only", action="store_true",
                        help="keep every row of the scores file; compute only the paired tests again")
    parser.add_argument("--commands-only", action="store_true",
                        help="keep every score and paired test of the scores file; rebuild only each row's command "
                             "from its checkpoint's record (after options are renamed); needs no data")
    args = parser.parse_args(argv)
    try:
        return _score_and_write(args)
    except (ValueError, DataError, CheckpointError, OSError) as exc:
        return fail(exc)


def _score_and_write(args) -> int:
    configure_cpu(check_threads(args.threads))
    args.samples_given = args.samples is not None
    args.samples = 10 if args.samples is None else args.samples
    if args.samples < 0:
        raise ValueError(f"--samples must be >= 0, got {args.samples}")
    if not args.checkpoints.is_dir():
        raise ValueError(f"--checkpoints {args.checkpoints} is not a folder")
    paths = sorted(args.checkpoints.glob("*.pt"))
    if not paths:
        raise ValueError(f"--checkpoints {args.checkpoints} holds no *.pt")
    if args.commands_only:
        kept_scores = json.loads(scores.SCORES.read_text())
        for row in kept_scores["rows"]:
            stages = training_stages(load_checkpoint(args.checkpoints / row["checkpoint"]))
            row["command"] = staged_recipe_command(stages)
        print(scores.commands_table(kept_scores["rows"]))
        if args.write:
            write_text(scores.SCORES, json.dumps(kept_scores, indent=1) + "\n")
            scores.write_tables(kept_scores["rows"], kept_scores["samples"])
            leaderboard.write()
        return 0
    if args.paired_only or args.only:  # rows kept from the scores file keep its trajectory count
        kept_scores = json.loads(scores.SCORES.read_text())
        if args.samples_given and args.samples != kept_scores["samples"]:
            raise ValueError(f"--samples {args.samples}: the rows kept from {scores.SCORES.name} averaged "
                             f"{kept_scores['samples']} trajectories; score every checkpoint to change it")
        args.samples = kept_scores["samples"]
    if args.paired_only:
        rows = kept_scores["rows"]
    elif args.only:
        kept = {row["checkpoint"]: row for row in kept_scores["rows"]}
        unknown = sorted(set(args.only) - {p.name for p in paths})
        if unknown:
            raise ValueError(f"--only: no {', '.join(unknown)} in {args.checkpoints}")
        unscored = sorted({p.name for p in paths} - set(kept) - set(args.only))
        if unscored:
            raise ValueError(f"--only: {', '.join(unscored)} in {args.checkpoints} has no row in {scores.SCORES.name} "
                             f"to keep: name it in --only too")
        rows = [scores.score(p, args.data_dir, args.samples) if p.name in args.only else kept[p.name]
                for p in progress(paths, desc="score", unit="checkpoints", timed=False)]
    else:
        rows = [scores.score(path, args.data_dir, args.samples)
                for path in progress(paths, desc="score", unit="checkpoints", timed=False)]
    text = scores.table(rows, args.samples)
    tests = scores.paired(paths, args.data_dir)
    print(text, scores.commands_table(rows), scores.paired_table(tests), sep="\n\n")
    if args.write:
        write_text(scores.SCORES, json.dumps({"benchmark": BENCHMARK_VERSION, "samples": args.samples, "rows": rows,
                                             "paired": tests}, indent=1) + "\n")
        scores.write_tables(rows, args.samples, tests)
        leaderboard.write()  # the page's lab rows are these scores
    return 0


if __name__ == "__main__":
    sys.exit(main())
