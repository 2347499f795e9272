"""The comparison lab: hard vs soft attention and the baselines, side by side, in one report.

    python report.py --train --jobs 2        # train what is missing (7 h of runs: 3.5 h on 2 cores), then report
    python report.py                         # report from the finished runs in runs/report
    python report.py --train --budget 3      # three times the epochs of every model
    python report.py --readme                # also put the headline table and figure in ./README.md
    python report.py --train --converged     # every model to convergence (tens of hours; resumable)
    python report.py --converged --adopt runs/X/best.pt --no-report   # keep its record, build the report later

Writes reports/compare.md with PNG figures beside it. Each model is trained --seeds times
(runs/report/<model>-seed<k>), RAM and DRAW also with 1..8 glimpses (seed 0); interrupted runs
are resumed. --train --jobs 2 keeps two cores busy, one single-threaded run on each. With
--converged every model whose family states a converged budget (the attention models, the ResNets
and the pooled controls) trains with its best-known recipe for those epochs
(runs/report/<model>-converged-seed<k>; the RAM paper's baselines and random glimpses keep their
short runs, shared with the default report) and the report goes to reports/converged/. A record of every finished run
(its learning curve, test results canvas by canvas, and seed 0's weights where the pictures need
them) is kept in <out>/records/: commit it, and the report rebuilds, and --train goes on, on a
machine where runs/report is gone. --adopt checkpoints/ram-cluttered60.pt counts a finished run
of the same recipe, seed and epochs (the converged report's seed 0 of RAM, here) as the report's
own, instead of training it again; the report names the file. Exit codes: 0 done, 1 a training
run failed or the machine refused a write (a full disk), 2 bad input, 130 interrupted (Ctrl-C).
"""
from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from pathlib import Path

from glimpse.cli import ArgumentParser, check_threads, fail
from envs.data import DataError, load_mnist
from glimpse.report.adoption import adopt_checkpoints
from glimpse.report.build import build_report, keep_every_record, keep_record
from glimpse.report.document import HEADLINE_END, HEADLINE_START, update_readme
from glimpse.report.experiments import (ESTIMATED, ESTIMATOR_SAMPLES, GLIMPSE_COUNTS, MODELS, SWEPT, converged,
                                       doubled, sweep, with_samples)
from glimpse.report.runs import RunRequest, budget_epochs, finished_run, train_missing
from glimpse.report.settings import ReportSettings
from glimpse.checkpoint import CheckpointError
from glimpse.cpu import configure_cpu

MAX_SEEDS = 100  # training seeds per model
MAX_BUDGET = 1000  # times the epochs of every model



def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=Path("runs") / "report", help="where the report's runs live")
    parser.add_argument("--out", type=Path, default=None,
                        help="where compare.md and the PNGs go (default reports, with --converged reports/converged)")
    parser.add_argument("--records", type=Path, default=None,
                        help="where a record of each finished run is kept, to report from once its run directory "
                             "is gone (default: OUT/records)")
    parser.add_argument("--adopt", type=Path, nargs="+", default=[], metavar="CHECKPOINT",
                        help="count finished checkpoints (a shipped one, say) as the report's runs of the same "
                             "recipe, seed and epochs: their records are written and those runs not trained")
    parser.add_argument("--train", action="store_true", help="train the missing runs first")
    parser.add_argument("--no-report", action="store_true",
                        help="keep the records of --adopt and --train and stop there: build the report later, on an "
                             "otherwise idle machine, so that its speed columns mean what they say")
    parser.add_argument("--budget", type=float, default=1.0, help="multiply every model's epochs by this")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per model (the glimpse sweep uses seed 0)")
    parser.add_argument("--models", default=",".join(e.name for e in MODELS),
                        help="comma-separated models to compare")
    parser.add_argument("--converged", action="store_true",
                        help="train and compare every model whose family states a converged budget with its best-known "
                             "recipe until its validation error levels off (hours per run on 2 CPU cores; "
                             "resumable), in runs of their own; the RAM paper's baselines and random glimpses "
                             "keep their short budgets. No glimpse sweep or estimator runs")
    parser.add_argument("--glimpses", default=None,
                        help="comma-separated glimpse counts of the RAM and DRAW sweep ('' for none; default "
                             f"{','.join(map(str, GLIMPSE_COUNTS))})")
    parser.add_argument("--estimators", default=None,
                        help="RAM also trained (seed 0) with the leave-one-out baseline over K samples per image, "
                             "for each of these K ('' for none): REINFORCE's baselines at equal wall-clock "
                             f"(default {','.join(map(str, ESTIMATOR_SAMPLES))})")
    parser.add_argument("--jobs", type=int, default=2, help="training runs at once (each with --threads threads)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per training run and for the report")
    parser.add_argument("--max-steps", type=int, default=0,
                        help="cap every run at this many steps (smoke tests: a capped run counts only for a report "
                             "with the same cap; a report without it trains the run on to the end of its epochs)")
    parser.add_argument("--data-dir", default=None, help="MNIST root, or 'bundled' (default: as train.py)")
    parser.add_argument("--grad-batches", type=int, default=200, help="minibatches for the gradient spread")
    parser.add_argument("--speed-steps", type=int, default=20, help="training steps timed per model")
    parser.add_argument("--readme", type=Path, nargs="?", const=Path("README.md"), default=None,
                        help="write the headline table and figure into this README (default ./README.md)")
    return parser


def requests(args) -> list[RunRequest]:
    wanted = [RunRequest(e, seed, budget_epochs(e, args.budget)) for seed in range(args.seeds) for e in args.models]
    for base in (e for e in SWEPT if e in args.models):
        wanted += [RunRequest(e, 0, budget_epochs(e, args.budget)) for e in sweep(base, args.glimpses) if e is not base]
    for base in (e for e in ESTIMATED if e in args.models):
        wanted += [RunRequest(with_samples(base, k), 0, budget_epochs(base, args.budget)) for k in args.estimators]
    return wanted + doubled_requests(args, (0,))


def doubled_requests(args, seeds) -> list[RunRequest]:
    """--converged: each recipe once more at twice the budget, for ``seeds`` (the report trains seed 0's;
    another seed's may be adopted in its place): a plateau that was a pause shows there."""
    if not args.converged:
        return []
    return [RunRequest(doubled(e), seed, budget_epochs(doubled(e), args.budget))
            for e in args.models if e.name.endswith("-converged") for seed in seeds]


def to_train(args) -> list[RunRequest]:
    """The runs --train trains: :func:`requests`, less seed 0's doubled run of a recipe whose doubling
    check a finished run of another seed settles."""
    settled = {r.experiment.name for r in doubled_requests(args, range(1, args.seeds))
               if (run := finished_run(args.runs / r.name, args.records, args.max_steps)) is not None
               and run["train_config"]["epochs"] == r.epochs}  # as the report will read it
    return [r for r in requests(args) if not (r.seed == 0 and r.experiment.name in settled)]


def _counts(flag: str, text: str, minimum: int, why: str) -> tuple[int, ...]:
    """A comma-separated list of counts ('' for none), each at least ``minimum``."""
    try:
        counts = tuple(dict.fromkeys(int(n) for n in text.split(",") if n.strip()))  # each once
    except ValueError:
        raise ValueError(f"{flag} must be comma-separated integers, got {text!r}") from None
    if any(n < minimum for n in counts):
        raise ValueError(f"{flag} counts must be >= {minimum}{why}, got {text!r}")
    return counts


def check(args) -> None:
    """Validate the options; turn --models and --glimpses into experiments and counts."""
    by_name = {e.name: e for e in MODELS}
    names = list(dict.fromkeys(n.strip() for n in args.models.split(",") if n.strip()))  # each once
    unknown = [n for n in names if n not in by_name]
    if unknown or not names:
        raise ValueError(f"--models: unknown {unknown or 'empty list'}; choose from {', '.join(by_name)}")
    args.models = tuple(by_name[n] for n in names)
    if args.converged:
        asked = [flag for flag, value in (("--glimpses", args.glimpses), ("--estimators", args.estimators)) if value]
        if asked:
            raise ValueError(f"{' and '.join(asked)} belong to the short-budget report: leave them out with --converged")
        args.models = tuple(converged(e) for e in args.models)
        args.glimpses = args.estimators = ""
    if args.out is None:
        args.out = Path("reports") / "converged" if args.converged else Path("reports")
    if args.records is None:
        args.records = args.out / "records"
    if args.glimpses is None:
        args.glimpses = ",".join(map(str, GLIMPSE_COUNTS))
    if args.estimators is None:
        args.estimators = ",".join(map(str, ESTIMATOR_SAMPLES))
    args.glimpses = _counts("--glimpses", args.glimpses, 1, "")
    args.estimators = _counts("--estimators", args.estimators, 2, " (1 is the learned baseline, always trained)")
    check_threads(args.threads)
    for name in ("seeds", "jobs", "grad_batches", "speed_steps"):
        if getattr(args, name) < (2 if name == "grad_batches" else 1):
            raise ValueError(f"--{name.replace('_', '-')} must be >= {2 if name == 'grad_batches' else 1}")
    if args.seeds > MAX_SEEDS:
        raise ValueError(f"--seeds must be at most {MAX_SEEDS} (each seed trains every model), got {args.seeds}")
    if not (math.isfinite(args.budget) and 0 < args.budget <= MAX_BUDGET) or args.max_steps < 0:
        raise ValueError(f"--budget must be a number above 0 and at most {MAX_BUDGET}, and --max-steps >= 0 "
                         f"(got --budget {args.budget}, --max-steps {args.max_steps})")
    for flag, path in (("--runs", args.runs), ("--records", args.records), ("--out", args.out)):
        existing = next(p for p in (path, *path.parents) if p.exists())  # "." or "/" at the latest
        if not existing.is_dir():
            raise ValueError(f"{flag} {path}: {'it' if existing == path else existing} is a file, not a directory")
    if args.no_report and args.readme is not None:
        raise ValueError("--readme writes the report's headline: it needs the report that --no-report leaves out")
    if args.readme is not None:  # checked before the work, not after it
        text = args.readme.read_text() if args.readme.is_file() else None
        if text is None or HEADLINE_START not in text or HEADLINE_END not in text:
            raise ValueError(f"--readme {args.readme}: {'no such file' if text is None else 'it has no headline block'} "
                             f"(the report writes between {HEADLINE_START} and {HEADLINE_END})")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check(args)
        load_mnist(args.data_dir)  # the report reads the digits: a bad --data-dir stops it before it trains or writes
        configure_cpu(args.threads)
        if args.train and args.jobs * args.threads > (os.cpu_count() or 1):
            print(f"warning: --jobs {args.jobs} x --threads {args.threads} asks for more cores than this machine's "
                  f"{os.cpu_count()}: the runs will share them and each train slower", file=sys.stderr)
        settings = ReportSettings(args.runs, args.out, tuple(range(args.seeds)), args.data_dir, args.grad_batches,
                                  speed_steps=args.speed_steps, models=args.models, glimpse_counts=args.glimpses,
                                  estimator_samples=args.estimators, converged=args.converged, records_dir=args.records,
                                  budget=args.budget, max_steps=args.max_steps,
                                  command="glimpse-report " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])))
        adoptable = requests(args) + doubled_requests(args, range(1, args.seeds))
        for name, checkpoint in adopt_checkpoints(settings, args.adopt, adoptable):
            print(f"[report] {name}: adopted {checkpoint}", file=sys.stderr)
        left = []  # runs another process is training: the report lists them as not trained
        if args.train:
            failed, left = train_missing(to_train(args), args.runs, jobs=args.jobs, threads=args.threads,
                                   max_steps=args.max_steps, data_dir=args.data_dir, records_dir=args.records,
                                   on_finished=lambda r: keep_record(settings, r.experiment, r.seed))
            if failed:
                print(f"error: {len(failed)} run(s) failed: {', '.join(failed)}; see their logs in {args.runs}",
                      file=sys.stderr)
                return 1
        if args.no_report:  # a run that finished before its record was kept (a crash between) gets it too
            keep_every_record(settings)
        path = None if args.no_report else build_report(settings)
        if args.readme:
            update_readme(args.readme, (args.out / "headline.md").read_text(),
                          os.path.relpath(args.out / "where_they_look.png", args.readme.resolve().parent))
    except (ValueError, DataError, CheckpointError) as exc:
        return fail(exc)
    except OSError as exc:  # the machine's, not the input's: a full disk, a folder it may not write in
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted: finished runs and their records are kept; the same command goes on from there",
              file=sys.stderr)
        return 130
    if left:
        print(f"warning: {len(left)} run(s) were being trained by another process and are reported as not "
              f"trained: {', '.join(left)}. Run the same command again once they finish", file=sys.stderr)
    print(f"report: {path}" if path else f"records: {args.records} (no report built: --no-report)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
