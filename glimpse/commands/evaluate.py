"""Test accuracy of a trained checkpoint (hard or soft attention).

    python evaluate.py --checkpoint checkpoints/ram-cluttered60.pt
    python evaluate.py --checkpoint runs/.../best.pt --images my_canvases.npz --json
    python evaluate.py --checkpoint checkpoints/ram-cluttered60.pt --samples 10   # averaged trajectories
    python evaluate.py --checkpoint checkpoints/ram-cluttered60.pt --canvas-seed 20261123   # fresh canvases
    python evaluate.py --checkpoint runs/.../best.pt --against checkpoints/ram-cluttered60.pt  # paired test
    python evaluate.py --model my_module:predict --preset cluttered60   # a model that is not in the lab

Without --images the checkpoint's own task is rebuilt on the test digits with a fixed seed: the
same canvases that train.py reports on. Hard models follow the policy mean by default;
``--samples M`` averages the class probabilities of M sampled trajectories (drawn with the std the
run's schedule ends at, even for a ``best.pt`` saved earlier in the run) and says so. The
error comes with its 95 % (Wilson) interval, the README's convention. ``--against B`` scores a
second checkpoint on the same canvases and compares the two canvas by canvas (McNemar's exact
test): the test behind every "A beats B" in the docs. ``--model module:callable --preset TASK``
scores a model that is not in the lab's registry (glimpse.benchmark.score: a callable from canvases
(B, 1, H, W) in [0, 1] to logits (B, 10)) on the same canvases; with ``--against CHECKPOINT`` it is
compared with a checkpoint canvas by canvas.
Exit code 2 for a bad checkpoint, file, model or option.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from glimpse.cli import ArgumentParser, check_threads, fail, interruptible
from envs.data import DataError
from glimpse.evaluation import compare_checkpoints, evaluate_checkpoint
from glimpse.checkpoint import CheckpointError, load_checkpoint
from glimpse.training.distributed import resolve_device
from glimpse.cpu import configure_cpu

MAX_SAMPLES = 1000  # --samples: sampled trajectories averaged per canvas


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", help="a .pt written by train.py (best.pt) or shipped in checkpoints/")
    parser.add_argument("--model", metavar="MODULE:CALLABLE",
                        help="instead of --checkpoint: score this callable, canvases (B, 1, H, W) float in [0, 1] "
                             "-> logits (B, 10), imported from MODULE (a module on the Python path or a .py file), "
                             "on --preset's canvases (glimpse.benchmark.score)")
    parser.add_argument("--preset", default=None, help="with --model: the task whose canvases it reads "
                                                        "(cluttered60, cluttered100, ...)")
    parser.add_argument("--name", default=None, help="with --model: the model's name in the result (and on the "
                                                     "leaderboard; default MODULE:CALLABLE)")
    parser.add_argument("--against", metavar="CHECKPOINT",
                        help="also score this checkpoint on the same canvases, with the same options, and test "
                             "canvas by canvas whether the two differ (McNemar's exact test)")
    parser.add_argument("--images", help="evaluate on this .npz holding 'images' (N, H, W) uint8 and 'labels' (N,) "
                                         "int ((N, K), left to right, for a model that reads K digits)")
    parser.add_argument("--split", choices=("test", "val"), default=None,
                        help="without --images: the fixed test set (the default), or the validation set used for "
                             "model selection")
    parser.add_argument("--samples", type=int, default=0,
                        help="hard models: average this many sampled trajectories instead of following the policy mean "
                             "(drawn with the std the run's schedule ends at, --location-std-final)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the sampled trajectories (--samples) and of where the first glimpses fall "
                             "for a model trained with --first-location random")
    parser.add_argument("--canvas-seed", type=int, default=None,
                        help="without --images: draw the split's canvases with this seed instead of the fixed set's "
                             "(fresh canvases by the same recipe, e.g. to check a shipped number independently)")
    parser.add_argument("--limit", type=int, default=None, help="score only the first N canvases")
    parser.add_argument("--batch-size", type=int, default=500,
                        help="canvases per forward pass (memory only: the scores do not depend on it)")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu",
                        help="where the model runs (default cpu, where the README's numbers were scored; the "
                             "canvases are the same on every device, the float rounding is not)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: small models run fastest on one thread of a busy machine)")
    parser.add_argument("--data-dir", default=None, help="MNIST root (as in train.py), for the test canvases")
    parser.add_argument("--json", action="store_true", help="make the last line of stdout a JSON object")
    return parser


def report(result: dict) -> None:
    """Print one checkpoint's error with its interval, how it was scored, and its provenance."""
    low, high = result["error_interval"]
    print(f"accuracy {result['accuracy']:.4f}, error {100 * result['error']:.2f} % (95 % interval "
          f"{100 * low:.2f}-{100 * high:.2f}), n={result['n']}; "
          f"{result['evaluation']}; {result['images_per_second']:.0f} images/s on {result['device']}")
    print(result["provenance"])
    if "digit_accuracy" in result:
        print(f"{result['n_digits']} digits per canvas: accuracy counts canvases with every digit right; "
              f"per digit {result['digit_accuracy']:.4f}")


def public(result: dict) -> dict:
    """The JSON-able part of a result (no training config, no per-canvas array)."""
    return {key: value for key, value in result.items() if key not in ("train_config", "right")}


def outside_model(spec: str):
    """The callable named by ``module:callable`` (a module on the Python path or in the current
    directory, or a .py file)."""
    import importlib
    import importlib.util
    import os
    import traceback

    if spec.count(":") != 1 or not all(spec.split(":")):
        raise ValueError(f"--model must be MODULE:CALLABLE, got {spec!r}")
    where, name = spec.split(":")
    try:
        if where.endswith(".py"):
            loaded = importlib.util.spec_from_file_location(Path(where).stem, where)
            if loaded is None or not Path(where).is_file():
                raise ValueError(f"--model: no file {where}")
            module = importlib.util.module_from_spec(loaded)
            folder = str(Path(where).resolve().parent)  # its sibling modules import, as under python FILE
            sys.path.insert(0, folder)
            try:
                loaded.loader.exec_module(module)
            finally:
                sys.path.remove(folder)
        else:
            # the installed glimpse-evaluate does not look in the current directory, as python does
            if os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.append(os.getcwd())
            module = importlib.import_module(where)
    except ValueError:
        raise
    except (Exception, SystemExit) as exc:  # the user's module failed (or exited) on import: where, in one line
        frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        at = f" at {frame.filename}:{frame.lineno}" if frame and not isinstance(exc, (ImportError, SyntaxError)) else ""
        raise ValueError(f"--model: cannot import {where} ({type(exc).__name__}: {exc}{at})") from exc
    predict = getattr(module, name, None)
    if not callable(predict):
        raise ValueError(f"--model: {where} has no callable {name!r}")
    return predict


def score_outside_model(args, device) -> int:
    """evaluate.py --model: the outside model's benchmark result, and with --against a checkpoint
    on the same canvases and McNemar's test of the two."""
    from glimpse.benchmark import benchmark_task, canvas_recipe, score
    from glimpse.stats import mcnemar

    if args.preset is None:
        raise ValueError("--model needs --preset: the task whose canvases the model reads")
    if args.images is not None or args.samples:
        raise ValueError("--model scores the benchmark's canvases: --images and --samples are for checkpoints")
    if args.against is not None:  # refused before the outside model's scoring, not after it
        task = load_checkpoint(args.against)["task"]
        if canvas_recipe(task) != canvas_recipe(benchmark_task(args.preset)[1]):
            raise ValueError(f"--against {args.against} reads other canvases than --preset {args.preset}: a paired "
                             f"test needs the same canvases")
    result = score(outside_model(args.model), args.preset, split=args.split, canvas_seed=args.canvas_seed,
                   device=device, batch_size=args.batch_size, data_dir=args.data_dir, limit=args.limit,
                   model=args.name or args.model)
    other = None
    if args.against is not None:  # before anything is printed: a refusal leaves stdout empty
        other = evaluate_checkpoint(args.against, split=args.split, data_dir=args.data_dir, seed=args.seed,
                                    batch_size=args.batch_size, canvas_seed=args.canvas_seed, limit=args.limit,
                                    device=device, per_canvas=True, progress=False)
        if len(other["right"]) != result.n or other["canvas_hash"] != result.set_hash:
            raise ValueError(f"{args.against} reads other canvases than --preset {args.preset}: a paired test "
                             f"needs the same canvases")
    low, high = result.error_interval
    print(f"{result.model} on {result.split} canvases of {result.task} (benchmark v{result.benchmark}, seed "
          f"{result.canvas_seed}, hash {result.set_hash}): error {100 * result.error:.2f} % (95 % interval "
          f"{100 * low:.2f}-{100 * high:.2f}), n={result.n}; reads the whole canvas")
    if result.mnist_subset:
        print("warning: the canvases hold the bundled subset's digits, not MNIST's test set: this error does not "
              "compare with the papers' or the leaderboard's", file=sys.stderr)
    summary = result.saved()
    if other is not None:
        test = mcnemar(result.right, other["right"])
        print(f"against {Path(args.against).name}: error {100 * other['error']:.2f} %; canvas by canvas "
              f"{test['only_a']} read right only by {result.model}, {test['only_b']} only by {args.against}; "
              f"McNemar's exact p = {test['p']:.3g}")
        summary["against"] = {**public(other), "only_this": test["only_a"], "only_against": test["only_b"],
                              "p": test["p"]}
    if args.json:
        print(json.dumps(summary))
    return 0


@interruptible
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if (args.checkpoint is None) == (args.model is None):
            raise ValueError("give --checkpoint (a lab checkpoint) or --model MODULE:CALLABLE (any model), one of them")
        if args.name is not None and args.model is None:
            raise ValueError("--name names the result of a --model (a checkpoint is named by its file)")
        check_threads(args.threads)
        if args.canvas_seed is not None and not 0 <= args.canvas_seed < 2**63:  # for --model too
            raise ValueError(f"--canvas-seed must be >= 0 and below 2**63, got {args.canvas_seed}")
        if not 0 <= args.seed < 2**32:  # as train.py's --seed
            raise ValueError(f"--seed must be >= 0 and below 2**32, got {args.seed}")
        if args.samples > MAX_SAMPLES:
            raise ValueError(f"--samples must be at most {MAX_SAMPLES} trajectories per canvas, got {args.samples}")
        if args.images is not None and args.split is not None:
            raise ValueError("--split chooses the benchmark's canvases: --images brings its own")
        args.split = args.split or "test"
        configure_cpu(args.threads)
        if args.model is not None:
            return score_outside_model(args, resolve_device(args.device))
        if args.preset is not None:
            raise ValueError("--preset is for --model: a checkpoint reads its own task")
        options = dict(images_file=args.images, split=args.split, data_dir=args.data_dir, samples=args.samples,
                       seed=args.seed, batch_size=args.batch_size, canvas_seed=args.canvas_seed, limit=args.limit,
                       device=resolve_device(args.device))
        if args.against is None:
            result, paired = evaluate_checkpoint(args.checkpoint, **options), None
        else:
            paired = compare_checkpoints(args.checkpoint, args.against, **options)
            result = paired["a"]
    except (ValueError, DataError, CheckpointError) as exc:
        return fail(exc)
    print(f"{Path(args.checkpoint).name} ({result['kind']}) on {result['images']}")
    report(result)
    if paired is not None:
        other = paired["b"]
        print(f"against {Path(args.against).name} ({other['kind']}) on the same canvases")
        report(other)
        print(f"canvas by canvas: {paired['only_a']} read right only by {args.checkpoint}, "
              f"{paired['only_b']} only by {args.against}; McNemar's exact p = {paired['p']:.3g} "
              f"({'a difference' if paired['p'] < 0.05 else 'no difference shown'} at the 5 % level)")
    if args.json:
        summary = public(result)
        if paired is not None:
            summary["against"] = {**public(paired["b"]), "only_this": paired["only_a"],
                                  "only_against": paired["only_b"], "p": paired["p"]}
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
